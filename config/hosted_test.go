package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard"
)

func TestParseHosted(t *testing.T) {
	file := []byte(`{"mcpServers": {
		"plain": {"command": "x"},
		"notes": {"hosted": {"image": "example/notes:1", "volumes": ["/data"], "environment": {"T": "${TOKEN}"}}},
		"off": {"hosted": {"image": "x:1"}, "disabled": true}
	}}`)
	regs, err := ParseHosted(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []switchboard.HostedRegistration{{Name: "notes", Image: "example/notes:1", Volumes: []string{"/data"},
		Environment: map[string]string{"T": "${TOKEN}"}, Origin: "file"}}
	if diff := cmp.Diff(want, regs); diff != "" {
		t.Errorf("ParseHosted (-want +got):\n%s", diff)
	}
	specs, err := ParseServers(file, func(string) string { return "" })
	if err != nil || len(specs) != 1 || specs[0].Name != "plain" {
		t.Errorf("ParseServers = %+v, %v; want only the stdio server", specs, err)
	}
	for name, bad := range map[string]string{
		"unknown field": `{"mcpServers": {"n": {"hosted": {"image": "x", "imgae": "y"}}}}`,
		"other name":    `{"mcpServers": {"n": {"hosted": {"name": "m", "image": "x"}}}}`,
		"origin":        `{"mcpServers": {"n": {"hosted": {"image": "x", "origin": "file"}}}}`,
		// A hosted server runs as its image's user: there is no field to ask for root.
		"user root": `{"mcpServers": {"n": {"hosted": {"image": "x", "user": "0:0"}}}}`,
	} {
		if _, err := ParseHosted([]byte(bad)); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := ParseServers([]byte(`{"mcpServers": {"n": {"hosted": {"image": "x"}, "command": "y"}}}`), func(string) string { return "" }); err == nil {
		t.Error("an entry with both hosted and command was accepted")
	}
}

func TestHostedVariables(t *testing.T) {
	env := map[string]string{"MCP_SERVER_HOSTED_BACKOFF": "1s,2s", "MCP_SERVER_HOSTED_RESTART_DELAY": "10s", "MCP_SERVER_HOSTED_CRASH_LIMIT": "0"}
	_, err := Load(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("bad hosted variables accepted")
	}
	for _, name := range []string{"MCP_SERVER_HOSTED_RESTART_DELAY", "MCP_SERVER_HOSTED_CRASH_LIMIT"} {
		if !contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	cfg, err := Load(func(k string) string { return map[string]string{"MCP_SERVER_HOSTED_BACKOFF": "1s,2s"}[k] })
	if err != nil || len(cfg.Hosted.Backoff) != 2 || !cfg.Hosted.Enabled {
		t.Errorf("Load = %+v, %v", cfg.Hosted, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// The warm pool's growth is bounded by a maximum no smaller than its
// minimum, and it shrinks after a positive idle time.
func TestCatalogWarmPoolVariables(t *testing.T) {
	cfg, err := Load(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Hosted; h.CatalogWarmPool != 2 || h.CatalogWarmPoolMax != 16 || h.CatalogWarmPoolIdle != time.Minute {
		t.Errorf("defaults: warm pool %d, max %d, idle %s; want 2, 16, 1m", h.CatalogWarmPool, h.CatalogWarmPoolMax, h.CatalogWarmPoolIdle)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		bad  string
	}{
		{"max below min", map[string]string{"MCP_SERVER_CATALOG_WARM_POOL": "4", "MCP_SERVER_CATALOG_WARM_POOL_MAX": "3"}, "MCP_SERVER_CATALOG_WARM_POOL_MAX"},
		{"max too large", map[string]string{"MCP_SERVER_CATALOG_WARM_POOL_MAX": "65"}, "MCP_SERVER_CATALOG_WARM_POOL_MAX"},
		{"idle zero", map[string]string{"MCP_SERVER_CATALOG_WARM_POOL_IDLE": "0s"}, "MCP_SERVER_CATALOG_WARM_POOL_IDLE"},
		{"ok", map[string]string{"MCP_SERVER_CATALOG_WARM_POOL": "0", "MCP_SERVER_CATALOG_WARM_POOL_MAX": "0", "MCP_SERVER_CATALOG_WARM_POOL_IDLE": "5m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(func(k string) string { return tc.env[k] })
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.bad != "" && (err == nil || !contains(err.Error(), tc.bad)):
				t.Fatalf("Load: %v, want an error naming %s", err, tc.bad)
			}
		})
	}
}

// MCP_SERVER_CONTAINER_RUNTIME is "auto" (the default) or a runtime's
// name as the engine lists it; anything else is refused at start, naming
// the variable, rather than at the first container.
func TestContainerRuntimeVariable(t *testing.T) {
	for _, tc := range []struct {
		value, want string // want "": refused
	}{
		{"", "auto"},
		{"auto", "auto"},
		{"runc", "runc"},
		{"runsc", "runsc"},
		{"io.containerd.runc.v2", "io.containerd.runc.v2"},
		{"run sc", ""},
		{"/usr/bin/runsc", ""},
		{"-runsc", ""},
		{"runsc;rm", ""},
		{strings.Repeat("r", 65), ""},
	} {
		t.Run(tc.value, func(t *testing.T) {
			cfg, err := Load(func(k string) string { return map[string]string{"MCP_SERVER_CONTAINER_RUNTIME": tc.value}[k] })
			switch {
			case tc.want == "" && (err == nil || !contains(err.Error(), "MCP_SERVER_CONTAINER_RUNTIME")):
				t.Fatalf("Load: %v; want an error naming MCP_SERVER_CONTAINER_RUNTIME", err)
			case tc.want != "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want != "" && cfg.Hosted.ContainerRuntime != tc.want:
				t.Fatalf("runtime = %q, want %q", cfg.Hosted.ContainerRuntime, tc.want)
			}
		})
	}
}
