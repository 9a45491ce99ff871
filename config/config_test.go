package config

import (
	"errors"
	"fmt"
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
		"unknown field": `{"mcpServers": {"a": {"command": "x", "args": "not-a-list"}}}`,
		"servers array": `{"mcpServers": []}`,
	}
	for name, file := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseServers([]byte(file), envOf(nil))
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Errorf("err = %v; want ErrInvalid", err)
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
