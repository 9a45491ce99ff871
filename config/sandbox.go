package config

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
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
	// RegistryUser and RegistryPassword are the gateway's credentials for
	// pulling sandbox images that name a private registry (the projects'
	// secrets are never used for them). Never logged.
	RegistryUser     string `env:"MCP_SERVER_SANDBOX_REGISTRY_USER"`
	RegistryPassword string `env:"MCP_SERVER_SANDBOX_REGISTRY_PASSWORD"`
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
	// into every session; source is a named Docker volume, or an absolute
	// host directory (a bind mount: operator configuration only, never
	// taken from a tool argument or the API).
	Volumes string `env:"MCP_SERVER_SANDBOX_VOLUMES"`
	// WorkspaceRetention is how long an anonymous workspace (made by an
	// execution without session_id, never attached, detached or
	// snapshotted) is kept after its session ended; 0 deletes it when its
	// session ends.
	WorkspaceRetention time.Duration `env:"MCP_SERVER_SANDBOX_WORKSPACE_RETENTION" envDefault:"24h"`
	// WorkspaceSize caps the bytes a workspace (or snapshot) holds, as a
	// file system of that size; 0: no limit. Engines without sized
	// volumes get plain ones, with a warning.
	WorkspaceSize int64 `env:"MCP_SERVER_SANDBOX_WORKSPACE_SIZE" envDefault:"1073741824"`
	// WarmPool is how many started containers, each on a fresh empty
	// workspace, are kept ready per project, template and flavor once the
	// project started a session of them; they count in MaxSessions. 0:
	// none, every new session starts its own container.
	WarmPool int `env:"MCP_SERVER_SANDBOX_WARM_POOL" envDefault:"1"`
	// WarmPoolMax is how far a pool grows when new sessions find it
	// empty (each miss doubles it); at most WarmPool: no growth.
	WarmPoolMax int `env:"MCP_SERVER_SANDBOX_WARM_POOL_MAX" envDefault:"4"`
}

// SandboxVolume is one parsed entry of MCP_SERVER_SANDBOX_VOLUMES.
type SandboxVolume struct {
	// Source is a Docker volume name, or with Bind an absolute, clean
	// host directory.
	Source, Target string
	ReadOnly       bool
	Bind           bool
}

var volumeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// forbiddenBindTrees are host paths never bind-mounted into a sandbox,
// nor anything below or above them: the kernel's and the devices'
// interfaces, the Docker socket (root on the host) and the engine's data
// (every container's files). "/" is above them all.
var forbiddenBindTrees = []string{"/proc", "/sys", "/dev", "/var/run/docker.sock", "/run/docker.sock", "/var/lib/docker"}

// checkBindSource says why host directory src may not be mounted, or "".
// extra names more paths to keep out (the configured Docker socket).
func checkBindSource(src string, extra ...string) string {
	if src == "/" {
		return "/ (the host's root) is not mounted into sandboxes"
	}
	for _, t := range append(slices.Clone(forbiddenBindTrees), extra...) {
		switch {
		case src == t || strings.HasPrefix(src, t+"/"):
			return fmt.Sprintf("%s is not mounted into sandboxes (%s gives access to the host)", src, t)
		case strings.HasPrefix(t, src+"/"):
			return fmt.Sprintf("%s holds %s, which gives access to the host; mount a directory that does not contain it", src, t)
		}
	}
	return ""
}

// ParsedVolumes parses Volumes. Its errors say what the entry must look
// like. A host directory that exists on this machine is also checked
// after resolving its symbolic links; one that does not is refused by
// the Docker engine when a session starts.
func (s Sandbox) ParsedVolumes() ([]SandboxVolume, error) { return s.parseVolumes() }

