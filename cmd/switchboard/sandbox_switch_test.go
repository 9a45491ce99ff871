package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

// sandboxSwitchEnv turns the sandbox on; listing its tools needs no
// Docker engine, so these tests run without one. The image does not
// exist, so a sandbox call that wrongly gets through starts nothing.
func sandboxSwitchEnv(extra map[string]string) map[string]string {
	env := map[string]string{"MCP_SERVER_SANDBOX": "true", "MCP_SERVER_ADMIN_TOKEN": adminToken,
		"MCP_SERVER_SANDBOX_IMAGE_PYTHON": "switchboard-sandbox:absent", "MCP_SERVER_SANDBOX_IMAGE_NODE": "switchboard-sandbox:absent"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// switchOf reads GET /api/v1/projects/{p}/sandbox.
func switchOf(a *apiClient, project string) bool {
	var out struct {
		Enabled bool `json:"enabled"`
	}
	a.must(http.StatusOK, "GET", "/api/v1/projects/"+project+"/sandbox", nil, &out)
	return out.Enabled
}

// TestSandboxSwitchSurvivesRestart: a project's switch of the sandbox
// tools, set through the API, is stored: after the gateway restarts
// (run() again on the same data dir) the tools are still off, for the
// default project and for another, and a switch on needs no restart.
func TestSandboxSwitchSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	env := sandboxSwitchEnv(map[string]string{"MCP_SERVER_DATA_DIR": dir})
	g := startGateway(t, nil, env)
	a := newAPI(t, g.url, adminToken)
	a.createProject("other")
	for _, p := range []string{"default", "other"} {
		a.must(http.StatusOK, "PUT", "/api/v1/projects/"+p+"/sandbox", map[string]bool{"enabled": false}, nil)
	}
	g.stop(t)

	g = startGateway(t, nil, env)
	a = newAPI(t, g.url, adminToken)
	endpoints := map[string]string{"default": g.url + "/mcp", "other": g.url + "/projects/other/mcp"}
	sessions := map[string]*mcp.ClientSession{}
	for p, url := range endpoints {
		cs, _ := openMCP(t, url, adminToken)
		sessions[p] = cs
		if names := toolNames(t, cs); has(names, "execute_command") {
			t.Errorf("%s after the restart lists the sandbox tools: %v", p, names)
		}
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "true"}})
		if code := sdkCode(t, err); code != -32601 {
			t.Errorf("%s: execute_command after the restart: %d %v, want -32601", p, code, err)
		}
		if switchOf(a, p) {
			t.Errorf("%s: GET /sandbox after the restart says enabled", p)
		}
	}
	// On again, at once, on the running gateway.
	a.must(http.StatusOK, "PUT", "/api/v1/projects/other/sandbox", map[string]bool{"enabled": true}, nil)
	if names := toolNames(t, sessions["other"]); !has(names, "execute_command") {
		t.Fatalf("switched on, other lists %v", names)
	}
	if names := toolNames(t, sessions["default"]); has(names, "execute_command") {
		t.Fatalf("default came back on with other: %v", names)
	}
	a.must(http.StatusNotFound, "PUT", "/api/v1/projects/nope/sandbox", map[string]bool{"enabled": true}, nil)
}

// TestSandboxSwitchReplicas: two gateways on one PostgreSQL; the switch
// set through A reaches B by its sync alone, both ways.
func TestSandboxSwitchReplicas(t *testing.T) {
	t.Parallel()
	env := sandboxSwitchEnv(map[string]string{"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_SYNC_INTERVAL": "100ms"})
	ga, gb := startGateway(t, nil, env), startGateway(t, nil, env)
	a, b := newAPI(t, ga.url, adminToken), newAPI(t, gb.url, adminToken)
	a.createProject("shared")
	cs, _ := openMCP(t, gb.url+"/projects/shared/mcp", adminToken)
	eventually(t, opTimeout, func() (bool, string) {
		return has(toolNames(t, cs), "execute_command"), "B does not serve the sandbox tools of the new project"
	})
	a.must(http.StatusOK, "PUT", "/api/v1/projects/shared/sandbox", map[string]bool{"enabled": false}, nil)
	eventually(t, opTimeout, func() (bool, string) {
		return !has(toolNames(t, cs), "execute_command") && !switchOf(b, "shared"), "B still serves the sandbox tools switched off on A"
	})
	a.must(http.StatusOK, "PUT", "/api/v1/projects/shared/sandbox", map[string]bool{"enabled": true}, nil)
	eventually(t, opTimeout, func() (bool, string) {
		return has(toolNames(t, cs), "execute_command") && switchOf(b, "shared"), "B does not serve the sandbox tools switched on again on A"
	})
}

// TestSandboxSwitchKeepsReplicaRouting: a project's sandbox switch turned
// off and on while both replicas run (A applies it at once through its
// API, B through its store sync) leaves every replica's sandbox tools
// routing a call that names another replica's session to that replica:
// the file the session wrote is read back through the other one.
func TestSandboxSwitchKeepsReplicaRouting(t *testing.T) {
	env, _ := ownedGatewayEnv(t, testInstance("sbx-switch-repl"), map[string]string{
		"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey, "MCP_SERVER_ADMIN_TOKEN": adminToken,
		"MCP_SERVER_OWNER_LEASE": "3s", "MCP_SERVER_REPLICA_TICK": "200ms", "MCP_SERVER_SYNC_INTERVAL": "100ms"})
	ga, gb := startGateway(t, nil, env), startGateway(t, nil, env)
	a := newAPI(t, ga.url, adminToken)
	csA, _ := openMCP(t, ga.url+"/mcp", adminToken)
	csB, _ := openMCP(t, gb.url+"/mcp", adminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession, args map[string]any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("execute_command %v: %v %+v", args, err, res)
		}
		return structured(t, res)
	}
	onA := call(csA, map[string]any{"command": "echo made on A > f.txt"})["session_id"].(string)
	onB := call(csB, map[string]any{"command": "echo made on B > f.txt"})["session_id"].(string)

	// Off, until B's sync has applied it; then on again, likewise.
	for _, on := range []bool{false, true} {
		a.must(http.StatusOK, "PUT", "/api/v1/projects/default/sandbox", map[string]bool{"enabled": on}, nil)
		eventually(t, opTimeout, func() (bool, string) {
			return has(toolNames(t, csB), "execute_command") == on, "B has not applied the switch"
		})
	}
	if got := call(csA, map[string]any{"command": "cat f.txt", "session_id": onB})["stdout"]; got != "made on B\n" {
		t.Errorf("B's session through A after A applied the switch: stdout %q, want B's file", got)
	}
	if got := call(csB, map[string]any{"command": "cat f.txt", "session_id": onA})["stdout"]; got != "made on A\n" {
		t.Errorf("A's session through B after B's sync applied the switch: stdout %q, want A's file", got)
	}
}
