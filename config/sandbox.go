package config

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// Sandbox configures the gateway's own code-execution tools (sandbox/).
type Sandbox struct {
	// Enabled serves the sandbox tools on the default project (the one the
	// servers file fills); other projects switch them through the API.
	Enabled     bool   `env:"MCP_SERVER_SANDBOX" envDefault:"true"`
	ImagePython string `env:"MCP_SERVER_SANDBOX_IMAGE_PYTHON" envDefault:"switchboard-sandbox:latest"`
	ImageNode   string `env:"MCP_SERVER_SANDBOX_IMAGE_NODE" envDefault:"switchboard-sandbox:latest"`
	// SessionTimeout ends a sandbox session idle this long (its
	// container is removed; its workspace stays).
	SessionTimeout time.Duration `env:"MCP_SERVER_SANDBOX_SESSION_TIMEOUT" envDefault:"30m"`
	MaxSessions    int           `env:"MCP_SERVER_SANDBOX_MAX_SESSIONS" envDefault:"10"`
	// MaxTimeout caps the timeout argument of one execution.
	MaxTimeout time.Duration `env:"MCP_SERVER_SANDBOX_MAX_TIMEOUT" envDefault:"5m"`
	// OutputLimit caps the bytes of stdout and of stderr kept per
	// execution; the rest is counted and flagged as truncated.
	OutputLimit int `env:"MCP_SERVER_SANDBOX_OUTPUT_LIMIT" envDefault:"1048576"`
	// Network is "" or "none" (no network, the default), "bridge", or the
	// name of a Docker network the sessions join.
	Network string `env:"MCP_SERVER_SANDBOX_NETWORK"`
	// Volumes is a JSON array of "source:/container/path[:ro]" mounted
	// into every session; source is a named Docker volume.
	Volumes string `env:"MCP_SERVER_SANDBOX_VOLUMES"`
}

// SandboxVolume is one parsed entry of MCP_SERVER_SANDBOX_VOLUMES.
type SandboxVolume struct {
	Source, Target string
	ReadOnly       bool
}

var volumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ParsedVolumes parses Volumes. Its errors say what the entry must look like.
func (s Sandbox) ParsedVolumes() ([]SandboxVolume, error) {
	if strings.TrimSpace(s.Volumes) == "" {
		return nil, nil
	}
	var items []string
	if err := json.Unmarshal([]byte(s.Volumes), &items); err != nil {
		return nil, fmt.Errorf(`must be a JSON array of strings such as ["data:/sandbox/data", "refs:/sandbox/refs:ro"]`)
	}
	var out []SandboxVolume
	targets := map[string]bool{}
	for i, it := range items {
		parts := strings.Split(it, ":")
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			return nil, fmt.Errorf("item %d: write source:/container/path or source:/container/path:ro", i+1)
		}
		v := SandboxVolume{Source: parts[0], Target: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"}
		if strings.HasPrefix(v.Source, "/") {
			return nil, fmt.Errorf("item %d: host directories are not mounted into sandboxes (the engine layer allows no host binds); create a Docker volume (docker volume create NAME) and use its name", i+1)
		}
		if !volumeName.MatchString(v.Source) {
			return nil, fmt.Errorf("item %d: %q is not a Docker volume name", i+1, v.Source)
		}
		if !strings.HasPrefix(v.Target, "/") || path.Clean(v.Target) != v.Target || v.Target == "/" {
			return nil, fmt.Errorf("item %d: the container path must be absolute and clean, got %q", i+1, v.Target)
		}
		switch {
		case v.Target == "/workspace", strings.HasPrefix(v.Target, "/workspace/"), v.Target == "/tmp", strings.HasPrefix(v.Target, "/tmp/"):
			return nil, fmt.Errorf("item %d: %s is reserved for the session's workspace and tmpfs", i+1, v.Target)
		}
		if targets[v.Target] {
			return nil, fmt.Errorf("item %d: %s is mounted twice", i+1, v.Target)
		}
		targets[v.Target] = true
		out = append(out, v)
	}
	return out, nil
}

var networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// NetworkMode is the Docker network sessions join; "" means none.
func (s Sandbox) NetworkMode() string {
	if s.Network == "none" {
		return ""
	}
	return s.Network
}

func (s Sandbox) validate() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	if s.ImagePython == "" {
		bad("MCP_SERVER_SANDBOX_IMAGE_PYTHON", "must name an image; build one with: switchboard sandbox build-image")
	}
	if s.ImageNode == "" {
		bad("MCP_SERVER_SANDBOX_IMAGE_NODE", "must name an image; build one with: switchboard sandbox build-image")
	}
	if s.SessionTimeout <= 0 {
		bad("MCP_SERVER_SANDBOX_SESSION_TIMEOUT", "must be a positive duration such as 30m, got %s", s.SessionTimeout)
	}
	if s.MaxTimeout <= 0 {
		bad("MCP_SERVER_SANDBOX_MAX_TIMEOUT", "must be a positive duration such as 5m, got %s", s.MaxTimeout)
	}
	if s.MaxSessions < 1 {
		bad("MCP_SERVER_SANDBOX_MAX_SESSIONS", "must be at least 1, got %d", s.MaxSessions)
	}
	if s.OutputLimit < 1024 {
		bad("MCP_SERVER_SANDBOX_OUTPUT_LIMIT", "must be at least 1024 bytes, got %d", s.OutputLimit)
	}
	if s.Network != "" && !networkName.MatchString(s.Network) {
		bad("MCP_SERVER_SANDBOX_NETWORK", "must be none, bridge or a Docker network name, got %q", s.Network)
	}
	if s.Network == "host" {
		bad("MCP_SERVER_SANDBOX_NETWORK", "host networking would give sandboxes the host's network stack; use bridge or a dedicated Docker network")
	}
	if _, err := s.ParsedVolumes(); err != nil {
		bad("MCP_SERVER_SANDBOX_VOLUMES", "%v", err)
	}
	return errs
}

// LogAttrs describes the sandbox settings for the start-up log.
func (s Sandbox) LogAttrs() []any {
	net := s.NetworkMode()
	if net == "" {
		net = "none"
	}
	return []any{"sandbox", s.Enabled, "sandbox_image_python", s.ImagePython, "sandbox_image_node", s.ImageNode,
		"sandbox_session_timeout", s.SessionTimeout, "sandbox_max_sessions", s.MaxSessions, "sandbox_network", net}
}
