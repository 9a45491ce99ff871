package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSandboxDefaults(t *testing.T) {
	cfg, err := Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := Sandbox{Enabled: true, ImagePython: "switchboard-sandbox:latest", ImageNode: "switchboard-sandbox:latest",
		SessionTimeout: 30 * time.Minute, MaxSessions: 10, MaxTimeout: 5 * time.Minute, OutputLimit: 1 << 20}
	if diff := cmp.Diff(want, cfg.Sandbox); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestSandboxVolumes(t *testing.T) {
	cfg, err := Load(getenvOf(map[string]string{"MCP_SERVER_SANDBOX_VOLUMES": `["data:/sandbox/data","refs:/sandbox/refs:ro"]`, "MCP_SERVER_SANDBOX_NETWORK": "bridge"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.Sandbox.ParsedVolumes()
	if err != nil {
		t.Fatal(err)
	}
	want := []SandboxVolume{{Source: "data", Target: "/sandbox/data"}, {Source: "refs", Target: "/sandbox/refs", ReadOnly: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if cfg.Sandbox.NetworkMode() != "bridge" {
		t.Errorf("network %q", cfg.Sandbox.NetworkMode())
	}
}

func TestSandboxRejects(t *testing.T) {
	for name, tc := range map[string]struct{ key, value string }{
		"host path":       {"MCP_SERVER_SANDBOX_VOLUMES", `["/host/data:/sandbox/data"]`},
		"not json":        {"MCP_SERVER_SANDBOX_VOLUMES", `data:/x`},
		"relative target": {"MCP_SERVER_SANDBOX_VOLUMES", `["data:x"]`},
		"workspace":       {"MCP_SERVER_SANDBOX_VOLUMES", `["data:/workspace/x"]`},
		"bad mode":        {"MCP_SERVER_SANDBOX_VOLUMES", `["data:/x:rx"]`},
		"host network":    {"MCP_SERVER_SANDBOX_NETWORK", "host"},
		"bad network":     {"MCP_SERVER_SANDBOX_NETWORK", "a b"},
		"zero sessions":   {"MCP_SERVER_SANDBOX_MAX_SESSIONS", "0"},
		"timeout":         {"MCP_SERVER_SANDBOX_SESSION_TIMEOUT", "soon"},
		"bool":            {"MCP_SERVER_SANDBOX", "maybe"},
		"output":          {"MCP_SERVER_SANDBOX_OUTPUT_LIMIT", "10"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(getenvOf(map[string]string{tc.key: tc.value}))
			if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
				t.Fatalf("want an error naming %s, got %v", tc.key, err)
			}
		})
	}
}

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
