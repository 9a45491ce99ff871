package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

// TestSandboxSwitchDrainsPool: a project's warm sandbox container and
// its workspace go when the project's sandbox is switched off through
// the API; its session stays as switching off leaves sessions. A second
// new session before that started on the warm container, on an empty
// workspace of its own.
func TestSandboxSwitchDrainsPool(t *testing.T) {
	inst := testInstance("pool-switch")
	env, _ := ownedGatewayEnv(t, inst, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_SANDBOX_WARM_POOL": "1"})
	g := startGateway(t, nil, env)
	admin := newAPI(t, g.url, adminToken)
	cs, _, err := dialMCP(g.url+"/mcp", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	count := func() (containers, volumes int) {
		cl, err := e.List(ctx, map[string]string{engine.LabelKind: sandbox.KindSession})
		if err != nil {
			t.Fatal(err)
		}
		vl, err := e.ListVolumes(ctx, map[string]string{engine.LabelKind: sandbox.KindWorkspace})
		if err != nil {
			t.Fatal(err)
		}
		return len(cl), len(vl)
	}
	run := func(command string) map[string]any {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": command}})
		if err != nil || res.IsError {
			t.Fatalf("execute_command: %v %+v", err, res)
		}
		return structured(t, res)
	}
	first := run("echo tenant > f.txt")
	waitPool := func(want int) {
		t.Helper()
		eventually(t, 90*time.Second, func() (bool, string) {
			var st struct {
				Sandbox struct {
					Warm int `json:"warm"`
				} `json:"sandbox"`
			}
			admin.must(http.StatusOK, "GET", "/", nil, &st)
			c, v := count()
			return st.Sandbox.Warm == want, fmt.Sprintf("warm %d, want %d (%d containers, %d volumes)", st.Sandbox.Warm, want, c, v)
		})
	}
	waitPool(1)
	second := run("ls -A")
	if second["session_id"] == first["session_id"] || second["workspace_id"] == first["workspace_id"] || second["stdout"] != "" {
		t.Fatalf("the second session: %+v (first %+v)", second, first)
	}
	waitPool(1)
	if c, v := count(); c != 3 || v != 3 {
		t.Fatalf("two sessions and a warm container: %d containers, %d volumes", c, v)
	}
	admin.must(http.StatusOK, "PUT", "/api/v1/projects/default/sandbox", map[string]bool{"enabled": false}, nil)
	waitPool(0)
	if c, v := count(); c != 2 || v != 2 {
		t.Fatalf("switched off: %d containers, %d volumes; want the two sessions'", c, v)
	}
}
