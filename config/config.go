// Package config is the only place that reads Switchboard's environment. It
// parses the MCP_SERVER_* variables with caarlos0/env, validates everything
// up front, reports every problem at once, and reads the servers file (the
// `mcpServers` JSON that Claude Desktop, Cursor and VS Code already use).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Config is the gateway's effective configuration.
type Config struct {
	Host string `env:"MCP_SERVER_HOST" envDefault:"127.0.0.1"`
	Port int    `env:"MCP_SERVER_PORT" envDefault:"8080"`
	// EnableCORS uses the exact name of the spec we follow (MCP_ENABLE_CORS);
	// MCP_SERVER_ENABLE_CORS is accepted as well (either true enables it).
	EnableCORS       bool     `env:"MCP_ENABLE_CORS"`
	EnableCORSServer bool     `env:"MCP_SERVER_ENABLE_CORS"`
	CORSOrigins      []string `env:"MCP_SERVER_CORS_ORIGINS" envSeparator:","`
	ServersFile      string   `env:"MCP_SERVER_CONFIG"`
	DataDir          string   `env:"MCP_SERVER_DATA_DIR"`
	// DatabaseURL selects PostgreSQL; empty means the embedded store in
	// DataDir. It may hold a password: LogAttrs never prints it.
	DatabaseURL string `env:"MCP_SERVER_DATABASE_URL"`
	CallLog     bool   `env:"MCP_SERVER_CALL_LOG" envDefault:"true"`

	CallTimeout     time.Duration `env:"MCP_SERVER_CALL_TIMEOUT" envDefault:"30s"`
	ConnectTimeout  time.Duration `env:"MCP_SERVER_CONNECT_TIMEOUT" envDefault:"30s"`
	ListWait        time.Duration `env:"MCP_SERVER_LIST_WAIT" envDefault:"5s"`
	ShutdownTimeout time.Duration `env:"MCP_SERVER_SHUTDOWN_TIMEOUT" envDefault:"30s"`
	StopTimeout     time.Duration `env:"MCP_SERVER_CHILD_STOP_TIMEOUT" envDefault:"5s"`
	SessionIdleTTL  time.Duration `env:"MCP_SERVER_SESSION_IDLE_TIMEOUT" envDefault:"30m"`
	MaxSessions     int           `env:"MCP_SERVER_MAX_SESSIONS" envDefault:"10000"`
	// MaxProjectSessions caps each project's share of MaxSessions; 0: none.
	MaxProjectSessions int           `env:"MCP_SERVER_MAX_SESSIONS_PER_PROJECT" envDefault:"1000"`
	Heartbeat          time.Duration `env:"MCP_SERVER_HEARTBEAT_INTERVAL" envDefault:"25s"`
	MaxBodyBytes       int64         `env:"MCP_SERVER_MAX_BODY_BYTES" envDefault:"4194304"`
	MaxMessageBytes    int64         `env:"MCP_SERVER_MAX_MESSAGE_BYTES" envDefault:"16777216"`

	BreakerFailures uint32        `env:"MCP_SERVER_BREAKER_FAILURES" envDefault:"3"`
	BreakerCooldown time.Duration `env:"MCP_SERVER_BREAKER_COOLDOWN" envDefault:"60s"`
	ListDebounce    time.Duration `env:"MCP_SERVER_LIST_CHANGED_DEBOUNCE" envDefault:"200ms"`

	// AdminToken guards /api/v1 and every project; empty is dev mode,
	// allowed on loopback or with AllowUnauthenticated. Never logged.
	AdminToken           string `env:"MCP_SERVER_ADMIN_TOKEN"`
	AllowUnauthenticated bool   `env:"MCP_SERVER_ALLOW_UNAUTHENTICATED"`
	// Auth accepts access tokens from an identity provider (config/auth.go).
	Auth Auth
	// SecretKey encrypts project secrets at rest; empty means the key file
	// in DataDir, generated on first start. Never logged.
	SecretKey    string        `env:"MCP_SERVER_SECRET_KEY"`
	SyncInterval time.Duration `env:"MCP_SERVER_SYNC_INTERVAL" envDefault:"5s"`
	// OwnerLease is how long a gateway process is taken to be alive after
	// its last lease renewal (every third of it) when nothing on this
	// host can tell sooner: past it, a replica removes its containers.
	OwnerLease time.Duration `env:"MCP_SERVER_OWNER_LEASE" envDefault:"30s"`
	// ReplicaURL is where replicas sharing the store reach this one's
	// internal endpoint (a hosted server's calls handed to its owner);
	// empty derives it from the listen address (ReplicaBase).
	ReplicaURL string `env:"MCP_SERVER_REPLICA_URL"`
	// ReplicaTick is how often each replica re-reads the hosted servers'
	// rows and leases: it takes over servers without an owner, renews
	// its own, starts, restarts and removes what changed elsewhere.
	ReplicaTick time.Duration `env:"MCP_SERVER_REPLICA_TICK" envDefault:"1s"`

	// OTLPEndpoint switches tracing on: the base URL of an OTLP/HTTP
	// collector (http://collector:4318). Empty, the default, is off. The
	// standard OTEL_EXPORTER_OTLP_*ENDPOINT variables are not read: an
	// environment the gateway merely inherits never switches tracing on.
	OTLPEndpoint string `env:"MCP_SERVER_OTLP_ENDPOINT"`
	// OTLPHeaders go with every export, for the collector's auth:
	// key=value,key=value, values percent-encoded where they hold a comma
	// (the OTEL_EXPORTER_OTLP_HEADERS format). Never logged.
	OTLPHeaders string `env:"MCP_SERVER_OTLP_HEADERS"`
	// TraceSampleRatio is the share of new traces recorded; a trace a
	// client started keeps the client's decision.
	TraceSampleRatio float64 `env:"MCP_SERVER_TRACE_SAMPLE_RATIO" envDefault:"1"`

	// DockerHost is the Docker engine hosted servers and the sandbox use
	// (DOCKER_HOST, as the docker CLI reads it); empty is the default
	// socket.
	DockerHost string `env:"DOCKER_HOST"`
	// Hosted configures hosted MCP servers (config/hosted.go).
	Hosted Hosted
	// Sandbox configures the sandbox tools (config/sandbox.go).
	Sandbox Sandbox
	// Images are the image rules and pulls (config/images.go).
	Images Images

	LogLevel  string `env:"MCP_SERVER_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"MCP_SERVER_LOG_FORMAT" envDefault:"text"`

	// PprofAddr serves Go's runtime profiles (net/http/pprof, under
	// /debug/pprof/) on a listener of its own, apart from the MCP and
	// admin endpoints and without their auth. Empty, the default, is off;
	// only a loopback address is accepted, since profiles show memory
	// contents such as request bodies.
	PprofAddr string `env:"MCP_SERVER_PPROF_ADDR"`
}

