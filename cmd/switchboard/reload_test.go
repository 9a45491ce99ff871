package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestReloadCommand: `switchboard reload` (POST /api/v1/reload) re-reads
// the servers file without a signal, so it cannot hit the wrong process;
// it is the admin's, and a file that no longer parses keeps the current
// servers and says why.
func TestReloadCommand(t *testing.T) {
	const admin = "admin-token-for-the-reload-test-0123456789"
	g := startGateway(t, [][2]any{{"a", stdioServer("a")}}, map[string]string{"MCP_SERVER_ADMIN_TOKEN": admin})
	r := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url, "SWITCHBOARD_TOKEN": admin})

	writeServers(t, g.file, [][2]any{{"a", stdioServer("a")}, {"b", stdioServer("b", "toolPrefix", "b_")}})
	if out := r.ok("reload"); !strings.Contains(out, "2 servers") {
		t.Errorf("reload printed %q", out)
	}
	if out := r.ok("tools", "ls"); !strings.Contains(out, "b_echo") {
		t.Errorf("the reloaded file's server is not served:\n%s", out)
	}
	// servers ls lists what the file configures, marked as the file's.
	if out := r.ok("servers", "ls"); !hasRow(out, "a", "file", "stdio") || !hasRow(out, "b", "file", "stdio") {
		t.Errorf("servers ls on default does not list the file's servers:\n%s", out)
	}
	var list struct {
		Servers []struct {
			Name     string `json:"name"`
			Source   string `json:"source"`
			ReadOnly bool   `json:"read_only"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(r.ok("servers", "ls", "--json")), &list); err != nil || len(list.Servers) != 2 || !list.Servers[0].ReadOnly || list.Servers[0].Source != "file" {
		t.Errorf("servers ls --json = %+v (%v)", list, err)
	}

	out := r.ok("reload", "--json")
	var res struct {
		Reloaded bool `json:"reloaded"`
		Servers  int  `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.Reloaded || res.Servers != 2 {
		t.Errorf("reload --json = %q (%v)", out, err)
	}

	if err := os.WriteFile(g.file, []byte(`{"mcpServers": {"b": `), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.fails("reload"); !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "current servers stay") {
		t.Errorf("broken file: %v", err)
	}
	if out := r.ok("tools", "ls"); !strings.Contains(out, "b_echo") {
		t.Errorf("a broken file dropped servers:\n%s", out)
	}

	// A project token may not reload: the file decides what runs on the host.
	r.ok("projects", "add", "p")
	tok := strings.TrimSpace(r.ok("tokens", "create", "ci", "-p", "p"))
	pr := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url, "SWITCHBOARD_TOKEN": tok})
	if err := pr.fails("reload"); !strings.Contains(err.Error(), "403") {
		t.Errorf("project token reload: %v, want 403", err)
	}
}
