package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load(envOf(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr() != "127.0.0.1:8080" || cfg.CallTimeout != 30*time.Second || cfg.ShutdownTimeout != 30*time.Second || cfg.EnableCORS || cfg.LogFormat != "text" {
		t.Errorf("unexpected defaults: %+v", cfg)
	}
	if cfg.DataDir != "/home/u/.local/state/switchboard" {
		t.Errorf("DataDir = %q", cfg.DataDir)
	}
	// One tenant must not be able to take every session by default.
	if cfg.MaxProjectSessions <= 0 || cfg.MaxProjectSessions >= cfg.MaxSessions {
		t.Errorf("MaxProjectSessions = %d with MaxSessions %d: one project could starve the others", cfg.MaxProjectSessions, cfg.MaxSessions)
	}
}

func TestLoadCORSAliases(t *testing.T) {
	for _, name := range []string{"MCP_ENABLE_CORS", "MCP_SERVER_ENABLE_CORS"} {
		cfg, err := Load(envOf(map[string]string{name: "true", "MCP_SERVER_CORS_ORIGINS": "https://a.example, http://b.example:3000"}))
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.EnableCORS {
			t.Errorf("%s=true did not enable CORS", name)
		}
		if diff := cmp.Diff([]string{"https://a.example", "http://b.example:3000"}, cfg.CORSOrigins); diff != "" {
			t.Errorf("origins (-want +got):\n%s", diff)
		}
	}
}

// Every problem is reported at once, each naming its variable.
func TestLoadReportsAllProblems(t *testing.T) {
	_, err := Load(envOf(map[string]string{
		"MCP_SERVER_PORT":           "99999",
		"MCP_SERVER_CALL_TIMEOUT":   "soon",
		"MCP_SERVER_LOG_FORMAT":     "xml",
		"MCP_SERVER_LOG_LEVEL":      "loud",
		"MCP_SERVER_MAX_BODY_BYTES": "10",
		"MCP_SERVER_CORS_ORIGINS":   "not a url",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, v := range []string{"MCP_SERVER_PORT", "MCP_SERVER_CALL_TIMEOUT", "MCP_SERVER_LOG_FORMAT", "MCP_SERVER_LOG_LEVEL", "MCP_SERVER_MAX_BODY_BYTES", "MCP_SERVER_CORS_ORIGINS"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s:\n%v", v, err)
		}
	}
}

// A value that does not even parse is reported by its variable, with what
// it should look like, never by the Go field behind it.
func TestLoadNamesUnparsableVariables(t *testing.T) {
	_, err := Load(envOf(map[string]string{
		"MCP_SERVER_PORT":               "abc",
		"MCP_ENABLE_CORS":               "yes please",
		"MCP_SERVER_CALL_LOG":           "maybe",
		"MCP_SERVER_TRACE_SAMPLE_RATIO": "half",
		"MCP_SERVER_SHUTDOWN_TIMEOUT":   "10",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`MCP_SERVER_PORT: "abc" is not a whole number`,
		`MCP_ENABLE_CORS: "yes please" is not true or false`,
		`MCP_SERVER_CALL_LOG: "maybe" is not true or false`,
		`MCP_SERVER_TRACE_SAMPLE_RATIO: "half" is not a number`,
		`MCP_SERVER_SHUTDOWN_TIMEOUT: "10" is not a duration`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if n := strings.Count(err.Error(), "MCP_SERVER_SHUTDOWN_TIMEOUT"); n != 1 {
		t.Errorf("MCP_SERVER_SHUTDOWN_TIMEOUT reported %d times, want once:\n%v", n, err)
	}
	for _, field := range []string{"Port", "EnableCORS", "CallLog", "TraceSampleRatio", "ShutdownTimeout", "parse error"} {
		if strings.Contains(err.Error(), field) {
			t.Errorf("error speaks of the Go field %q:\n%v", field, err)
		}
	}
}

func TestExpand(t *testing.T) {
	env := envOf(map[string]string{"TOKEN": "s3cret", "EMPTY": ""})
	tests := []struct {
		in, want string
		missing  []string
	}{
		{"plain", "plain", nil},
		{"Bearer ${TOKEN}", "Bearer s3cret", nil},
		{"${TOKEN}${TOKEN}", "s3crets3cret", nil},
		{"${NOPE}", "", []string{"NOPE"}},
		{"${EMPTY:-dflt}", "dflt", nil},
		{"$TOKEN and ${ not closed", "$TOKEN and ${ not closed", nil},
		{"${1BAD}", "${1BAD}", nil},
	}
	for _, tt := range tests {
		got, missing := Expand(tt.in, env)
		if got != tt.want || !cmp.Equal(tt.missing, missing) {
			t.Errorf("Expand(%q) = %q, %v; want %q, %v", tt.in, got, missing, tt.want, tt.missing)
		}
	}
}

func TestParseServers(t *testing.T) {
	file := `{"mcpServers": {
	  "zeta":   {"command": "zeta-mcp", "args": ["--token", "${TOKEN}"], "env": {"K": "${TOKEN}"}},
	  "alpha":  {"url": "https://example.com/sse", "headers": {"Authorization": "Bearer ${TOKEN}"}},
	  "stream": {"url": "https://example.com/mcp", "toolPrefix": "s_", "callTimeout": "5s"},
	  "vscode": {"type": "sse", "url": "https://example.com/events"},
	  "broken": {"command": "x", "env": {"A": "${MISSING_ONE}"}},
	  "off":    {"command": "y", "disabled": true}
	}}`
	specs, err := ParseServers([]byte(file), envOf(map[string]string{"TOKEN": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"zeta", "alpha", "stream", "vscode", "broken"}, names); diff != "" {
		t.Errorf("file order not kept (-want +got):\n%s", diff)
	}
	if s := specs[0]; s.Transport != switchboard.TransportStdio || s.Args[1] != "t0k" || s.Env["K"] != "t0k" {
		t.Errorf("zeta: %+v", s)
	}
	if s := specs[1]; s.Transport != switchboard.TransportSSE || s.Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("alpha: %+v", s)
	}
	if s := specs[2]; s.Transport != switchboard.TransportStreamableHTTP || s.ToolPrefix != "s_" || s.CallTimeout != 5*time.Second {
		t.Errorf("stream: %+v", s)
	}
	if s := specs[3]; s.Transport != switchboard.TransportSSE {
		t.Errorf("vscode type: %+v", s)
	}
	b := specs[4]
	if !errors.Is(b.Err, switchboard.ErrConfig) || !strings.Contains(b.Err.Error(), "MISSING_ONE") || !strings.Contains(b.Err.Error(), `"broken"`) {
		t.Errorf("broken: err = %v; want ErrConfig naming MISSING_ONE and the server", b.Err)
	}
}

func TestParseServersRejects(t *testing.T) {
	tests := map[string]string{
		"not json":      `{`,
		"no mcpServers": `{"other": {}}`,
		"both":          `{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}`,
		"neither":       `{"mcpServers": {"a": {}}}`,
		"bad transport": `{"mcpServers": {"a": {"url": "http://h", "transport": "carrier-pigeon"}}}`,
		"bad url":       `{"mcpServers": {"a": {"url": "ftp://h"}}}`,
		"bad name":      `{"mcpServers": {"../etc": {"command": "x"}}}`,
		"duplicate":     `{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}`,
		"bad timeout":   `{"mcpServers": {"a": {"command": "x", "callTimeout": "-1s"}}}`,
		"huge timeout":  `{"mcpServers": {"a": {"command": "x", "callTimeout": "999999h"}}}`,
		"timeout 1h1s":  `{"mcpServers": {"a": {"command": "x", "callTimeout": "1h0m1s"}}}`,
		"unknown field": `{"mcpServers": {"a": {"command": "x", "args": "not-a-list"}}}`,
		"servers array": `{"mcpServers": []}`,
	}
	for name, file := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseServers([]byte(file), envOf(nil))
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("err = %v; want ErrInvalid", err)
			}
			if strings.Contains(name, "timeout") && !strings.Contains(fmt.Sprint(err), "callTimeout") {
				t.Errorf("err = %v; want it to name callTimeout", err)
			}
		})
	}
}

func TestDatabaseURLNeverPrinted(t *testing.T) {
	secret := "hunter2-very-secret"
	cfg, err := Load(envOf(map[string]string{"MCP_SERVER_DATABASE_URL": "postgres://sb:" + secret + "@db:5432/switchboard"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.StoreDescription(); got != "postgres://db:5432/switchboard" {
		t.Errorf("StoreDescription = %q", got)
	}
	if s := fmt.Sprint(cfg.LogAttrs()...); strings.Contains(s, secret) {
		t.Errorf("password in log attributes: %s", s)
	}
	_, err = Load(envOf(map[string]string{"MCP_SERVER_DATABASE_URL": "mysql://u:" + secret + "@h/db"}))
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "MCP_SERVER_DATABASE_URL") {
		t.Errorf("bad URL error = %v", err)
	}
}

// A non-loopback bind without an admin token is refused unless the
// operator says the network is trusted; tokens never reach the log.
func TestAccessConfig(t *testing.T) {
	const admin = "admin-token-0123456789abcdef"
	const key = "c2VjcmV0LWtleS1zZWNyZXQta2V5LXNlY3JldC1rZXk="
	cases := []struct {
		name    string
		env     map[string]string
		wantErr string // substring; "" means valid
	}{
		{"loopback dev mode", map[string]string{}, ""},
		{"localhost IPv6", map[string]string{"MCP_SERVER_HOST": "::1"}, ""},
		{"all interfaces, no token", map[string]string{"MCP_SERVER_HOST": "0.0.0.0"}, "MCP_SERVER_ADMIN_TOKEN is not set"},
		{"LAN address, no token", map[string]string{"MCP_SERVER_HOST": "10.1.2.3"}, "MCP_SERVER_ALLOW_UNAUTHENTICATED=true"},
		{"all interfaces, admin token", map[string]string{"MCP_SERVER_HOST": "0.0.0.0", "MCP_SERVER_ADMIN_TOKEN": admin}, ""},
		{"all interfaces, trusted network", map[string]string{"MCP_SERVER_HOST": "0.0.0.0", "MCP_SERVER_ALLOW_UNAUTHENTICATED": "true"}, ""},
		{"short admin token", map[string]string{"MCP_SERVER_ADMIN_TOKEN": "short"}, "at least 16 characters"},
		{"bad sync interval", map[string]string{"MCP_SERVER_SYNC_INTERVAL": "0s"}, "MCP_SERVER_SYNC_INTERVAL"},
		{"any origin in dev mode", map[string]string{"MCP_SERVER_CORS_ORIGINS": "*"}, "would let any web page use the gateway"},
		{"any origin with an admin token", map[string]string{"MCP_SERVER_CORS_ORIGINS": "*", "MCP_SERVER_ADMIN_TOKEN": admin}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.env["HOME"] = "/home/u"
			c.env["MCP_SERVER_SECRET_KEY"] = key
			cfg, err := Load(envOf(c.env))
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			case err != nil && strings.Contains(err.Error(), "short"):
				t.Errorf("the error echoes the token value: %v", err)
			}
			logged := fmt.Sprint(cfg.LogAttrs()...)
			if strings.Contains(logged, admin) || strings.Contains(logged, key) || strings.Contains(logged, "short") {
				t.Errorf("LogAttrs leaks a token or key: %s", logged)
			}
		})
	}
}

// Tracing is off unless MCP_SERVER_OTLP_ENDPOINT says where spans go;
// the standard OTEL_ variables never switch it on.
func TestTracingConfig(t *testing.T) {
	const secret = "hunter2-otlp-token"
	cases := []struct {
		name        string
		env         map[string]string
		wantErr     string // the variable the error names; "" means valid
		wantDesc    string
		wantHeaders map[string]string
		wantRatio   float64
	}{
		{name: "off by default", env: map[string]string{}, wantDesc: "off", wantHeaders: map[string]string{}, wantRatio: 1},
		{name: "OTEL_ endpoint alone stays off", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"},
			wantDesc: "off", wantHeaders: map[string]string{}, wantRatio: 1},
		{name: "endpoint, headers and ratio", env: map[string]string{"MCP_SERVER_OTLP_ENDPOINT": "https://collector.example:4318/otlp",
			"MCP_SERVER_OTLP_HEADERS": "Authorization=Bearer%20" + secret + ", X-Scope-OrgID = team%2Ca ,", "MCP_SERVER_TRACE_SAMPLE_RATIO": "0.25"},
			wantDesc: "https://collector.example:4318", wantHeaders: map[string]string{"Authorization": "Bearer " + secret, "X-Scope-OrgID": "team,a"}, wantRatio: 0.25},
		{name: "ratio 0", env: map[string]string{"MCP_SERVER_TRACE_SAMPLE_RATIO": "0"}, wantDesc: "off", wantHeaders: map[string]string{}, wantRatio: 0},
		{name: "endpoint without scheme", env: map[string]string{"MCP_SERVER_OTLP_ENDPOINT": "collector:4318"}, wantErr: "MCP_SERVER_OTLP_ENDPOINT"},
		{name: "endpoint with credentials", env: map[string]string{"MCP_SERVER_OTLP_ENDPOINT": "http://u:" + secret + "@collector:4318"}, wantErr: "MCP_SERVER_OTLP_ENDPOINT"},
		{name: "endpoint with query", env: map[string]string{"MCP_SERVER_OTLP_ENDPOINT": "http://collector:4318?key=" + secret}, wantErr: "MCP_SERVER_OTLP_ENDPOINT"},
		{name: "header without =", env: map[string]string{"MCP_SERVER_OTLP_HEADERS": "Bearer " + secret}, wantErr: "MCP_SERVER_OTLP_HEADERS"},
		{name: "header with a bad name", env: map[string]string{"MCP_SERVER_OTLP_HEADERS": "X Token=" + secret}, wantErr: "MCP_SERVER_OTLP_HEADERS"},
		{name: "header with a bad escape", env: map[string]string{"MCP_SERVER_OTLP_HEADERS": "Authorization=" + secret + "%zz"}, wantErr: "MCP_SERVER_OTLP_HEADERS"},
		{name: "header with a newline", env: map[string]string{"MCP_SERVER_OTLP_HEADERS": "Authorization=" + secret + "%0AX: y"}, wantErr: "MCP_SERVER_OTLP_HEADERS"},
		{name: "ratio above 1", env: map[string]string{"MCP_SERVER_TRACE_SAMPLE_RATIO": "1.5"}, wantErr: "MCP_SERVER_TRACE_SAMPLE_RATIO"},
		{name: "ratio below 0", env: map[string]string{"MCP_SERVER_TRACE_SAMPLE_RATIO": "-0.1"}, wantErr: "MCP_SERVER_TRACE_SAMPLE_RATIO"},
		{name: "ratio NaN", env: map[string]string{"MCP_SERVER_TRACE_SAMPLE_RATIO": "NaN"}, wantErr: "MCP_SERVER_TRACE_SAMPLE_RATIO"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.env["HOME"] = "/home/u"
			cfg, err := Load(envOf(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, c.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error echoes a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			headers, err := cfg.OTLPHeaderMap()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.wantHeaders, headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if got := cfg.OTLPDescription(); got != c.wantDesc {
				t.Errorf("OTLPDescription = %q, want %q", got, c.wantDesc)
			}
			if cfg.TraceSampleRatio != c.wantRatio {
				t.Errorf("TraceSampleRatio = %v, want %v", cfg.TraceSampleRatio, c.wantRatio)
			}
			if logged := fmt.Sprint(cfg.LogAttrs()...); strings.Contains(logged, secret) || strings.Contains(logged, "X-Scope-OrgID") {
				t.Errorf("LogAttrs leaks an OTLP header: %s", logged)
			}
		})
	}
}

// Runtime profiles are served on loopback only: they have no auth.
func TestPprofAddr(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:6060": "",
		"[::1]:0":        "",
		"localhost:6060": "",
		"0.0.0.0:6060":   "not a loopback address",
		"10.0.0.1:6060":  "not a loopback address",
		":6060":          "not a loopback address",
		"6060":           "is not host:port",
		"127.0.0.1:http": "is not a number",
	} {
		cfg, err := Load(envOf(map[string]string{"MCP_SERVER_PPROF_ADDR": addr}))
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", addr, err)
		case want == "" && cfg.PprofAddr != addr:
			t.Errorf("%s: PprofAddr = %q", addr, cfg.PprofAddr)
		case want != "" && (err == nil || !strings.Contains(err.Error(), "MCP_SERVER_PPROF_ADDR") || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one naming MCP_SERVER_PPROF_ADDR and saying %q", addr, err, want)
		}
	}
}

// The replica URL is checked up front; without one, it is derived from
// the listen address, a wildcard host becoming the host name.
func TestReplicaURL(t *testing.T) {
	for _, bad := range []string{"10.0.0.7:8080", "ftp://h:1", "http://u:p@h:1", "http://h:1?x=1", "http://"} {
		_, err := Load(envOf(map[string]string{"HOME": "/home/u", "MCP_SERVER_REPLICA_URL": bad}))
		if err == nil || !strings.Contains(err.Error(), "MCP_SERVER_REPLICA_URL") {
			t.Errorf("MCP_SERVER_REPLICA_URL=%q: %v, want an error naming it", bad, err)
		}
	}
	cfg, err := Load(envOf(map[string]string{"HOME": "/home/u", "MCP_SERVER_REPLICA_URL": "http://10.0.0.7:8080/", "MCP_SERVER_REPLICA_TICK": "250ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ReplicaBase("127.0.0.1:9"); got != "http://10.0.0.7:8080" || cfg.ReplicaTick != 250*time.Millisecond {
		t.Errorf("ReplicaBase = %q, tick %s", got, cfg.ReplicaTick)
	}
	cfg, _ = Load(envOf(map[string]string{"HOME": "/home/u"}))
	if got := cfg.ReplicaBase("127.0.0.1:8080"); got != "http://127.0.0.1:8080" {
		t.Errorf("loopback ReplicaBase = %q", got)
	}
	host, _ := os.Hostname()
	if got := cfg.ReplicaBase("0.0.0.0:8080"); host != "" && got != "http://"+net.JoinHostPort(host, "8080") {
		t.Errorf("wildcard ReplicaBase = %q, want the host name %q", got, host)
	}
	if _, err := Load(envOf(map[string]string{"HOME": "/home/u", "MCP_SERVER_REPLICA_TICK": "0s"})); err == nil {
		t.Error("MCP_SERVER_REPLICA_TICK=0s accepted")
	}
}