// Load reads the configuration through getenv, applies defaults and
// validates it. The returned error joins every problem found, each naming
// its variable, so one run tells the user everything to fix.
func Load(getenv func(string) string) (Config, error) {
	var cfg Config
	params, err := env.GetFieldParams(&cfg)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	environ := make(map[string]string, len(params))
	for _, p := range params {
		if v := getenv(p.Key); v != "" {
			environ[p.Key] = v
		}
	}
	var errs []error
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: environ}); err != nil {
		var agg env.AggregateError
		if errors.As(err, &agg) {
			for _, e := range agg.Errors {
				errs = append(errs, namedParseError(e, environ))
			}
		} else {
			errs = append(errs, err)
		}
	}
	cfg.EnableCORS = cfg.EnableCORS || cfg.EnableCORSServer
	cfg.Auth.normalize()
	if cfg.DataDir == "" {
		cfg.DataDir = defaultDataDir(getenv)
	}
	// A variable that did not parse is left at its zero value; validating
	// that zero would only report the same variable twice.
	unparsed := make([]string, len(errs))
	for i, e := range errs {
		unparsed[i], _, _ = strings.Cut(e.Error(), ":")
	}
	for _, e := range cfg.validate() {
		name, _, _ := strings.Cut(e.Error(), ":")
		if !slices.Contains(unparsed, name) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return cfg, errors.Join(errs...)
	}
	return cfg, nil
}

