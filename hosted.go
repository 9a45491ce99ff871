package switchboard

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// HostedRegistration is what a user asks for when Switchboard should run an
// MCP server in a container (POST /api/v1/mcp/servers, `switchboard hosted
// add`, a "hosted" entry of the servers file). It is stored as the Config of
// a Workspace row with ContainerType ContainerMCPServer; environment values
// keep their `${SECRET}` references, so no secret value reaches the row,
// and the hosted package seals every literal value before storing it.
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
	// Runtime is the container runtime: "auto" or a runtime name the
	// engine lists ("runc", "runsc"); empty takes the gateway's setting.
	Runtime string `json:"runtime,omitempty"`
	// PullPolicy says when the image is pulled: if-not-present, always or
	// never; "" is the gateway's MCP_SERVER_PULL_POLICY.
	PullPolicy string `json:"pull_policy,omitempty"`
	// RegistryAuth are the image registry's credentials, each a
	// `${NAME}` reference to one of the project's secrets.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// Origin is "file" for a server of the servers file, else empty.
	Origin string `json:"origin,omitempty"`
}

// HostedLimits are a hosted server's resource limits as registered, each a
// JSON number or a string: CPU in cores (0.5, "1", "2.25"), memory and
// disk in bytes (536870912) or as a size with a unit ("512m", "1G",
// "512Mi"). hosted.ParseCPU and hosted.ParseSize read them; empty means
// the default.
type HostedLimits struct {
	CPU    Quantity `json:"cpu,omitempty"`
	Memory Quantity `json:"memory,omitempty"`
	Disk   Quantity `json:"disk,omitempty"`
}

// Quantity is an amount as its user wrote it, kept as text: a JSON string
// as its contents ("1G"), a number as its literal (0.5). Decoding accepts
// any JSON value (null leaves it unset), so that the reader's parser, not
// the JSON decoder, says what to write instead of a wrong one.
type Quantity string

// UnmarshalJSON keeps the text of the value; it never fails on valid JSON.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*q = Quantity(s)
	case string(b) != "null":
		*q = Quantity(b)
	}
	return nil
}

// MarshalJSON writes a quantity that reads as a JSON number as a number
// ("1" becomes 1) and any other as a string, so a stored registration reads
// back as written and a CPU limit stored before strings were accepted
// keeps its form.
func (q Quantity) MarshalJSON() ([]byte, error) {
	if jsonNumber.MatchString(string(q)) {
		return []byte(q), nil
	}
	return json.Marshal(string(q))
}

var jsonNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$`)

// Hosted server states, as status reports them.
const (
	HostedStarting     = "starting"     // container starting or MCP initialize under way
	HostedRunning      = "running"      // container running and initialize succeeded
	HostedStopped      = "stopped"      // not running, by policy or on request
	HostedRestarting   = "restarting"   // exited; a new start is under way
	HostedUnresponsive = "unresponsive" // running but did not answer the idle ping
	HostedBackoff      = "backoff"      // crashing repeatedly; waiting before the next start
	HostedFailed       = "failed"       // cannot start (engine down, image gone, bad secret)
	HostedPulling      = "pulling"      // its image is being pulled from its registry
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
	// Pull is the image pull under way (status "pulling").
	Pull *PullProgress `json:"pull,omitempty"`
	// Owner is the replica that runs the container, as its lease names
	// it ("<owner id> <replica URL>"), when replicas share the store;
	// empty while no replica holds it (a take-over under way).
	Owner string `json:"owner,omitempty"`
	// Local reports that this replica is the owner.
	Local bool `json:"local,omitempty"`
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
	Runtime       string   `json:"runtime,omitempty"`
	Origin        string   `json:"origin,omitempty"`
	PullPolicy    string   `json:"pull_policy"`
	// RegistryAuth shows the credentials' secret references, never values.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
}

// RegistryAuth are credentials for an image registry: in a registration,
// `${NAME}` references to the project's secrets, resolved for each pull
// and never stored, logged or shown resolved.
type RegistryAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// PullProgress is where one image pull stands.
type PullProgress struct {
	Image      string    `json:"image"`
	Status     string    `json:"status"` // the engine's last status line, such as "Downloading"
	Layers     int       `json:"layers"`
	LayersDone int       `json:"layers_done"`
	Bytes      int64     `json:"bytes"`       // downloaded so far
	TotalBytes int64     `json:"total_bytes"` // of the layers whose size is known
	StartedAt  time.Time `json:"started_at"`
}

// Figures says where a pull stands in words: "2 of 5 layers, 12.0 of
// 40.0 MiB", or "resolving the image" before the registry has said how
// many layers it has (never "0 of 0 layers").
func (p PullProgress) Figures() string {
	if p.Layers == 0 {
		return "resolving the image"
	}
	s := fmt.Sprintf("%d of %d layers", p.LayersDone, p.Layers)
	if p.TotalBytes > 0 {
		s += fmt.Sprintf(", %.1f of %.1f MiB", float64(p.Bytes)/(1<<20), float64(p.TotalBytes)/(1<<20))
	}
	return s
}
