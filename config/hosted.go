package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Hosted configures hosted MCP servers (containers the gateway runs).
type Hosted struct {
	// Enabled lets the gateway talk to the Docker engine for hosted
	// servers; false never contacts it.
	Enabled bool `env:"MCP_SERVER_HOSTED" envDefault:"true"`
	// Instance names this gateway on the engine: every container and
	// volume it makes carries it. Empty derives it from the store (the
	// data dir, or the database's host and name), so a restarted gateway
	// finds its own objects and two gateways with different stores never
	// touch each other's.
	Instance string `env:"MCP_SERVER_INSTANCE"`
	// ContainerRuntime is the OCI runtime of sandbox sessions, hosted
	// servers and catalog containers: "auto" (gVisor's runsc when the
	// engine lists it and it passes its probe, else the engine's default)
	// or a runtime name the engine lists ("runc", "runsc"). A hosted
	// server's or catalog entry's own "runtime" overrides it.
	ContainerRuntime string          `env:"MCP_SERVER_CONTAINER_RUNTIME" envDefault:"auto"`
	Heartbeat        time.Duration   `env:"MCP_SERVER_HOSTED_HEARTBEAT" envDefault:"30s"`
	PingTimeout      time.Duration   `env:"MCP_SERVER_HOSTED_PING_TIMEOUT" envDefault:"10s"`
	RestartDelay     time.Duration   `env:"MCP_SERVER_HOSTED_RESTART_DELAY" envDefault:"1s"`
	CrashWindow      time.Duration   `env:"MCP_SERVER_HOSTED_CRASH_WINDOW" envDefault:"60s"`
	CrashLimit       int             `env:"MCP_SERVER_HOSTED_CRASH_LIMIT" envDefault:"3"`
	Backoff          []time.Duration `env:"MCP_SERVER_HOSTED_BACKOFF" envSeparator:"," envDefault:"5s,15s,45s,2m,5m"`
	StopTimeout      time.Duration   `env:"MCP_SERVER_HOSTED_STOP_TIMEOUT" envDefault:"10s"`
	ShutdownTimeout  time.Duration   `env:"MCP_SERVER_HOSTED_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	// Catalog names a catalog file (Docker MCP Gateway's `registry:`
	// YAML) of servers client sessions switch on with mcp-add.
	Catalog         string `env:"MCP_SERVER_CATALOG"`
	CatalogWarmPool int    `env:"MCP_SERVER_CATALOG_WARM_POOL" envDefault:"2"`
	// CatalogWarmPoolMax is how far a per-call server's pool grows under
	// a burst; CatalogWarmPoolIdle without a call brings it back to
	// CatalogWarmPool.
	CatalogWarmPoolMax   int           `env:"MCP_SERVER_CATALOG_WARM_POOL_MAX" envDefault:"16"`
	CatalogWarmPoolIdle  time.Duration `env:"MCP_SERVER_CATALOG_WARM_POOL_IDLE" envDefault:"1m"`
	CatalogMaxContainers int           `env:"MCP_SERVER_CATALOG_MAX_CONTAINERS" envDefault:"20"`
	// CatalogIdle is how long what sessionless clients activated in the
	// catalog is kept without a call.
	CatalogIdle time.Duration `env:"MCP_SERVER_CATALOG_IDLE_TIMEOUT" envDefault:"10m"`
}

func (h Hosted) validate() []error {
	var errs []error
	for _, p := range []struct {
		name string
		d    time.Duration
	}{
		{"MCP_SERVER_HOSTED_HEARTBEAT", h.Heartbeat}, {"MCP_SERVER_HOSTED_PING_TIMEOUT", h.PingTimeout},
		{"MCP_SERVER_HOSTED_RESTART_DELAY", h.RestartDelay}, {"MCP_SERVER_HOSTED_CRASH_WINDOW", h.CrashWindow},
		{"MCP_SERVER_HOSTED_STOP_TIMEOUT", h.StopTimeout}, {"MCP_SERVER_HOSTED_SHUTDOWN_TIMEOUT", h.ShutdownTimeout},
	} {
		if p.d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration such as 30s, got %s", p.name, p.d))
		}
	}
	if h.RestartDelay > 5*time.Second {
		errs = append(errs, fmt.Errorf("MCP_SERVER_HOSTED_RESTART_DELAY: at most 5s (a crashed server restarts within 5 s), got %s", h.RestartDelay))
	}
	if h.CrashLimit < 1 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_HOSTED_CRASH_LIMIT: must be at least 1, got %d", h.CrashLimit))
	}
	if len(h.Backoff) == 0 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_HOSTED_BACKOFF: needs at least one duration, such as 5s,15s,45s,2m,5m"))
	}
	for _, d := range h.Backoff {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("MCP_SERVER_HOSTED_BACKOFF: every step must be a positive duration, got %s", d))
			break
		}
	}
	if h.CatalogWarmPool < 0 || h.CatalogWarmPool > 16 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CATALOG_WARM_POOL: must be between 0 (no warm containers) and 16, got %d", h.CatalogWarmPool))
	}
	if h.CatalogWarmPoolMax < h.CatalogWarmPool || h.CatalogWarmPoolMax > 64 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CATALOG_WARM_POOL_MAX: must be between MCP_SERVER_CATALOG_WARM_POOL (%d) and 64, got %d", h.CatalogWarmPool, h.CatalogWarmPoolMax))
	}
	if h.CatalogWarmPoolIdle <= 0 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CATALOG_WARM_POOL_IDLE: must be a positive duration such as 1m, got %s", h.CatalogWarmPoolIdle))
	}
	if h.CatalogIdle <= 0 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CATALOG_IDLE_TIMEOUT: must be a positive duration such as 10m, got %s", h.CatalogIdle))
	}
	if h.CatalogMaxContainers < 1 || h.CatalogMaxContainers > 1000 {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CATALOG_MAX_CONTAINERS: must be between 1 and 1000, got %d", h.CatalogMaxContainers))
	}
	if !validName.MatchString(h.ContainerRuntime) {
		errs = append(errs, fmt.Errorf("MCP_SERVER_CONTAINER_RUNTIME: must be \"auto\" or the name of a runtime the Docker engine lists (\"runc\", \"runsc\"), got %q", h.ContainerRuntime))
	}
	if h.Instance != "" && !validName.MatchString(h.Instance) {
		errs = append(errs, fmt.Errorf("MCP_SERVER_INSTANCE: must be 1-64 letters, digits, '_', '-' or '.'"))
	}
	return errs
}

// ParseHosted returns the servers of a servers file that say "run this in
// a container": entries of the form {"hosted": {registration}}, the
// registration as POST /api/v1/mcp/servers takes it without "name" (the
// entry's key is the name). ParseServers skips these entries. Unknown
// fields are errors; `${NAME}` in environment values stays unresolved (the
// hosted layer resolves it from the default project's secrets). Errors
// wrap switchboard.ErrInvalid and are joined, one per bad entry.
func ParseHosted(data []byte) ([]switchboard.HostedRegistration, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object: %v", switchboard.ErrInvalid, err)
	}
	raw, ok := top["mcpServers"]
	if !ok {
		raw, ok = top["servers"]
	}
	if !ok {
		return nil, nil
	}
	names, entries, err := orderedObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: \"mcpServers\" %v", switchboard.ErrInvalid, err)
	}
	var out []switchboard.HostedRegistration
	var errs []string
	for i, name := range names {
		var e struct {
			Hosted   json.RawMessage `json:"hosted"`
			Disabled bool            `json:"disabled"`
		}
		if json.Unmarshal(entries[i], &e) != nil || e.Hosted == nil || e.Disabled {
			continue
		}
		var reg switchboard.HostedRegistration
		dec := json.NewDecoder(bytes.NewReader(e.Hosted))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&reg); err != nil {
			errs = append(errs, fmt.Sprintf("server %q: \"hosted\" %v", name, err))
			continue
		}
		if reg.Name != "" && reg.Name != name {
			errs = append(errs, fmt.Sprintf("server %q: \"hosted\" must not set a different name (%q); the entry's key is its name", name, reg.Name))
			continue
		}
		if reg.Origin != "" {
			errs = append(errs, fmt.Sprintf("server %q: \"hosted\" must not set origin", name))
			continue
		}
		reg.Name, reg.Origin = name, "file"
		out = append(out, reg)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %s", switchboard.ErrInvalid, strings.Join(errs, "; "))
	}
	return out, nil
}