// namedParseError rewrites caarlos0/env's "parse error on field Port of
// type int" into what the user set: the variable, its value and the form
// it needs. Only typed (non-string) fields fail to parse, and none of them
// holds a secret, so echoing the value is safe.
func namedParseError(err error, environ map[string]string) error {
	var pe env.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	f, ok := reflect.TypeFor[Config]().FieldByName(pe.Name)
	if !ok {
		if f, ok = reflect.TypeFor[Sandbox]().FieldByName(pe.Name); !ok {
			return err
		}
	}
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	want := "a " + pe.Type.String()
	switch {
	case pe.Type == reflect.TypeFor[time.Duration]():
		want = "a duration such as 30s, 1m30s or 500ms"
	case pe.Type.Kind() == reflect.Bool:
		want = "true or false"
	case pe.Type.Kind() >= reflect.Int && pe.Type.Kind() <= reflect.Uint64:
		want = "a whole number"
	case pe.Type.Kind() == reflect.Float32 || pe.Type.Kind() == reflect.Float64:
		want = "a number such as 0.25"
	}
	v := environ[name]
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Errorf("%s: %q is not %s", name, v, want)
}

func defaultDataDir(getenv func(string) string) string {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "switchboard")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "switchboard")
	}
	return filepath.Join(".", "switchboard-data")
}

func (c *Config) validate() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{name}, args...)...))
	}
	if c.Host == "" {
		bad("MCP_SERVER_HOST", "must not be empty (use 127.0.0.1 for local only, 0.0.0.0 for all interfaces)")
	}
	if c.Port < 0 || c.Port > 65535 {
		bad("MCP_SERVER_PORT", "%d is out of range 0-65535", c.Port)
	}
	if c.PprofAddr != "" {
		if msg := loopbackAddr(c.PprofAddr); msg != "" {
			bad("MCP_SERVER_PPROF_ADDR", "%s", msg)
		}
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"MCP_SERVER_CALL_TIMEOUT", c.CallTimeout},
		{"MCP_SERVER_CONNECT_TIMEOUT", c.ConnectTimeout},
		{"MCP_SERVER_LIST_WAIT", c.ListWait},
		{"MCP_SERVER_SHUTDOWN_TIMEOUT", c.ShutdownTimeout},
		{"MCP_SERVER_CHILD_STOP_TIMEOUT", c.StopTimeout},
		{"MCP_SERVER_SESSION_IDLE_TIMEOUT", c.SessionIdleTTL},
		{"MCP_SERVER_HEARTBEAT_INTERVAL", c.Heartbeat},
		{"MCP_SERVER_BREAKER_COOLDOWN", c.BreakerCooldown},
		{"MCP_SERVER_SYNC_INTERVAL", c.SyncInterval},
		{"MCP_SERVER_OWNER_LEASE", c.OwnerLease},
		{"MCP_SERVER_REPLICA_TICK", c.ReplicaTick},
	}
	for _, p := range positive {
		if p.d <= 0 {
			bad(p.name, "must be a positive duration such as 30s, got %s", p.d)
		}
	}
	if c.ReplicaURL != "" {
		u, err := url.Parse(c.ReplicaURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			bad("MCP_SERVER_REPLICA_URL", "must be an http:// or https:// base URL without user, query or fragment, such as http://10.0.0.7:8080, got %q", c.ReplicaURL)
		}
	}
	errs = append(errs, c.Hosted.validate()...)
	errs = append(errs, c.Images.validate()...)
	if c.ListDebounce < 0 {
		bad("MCP_SERVER_LIST_CHANGED_DEBOUNCE", "must not be negative, got %s", c.ListDebounce)
	}
	if c.MaxMessageBytes < 1024 {
		bad("MCP_SERVER_MAX_MESSAGE_BYTES", "must be at least 1024 bytes, got %d", c.MaxMessageBytes)
	}
	if c.MaxBodyBytes < 1024 {
		bad("MCP_SERVER_MAX_BODY_BYTES", "must be at least 1024 bytes, got %d", c.MaxBodyBytes)
	}
	if c.MaxProjectSessions < 0 {
		bad("MCP_SERVER_MAX_SESSIONS_PER_PROJECT", "must be 0 (no per-project limit) or positive, got %d", c.MaxProjectSessions)
	}
	if c.MaxSessions < 1 {
		bad("MCP_SERVER_MAX_SESSIONS", "must be at least 1, got %d", c.MaxSessions)
	}
	if c.BreakerFailures < 1 {
		bad("MCP_SERVER_BREAKER_FAILURES", "must be at least 1")
	}
	if c.DatabaseURL != "" && c.StoreDescription() == "" {
		// Never echo the value: it may carry a password.
		bad("MCP_SERVER_DATABASE_URL", "must be a postgres://user:password@host:port/dbname URL or a 'host=... dbname=...' connection string")
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		bad("MCP_SERVER_ADMIN_TOKEN", "must be at least 16 characters; make one with: head -c 32 /dev/urandom | base64")
	}
	if c.AdminToken == "" && !c.AllowUnauthenticated && !c.IsLoopback() {
		bad("MCP_SERVER_HOST", "%s is not a loopback address and MCP_SERVER_ADMIN_TOKEN is not set: anyone who can reach the port could change servers and run commands through them. "+
			"Set MCP_SERVER_ADMIN_TOKEN, or MCP_SERVER_ALLOW_UNAUTHENTICATED=true on a trusted network", c.Host)
	}
	if c.OTLPEndpoint != "" && c.OTLPDescription() == "" {
		// Never echo the value: it may carry a credential.
		bad("MCP_SERVER_OTLP_ENDPOINT", "must be the collector's http:// or https:// base URL, such as http://collector:4318, without user, password or query (put credentials in MCP_SERVER_OTLP_HEADERS)")
	}
	if _, err := c.OTLPHeaderMap(); err != nil {
		bad("MCP_SERVER_OTLP_HEADERS", "%v", err)
	}
	if !(c.TraceSampleRatio >= 0 && c.TraceSampleRatio <= 1) {
		bad("MCP_SERVER_TRACE_SAMPLE_RATIO", "must be between 0 and 1, got %v", c.TraceSampleRatio)
	}
	errs = append(errs, c.Sandbox.validate(c.DockerHost)...)
	errs = append(errs, c.Auth.validate()...)
	if _, err := ParseLevel(c.LogLevel); err != nil {
		bad("MCP_SERVER_LOG_LEVEL", "%v", err)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		bad("MCP_SERVER_LOG_FORMAT", "must be text or json, got %q", c.LogFormat)
	}
	for i, o := range c.CORSOrigins {
		o = strings.TrimSpace(o)
		c.CORSOrigins[i] = o
		if o == "*" {
			if c.AdminToken == "" {
				bad("MCP_SERVER_CORS_ORIGINS", "\"*\" without MCP_SERVER_ADMIN_TOKEN would let any web page use the gateway, admin API included; list the origins you trust, or set an admin token")
			}
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			bad("MCP_SERVER_CORS_ORIGINS", "%q is not an origin; write scheme://host[:port], for example https://app.example.com", o)
		}
	}
	return errs
}

