package switchboard

import "time"

// HostedRegistration is what a user asks for when Switchboard should run an
// MCP server in a container (POST /api/v1/mcp/servers, `switchboard hosted
// add`, a "hosted" entry of the servers file). It is stored as the Config of
// a Workspace row with ContainerType ContainerMCPServer; environment values
// keep their `${SECRET}` references, so no secret value reaches the row.
type HostedRegistration struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Command replaces the image's entrypoint when set; Args replace its CMD.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// StdioBridge (default true) speaks MCP over the container's stdin and
	// stdout; false reaches an HTTP MCP server on Port instead.
	StdioBridge *bool  `json:"stdio_bridge,omitempty"`
	Port        int    `json:"port,omitempty"`
	Path        string `json:"path,omitempty"` // HTTP path of the MCP endpoint, default "/mcp"
	// RestartPolicy is "always", "on-failure" (the default) or "never".
	RestartPolicy string            `json:"restart_policy,omitempty"`
	Environment   map[string]string `json:"environment,omitempty"`
	Limits        HostedLimits      `json:"resource_limits"`
	Volumes       []string          `json:"volumes,omitempty"`
	// Network is "" or "none" (no network, the default), "bridge", or the
	// name of an existing Docker network.
	Network string `json:"network,omitempty"`
	// ReadOnlyRoot (default true) mounts the image read-only, with a tmpfs
	// on /tmp; set false for images that write elsewhere.
	ReadOnlyRoot *bool `json:"read_only_root,omitempty"`
	// CallTimeout is a Go duration ("45s"); empty means the default.
	CallTimeout string `json:"call_timeout,omitempty"`
	ToolPrefix  string `json:"tool_prefix,omitempty"`
	// Origin is "file" for a server of the servers file, else empty.
	Origin string `json:"origin,omitempty"`
}

// HostedLimits are a hosted server's resource limits as registered: CPU in
// cores (0.5), memory and disk as sizes ("512m", "1g", or bytes).
type HostedLimits struct {
	CPU    float64 `json:"cpu,omitempty"`
	Memory string  `json:"memory,omitempty"`
	Disk   string  `json:"disk,omitempty"`
}

// Hosted server states, as status reports them.
const (
	HostedStarting     = "starting"     // container starting or MCP initialize under way
	HostedRunning      = "running"      // container running and initialize succeeded
	HostedStopped      = "stopped"      // not running, by policy or on request
	HostedRestarting   = "restarting"   // exited; a new start is under way
	HostedUnresponsive = "unresponsive" // running but did not answer the idle ping
	HostedBackoff      = "backoff"      // crashing repeatedly; waiting before the next start
	HostedFailed       = "failed"       // cannot start (engine down, image gone, bad secret)
)

// HostedStatus is what the admin API reports about one hosted server.
// Environment values never appear in it, only their names.
type HostedStatus struct {
	ID            string                `json:"id"`
	Project       string                `json:"project"`
	Name          string                `json:"name"`
	Image         string                `json:"image"`
	Status        string                `json:"status"`
	Warning       string                `json:"warning,omitempty"`
	LastError     string                `json:"last_error,omitempty"`
	Provider      string                `json:"provider"`
	Runtime       string                `json:"runtime"` // "" until a container ran
	ContainerID   string                `json:"container_id,omitempty"`
	StartedAt     *time.Time            `json:"started_at,omitempty"`
	UptimeSeconds float64               `json:"uptime_seconds"`
	RestartCount  int                   `json:"restart_count"`
	CrashCount    int                   `json:"crash_count"`
	LastCrash     *HostedCrash          `json:"last_crash,omitempty"`
	NextStartAt   *time.Time            `json:"next_start_at,omitempty"`
	Usage         *HostedUsage          `json:"usage,omitempty"`
	Limits        HostedEffectiveLimits `json:"limits"`
	Config        HostedConfigSummary   `json:"config"`
	Stderr        string                `json:"stderr,omitempty"`
}

// HostedCrash describes the last time a hosted server's container died.
type HostedCrash struct {
	At        time.Time `json:"at"`
	ExitCode  int       `json:"exit_code"`
	OOMKilled bool      `json:"oom_killed"`
	Stderr    string    `json:"stderr,omitempty"`
}

// HostedUsage is the container's current use, from the engine's stats.
type HostedUsage struct {
	CPUPercent  float64 `json:"cpu_percent"`
	MemoryBytes int64   `json:"memory_bytes"`
	Pids        int64   `json:"pids"`
}

// HostedEffectiveLimits are the limits a hosted server's container gets,
// and whether the engine enforces the disk limit.
type HostedEffectiveLimits struct {
	CPU          float64 `json:"cpu"`
	MemoryBytes  int64   `json:"memory_bytes"`
	DiskBytes    int64   `json:"disk_bytes"`
	DiskEnforced bool    `json:"disk_enforced"`
	DiskNote     string  `json:"disk_note,omitempty"`
	Pids         int64   `json:"pids"`
}

// HostedConfigSummary is a registration without secret values: the
// environment's names only.
type HostedConfigSummary struct {
	Command       string   `json:"command,omitempty"`
	Args          []string `json:"args,omitempty"`
	StdioBridge   bool     `json:"stdio_bridge"`
	Port          int      `json:"port,omitempty"`
	RestartPolicy string   `json:"restart_policy"`
	Environment   []string `json:"environment,omitempty"`
	Volumes       []string `json:"volumes,omitempty"`
	Network       string   `json:"network"`
	ReadOnlyRoot  bool     `json:"read_only_root"`
	CallTimeout   string   `json:"call_timeout"`
	ToolPrefix    string   `json:"tool_prefix,omitempty"`
	Origin        string   `json:"origin,omitempty"`
}