// parseVolumes is ParsedVolumes; keepOut are more host paths a bind may
// not reach (the socket DOCKER_HOST names).
func (s Sandbox) parseVolumes(keepOut ...string) ([]SandboxVolume, error) {
	if strings.TrimSpace(s.Volumes) == "" {
		return nil, nil
	}
	var items []string
	if err := json.Unmarshal([]byte(s.Volumes), &items); err != nil {
		return nil, fmt.Errorf(`must be a JSON array of strings such as ["/host/data:/sandbox/data", "refs:/sandbox/refs:ro"]`)
	}
	var out []SandboxVolume
	targets := map[string]bool{}
	for i, it := range items {
		parts := strings.Split(it, ":")
		if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
			return nil, fmt.Errorf("item %d: write /host/dir:/container/path or volume:/container/path, with :ro to mount it read-only", i+1)
		}
		v := SandboxVolume{Source: parts[0], Target: parts[1], ReadOnly: len(parts) == 3 && parts[2] == "ro"}
		switch {
		case strings.HasPrefix(v.Source, "/"):
			v.Bind = true
			if slices.Contains(strings.Split(v.Source, "/"), "..") {
				return nil, fmt.Errorf("item %d: host path %q contains ..; write the directory's absolute path without it", i+1, v.Source)
			}
			if path.Clean(v.Source) != v.Source {
				return nil, fmt.Errorf("item %d: host path %q is not clean; write %q", i+1, v.Source, path.Clean(v.Source))
			}
			if why := checkBindSource(v.Source, keepOut...); why != "" {
				return nil, fmt.Errorf("item %d: %s", i+1, why)
			}
			if real, err := filepath.EvalSymlinks(v.Source); err == nil && real != v.Source {
				if why := checkBindSource(real, keepOut...); why != "" {
					return nil, fmt.Errorf("item %d: %s is a link to %s: %s", i+1, v.Source, real, why)
				}
			}
		case strings.HasPrefix(v.Source, ".") || strings.Contains(v.Source, "/"):
			return nil, fmt.Errorf("item %d: relative host path %q; host directories must be absolute paths (/host/data)", i+1, v.Source)
		case !volumeName.MatchString(v.Source):
			return nil, fmt.Errorf("item %d: %q is neither an absolute host path nor a Docker volume name", i+1, v.Source)
		}
		if !strings.HasPrefix(v.Target, "/") || slices.Contains(strings.Split(v.Target, "/"), "..") || path.Clean(v.Target) != v.Target || v.Target == "/" {
			return nil, fmt.Errorf("item %d: the container path must be absolute and clean (no ..), and not /, got %q", i+1, v.Target)
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

// validate checks the sandbox settings; dockerHost is DOCKER_HOST, whose
// unix socket no bind mount may reach.
func (s Sandbox) validate(dockerHost string) []error {
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
	switch {
	case s.RegistryUser != "" && s.RegistryPassword == "":
		bad("MCP_SERVER_SANDBOX_REGISTRY_PASSWORD", "is empty while MCP_SERVER_SANDBOX_REGISTRY_USER is set: set both (the sandbox images' registry credentials) or neither")
	case s.RegistryUser == "" && s.RegistryPassword != "":
		bad("MCP_SERVER_SANDBOX_REGISTRY_USER", "is empty while MCP_SERVER_SANDBOX_REGISTRY_PASSWORD is set: set both (the sandbox images' registry credentials) or neither")
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
	if s.WorkspaceRetention < 0 {
		bad("MCP_SERVER_SANDBOX_WORKSPACE_RETENTION", "must be a duration such as 24h, or 0 to delete such a workspace when its session ends, got %s", s.WorkspaceRetention)
	}
	if s.WorkspaceSize != 0 && s.WorkspaceSize < 16<<20 {
		bad("MCP_SERVER_SANDBOX_WORKSPACE_SIZE", "must be at least 16777216 bytes (16 MiB), or 0 for no limit, got %d", s.WorkspaceSize)
	}
	if s.WarmPool < 0 || s.WarmPool > s.MaxSessions {
		bad("MCP_SERVER_SANDBOX_WARM_POOL", "must be between 0 (no warm containers) and MCP_SERVER_SANDBOX_MAX_SESSIONS (%d), got %d", s.MaxSessions, s.WarmPool)
	}
	if s.WarmPoolMax < 0 {
		bad("MCP_SERVER_SANDBOX_WARM_POOL_MAX", "must be 0 or more (at most MCP_SERVER_SANDBOX_WARM_POOL: pools never grow), got %d", s.WarmPoolMax)
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
	var keepOut []string
	if sock, ok := strings.CutPrefix(dockerHost, "unix://"); ok && strings.HasPrefix(sock, "/") {
		keepOut = append(keepOut, path.Clean(sock))
	}
	if _, err := s.parseVolumes(keepOut...); err != nil {
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
		"sandbox_registry_user", s.RegistryUser,
		"sandbox_session_timeout", s.SessionTimeout, "sandbox_max_sessions", s.MaxSessions, "sandbox_network", net,
		"sandbox_workspace_retention", s.WorkspaceRetention, "sandbox_workspace_size", s.WorkspaceSize}
}
