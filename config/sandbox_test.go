package config

import (
	"fmt"
	"os"
	"path/filepath"
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
		SessionTimeout: 30 * time.Minute, MaxSessions: 10, MaxTimeout: 5 * time.Minute, OutputLimit: 1 << 20,
		WorkspaceRetention: 24 * time.Hour, WorkspaceSize: 1 << 30, WarmPool: 1, WarmPoolMax: 4}
	if diff := cmp.Diff(want, cfg.Sandbox); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// A retention of 0 is valid (such workspaces go when their session
// ends), and so is a workspace size of 0 (no limit).
func TestSandboxZeroes(t *testing.T) {
	cfg, err := Load(getenvOf(map[string]string{"MCP_SERVER_SANDBOX_WORKSPACE_RETENTION": "0", "MCP_SERVER_SANDBOX_WORKSPACE_SIZE": "0"}))
	if err != nil || cfg.Sandbox.WorkspaceRetention != 0 || cfg.Sandbox.WorkspaceSize != 0 {
		t.Fatalf("zeroes: %+v %v", cfg.Sandbox, err)
	}
}

func TestSandboxVolumes(t *testing.T) {
	cfg, err := Load(getenvOf(map[string]string{"MCP_SERVER_SANDBOX_VOLUMES": `["data:/sandbox/data","refs:/sandbox/refs:ro","/host/data:/sandbox/host","/srv/ro:/sandbox/ro:ro","/srv/rw:/sandbox/rw:rw"]`, "MCP_SERVER_SANDBOX_NETWORK": "bridge"}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.Sandbox.ParsedVolumes()
	if err != nil {
		t.Fatal(err)
	}
	want := []SandboxVolume{{Source: "data", Target: "/sandbox/data"}, {Source: "refs", Target: "/sandbox/refs", ReadOnly: true},
		{Source: "/host/data", Target: "/sandbox/host", Bind: true}, {Source: "/srv/ro", Target: "/sandbox/ro", ReadOnly: true, Bind: true},
		{Source: "/srv/rw", Target: "/sandbox/rw", Bind: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if cfg.Sandbox.NetworkMode() != "bridge" {
		t.Errorf("network %q", cfg.Sandbox.NetworkMode())
	}
}

func TestSandboxRejects(t *testing.T) {
	for name, tc := range map[string]struct{ key, value string }{
		"not json":                 {"MCP_SERVER_SANDBOX_VOLUMES", `data:/x`},
		"negative warm pool":       {"MCP_SERVER_SANDBOX_WARM_POOL", "-1"},
		"warm pool over the cap":   {"MCP_SERVER_SANDBOX_WARM_POOL", "11"},
		"relative target":          {"MCP_SERVER_SANDBOX_VOLUMES", `["data:x"]`},
		"workspace":                {"MCP_SERVER_SANDBOX_VOLUMES", `["data:/workspace/x"]`},
		"bind over the workspace":  {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/d:/workspace"]`},
		"bind over tmp":            {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/d:/tmp"]`},
		"bind over root":           {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/d:/"]`},
		"relative host path":       {"MCP_SERVER_SANDBOX_VOLUMES", `["./data:/sandbox/data"]`},
		"relative host dir":        {"MCP_SERVER_SANDBOX_VOLUMES", `["host/data:/sandbox/data"]`},
		"dot dot host path":        {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/../etc:/sandbox/etc"]`},
		"dot dot target":           {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/d:/sandbox/../workspace"]`},
		"relative bind target":     {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/d:sandbox"]`},
		"unclean host path":        {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv//d/:/sandbox/d"]`},
		"host root":                {"MCP_SERVER_SANDBOX_VOLUMES", `["/:/host"]`},
		"docker socket":            {"MCP_SERVER_SANDBOX_VOLUMES", `["/var/run/docker.sock:/sandbox/docker.sock"]`},
		"run docker socket":        {"MCP_SERVER_SANDBOX_VOLUMES", `["/run/docker.sock:/sandbox/docker.sock:ro"]`},
		"socket directory":         {"MCP_SERVER_SANDBOX_VOLUMES", `["/var/run:/sandbox/run"]`},
		"run directory":            {"MCP_SERVER_SANDBOX_VOLUMES", `["/run:/sandbox/run"]`},
		"var":                      {"MCP_SERVER_SANDBOX_VOLUMES", `["/var:/sandbox/var"]`},
		"docker data":              {"MCP_SERVER_SANDBOX_VOLUMES", `["/var/lib/docker/volumes:/sandbox/v"]`},
		"proc":                     {"MCP_SERVER_SANDBOX_VOLUMES", `["/proc:/sandbox/proc"]`},
		"sys":                      {"MCP_SERVER_SANDBOX_VOLUMES", `["/sys/fs/cgroup:/sandbox/cg"]`},
		"dev":                      {"MCP_SERVER_SANDBOX_VOLUMES", `["/dev:/sandbox/dev"]`},
		"mounted twice":            {"MCP_SERVER_SANDBOX_VOLUMES", `["/srv/a:/sandbox/x","/srv/b:/sandbox/x"]`},
		"bad mode":                 {"MCP_SERVER_SANDBOX_VOLUMES", `["data:/x:rx"]`},
		"host network":             {"MCP_SERVER_SANDBOX_NETWORK", "host"},
		"bad network":              {"MCP_SERVER_SANDBOX_NETWORK", "a b"},
		"zero sessions":            {"MCP_SERVER_SANDBOX_MAX_SESSIONS", "0"},
		"timeout":                  {"MCP_SERVER_SANDBOX_SESSION_TIMEOUT", "soon"},
		"bool":                     {"MCP_SERVER_SANDBOX", "maybe"},
		"output":                   {"MCP_SERVER_SANDBOX_OUTPUT_LIMIT", "10"},
		"negative retention":       {"MCP_SERVER_SANDBOX_WORKSPACE_RETENTION", "-1h"},
		"retention not a duration": {"MCP_SERVER_SANDBOX_WORKSPACE_RETENTION", "a day"},
		"workspace size too small": {"MCP_SERVER_SANDBOX_WORKSPACE_SIZE", "1048576"},
		"negative workspace size":  {"MCP_SERVER_SANDBOX_WORKSPACE_SIZE", "-1"},
		"workspace size in words":  {"MCP_SERVER_SANDBOX_WORKSPACE_SIZE", "1G"},
		"negative warm pool max":   {"MCP_SERVER_SANDBOX_WARM_POOL_MAX", "-1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(getenvOf(map[string]string{tc.key: tc.value}))
			if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") {
				t.Fatalf("want an error naming %s, got %v", tc.key, err)
			}
		})
	}
}

// The sandbox's registry credentials come in pairs; the password is
// never in the error nor in the start-up log.
func TestSandboxRegistryCredentials(t *testing.T) {
	for set, want := range map[string]string{
		"MCP_SERVER_SANDBOX_REGISTRY_USER":     "MCP_SERVER_SANDBOX_REGISTRY_PASSWORD:",
		"MCP_SERVER_SANDBOX_REGISTRY_PASSWORD": "MCP_SERVER_SANDBOX_REGISTRY_USER:",
	} {
		_, err := Load(getenvOf(map[string]string{set: "pw-4711"}))
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "pw-4711") {
			t.Errorf("only %s: %v; want an error naming the other, without the value", set, err)
		}
	}
	c, err := Load(getenvOf(map[string]string{"MCP_SERVER_SANDBOX_REGISTRY_USER": "sbx", "MCP_SERVER_SANDBOX_REGISTRY_PASSWORD": "pw-4711"}))
	if err != nil || c.Sandbox.RegistryUser != "sbx" || c.Sandbox.RegistryPassword != "pw-4711" {
		t.Fatalf("both: %+v, %v", c.Sandbox, err)
	}
	if attrs := fmt.Sprint(c.LogAttrs()); strings.Contains(attrs, "pw-4711") || !strings.Contains(attrs, "sbx") {
		t.Errorf("start-up log attributes %s: want the user, never the password", attrs)
	}
}

// A bind source whose symbolic link leads to a refused path is refused,
// and so is the socket DOCKER_HOST names, or a directory holding it.
func TestSandboxBindLinksAndSocket(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "root")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string]map[string]string{
		"link to /": {"MCP_SERVER_SANDBOX_VOLUMES": `["` + link + `:/sandbox/x"]`},
		"DOCKER_HOST socket dir": {"DOCKER_HOST": "unix://" + dir + "/d/docker.sock",
			"MCP_SERVER_SANDBOX_VOLUMES": `["` + dir + `/d:/sandbox/x"]`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(getenvOf(env))
			if err == nil || !strings.HasPrefix(err.Error(), "MCP_SERVER_SANDBOX_VOLUMES:") {
				t.Fatalf("want an error naming MCP_SERVER_SANDBOX_VOLUMES, got %v", err)
			}
		})
	}
	// A plain directory is accepted.
	if _, err := Load(getenvOf(map[string]string{"MCP_SERVER_SANDBOX_VOLUMES": `["` + dir + `:/sandbox/x:ro"]`})); err != nil {
		t.Fatal(err)
	}
}

func getenvOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