// ParseLevel maps debug|info|warn|error to a slog level.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("must be debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// Addr is the listen address.
func (c Config) Addr() string { return net.JoinHostPort(c.Host, fmt.Sprint(c.Port)) }

// ReplicaBase is the base URL replicas sharing the store reach this one
// at, given the address it listens on (port 0 resolved):
// MCP_SERVER_REPLICA_URL, else http:// and the listen address, where a
// wildcard host (0.0.0.0, ::, empty) becomes this machine's host name.
func (c Config) ReplicaBase(listen string) string {
	if c.ReplicaURL != "" {
		return strings.TrimRight(c.ReplicaURL, "/")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "http://" + listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		} else {
			host = "127.0.0.1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// IsLoopback reports whether the gateway binds to a loopback address only.
func (c Config) IsLoopback() bool { return loopbackHost(c.Host) }

// loopbackHost reports whether host names this machine only: localhost
// or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// StoreDescription names the store without secrets: the PostgreSQL host
// and database (never user or password), or the embedded store's file.
func (c Config) StoreDescription() string {
	if c.DatabaseURL == "" {
		return "embedded sqlite in " + c.DataDir
	}
	if u, err := url.Parse(c.DatabaseURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if u.Host == "" && u.Query().Get("host") == "" {
			return ""
		}
		return "postgres://" + u.Host + u.Path
	}
	// keyword=value form: keep only host, port and dbname.
	kv := map[string]string{}
	for _, f := range strings.Fields(c.DatabaseURL) {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	if kv["host"] == "" && kv["dbname"] == "" {
		return ""
	}
	return "postgres host=" + kv["host"] + " port=" + kv["port"] + " dbname=" + kv["dbname"]
}

// OTLPDescription names where spans go without secrets: the collector's
// scheme and host, "off" without an endpoint, or "" for an endpoint that
// is not a usable URL.
func (c Config) OTLPDescription() string {
	if c.OTLPEndpoint == "" {
		return "off"
	}
	u, err := url.Parse(c.OTLPEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// OTLPHeaderMap parses OTLPHeaders. Its errors name the item at fault by
// position, never by content: values are credentials.
func (c Config) OTLPHeaderMap() (map[string]string, error) {
	h := map[string]string{}
	for i, item := range strings.Split(c.OTLPHeaders, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) {
			return nil, fmt.Errorf("item %d is not name=value with a valid header name; write Authorization=Bearer%%20xyz,X-Org=abc", i+1)
		}
		v, err := url.PathUnescape(v)
		if err != nil || strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("item %d (%s) has a malformed value: percent-encode commas as %%2C and percent signs as %%25", i+1, k)
		}
		h[k] = strings.TrimSpace(v)
	}
	return h, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// LogAttrs is the effective configuration as log attributes, with the
// database URL reduced to host and database and the OTLP endpoint to
// scheme and host. Header and env values of servers live in the servers
// file, and OTLP header values in MCP_SERVER_OTLP_HEADERS: neither is
// ever logged.
func (c Config) LogAttrs() []any {
	return append([]any{
		"addr", c.Addr(), "cors", c.EnableCORS, "cors_origins", c.CORSOrigins,
		"servers_file", c.ServersFile, "data_dir", c.DataDir, "store", c.StoreDescription(), "call_log", c.CallLog,
		"call_timeout", c.CallTimeout, "connect_timeout", c.ConnectTimeout, "list_wait", c.ListWait,
		"shutdown_timeout", c.ShutdownTimeout, "child_stop_timeout", c.StopTimeout,
		"session_idle_timeout", c.SessionIdleTTL, "max_sessions", c.MaxSessions, "max_sessions_per_project", c.MaxProjectSessions, "heartbeat", c.Heartbeat,
		"max_body_bytes", c.MaxBodyBytes, "max_message_bytes", c.MaxMessageBytes, "breaker_failures", c.BreakerFailures,
		"breaker_cooldown", c.BreakerCooldown, "admin_token", c.AdminToken != "",
		"allow_unauthenticated", c.AllowUnauthenticated, "public_url", c.Auth.PublicURL, "auth_issuer", c.Auth.Issuer, "secret_key", secretKeySource(c),
		"sync_interval", c.SyncInterval, "owner_lease", c.OwnerLease, "replica_url", c.ReplicaURL, "replica_tick", c.ReplicaTick, "otlp_endpoint", c.OTLPDescription(), "otlp_headers", otlpHeaderCount(c),
		"trace_sample_ratio", c.TraceSampleRatio, "log_level", c.LogLevel, "log_format", c.LogFormat,
		"docker_host", dockerHostDescription(c.DockerHost),
		"container_runtime", c.Hosted.ContainerRuntime, "hosted", c.Hosted.Enabled, "hosted_heartbeat", c.Hosted.Heartbeat, "hosted_backoff", c.Hosted.Backoff,
	}, c.Sandbox.LogAttrs()...)
}

// otlpHeaderCount says how many OTLP headers are set: their names and
// values stay out of the logs.
func otlpHeaderCount(c Config) int {
	h, _ := c.OTLPHeaderMap()
	return len(h)
}

func secretKeySource(c Config) string {
	if c.SecretKey != "" {
		return "MCP_SERVER_SECRET_KEY"
	}
	return filepath.Join(c.DataDir, "secret.key")
}

// dockerHostDescription names the engine address without any credentials
// a tcp URL might carry.
func dockerHostDescription(h string) string {
	if h == "" {
		return "default socket"
	}
	if u, err := url.Parse(h); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return h
}

// loopbackAddr checks a host:port that must stay on this machine; it
// returns what is wrong, "" when nothing is.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port (for example 127.0.0.1:6060)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port %q is not a number in 0-65535", port)
	}
	if !loopbackHost(host) {
		return fmt.Sprintf("host %q is not a loopback address (use 127.0.0.1 or [::1]): profiles show memory contents and have no auth", host)
	}
	return ""
}
