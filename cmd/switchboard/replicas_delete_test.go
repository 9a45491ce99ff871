package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

// TestProjectDeleteAcrossReplicas: two replicas on one PostgreSQL and one
// engine. Replica B runs a sandbox session of p1 (a file in its
// workspace) and a warm container for it; p1 is deleted with force
// through A. The DELETE answers 204 once B has ended them (A waits for
// B's containers before it removes the volumes), nothing of p1 is left on
// the engine, and a p1 created again reaches the old session on neither
// replica, nor the old file.
func TestProjectDeleteAcrossReplicas(t *testing.T) {
	inst := testInstance("rep-delete")
	env, _ := ownedGatewayEnv(t, inst, map[string]string{
		"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey, "MCP_SERVER_ADMIN_TOKEN": adminToken,
		"MCP_SERVER_OWNER_LEASE": "3s", "MCP_SERVER_REPLICA_TICK": "200ms", "MCP_SERVER_SYNC_INTERVAL": "200ms",
		"MCP_SERVER_SANDBOX_WARM_POOL": "1"})
	a, b := startGateway(t, nil, env), startGateway(t, nil, env)
	admin := newAPI(t, a.url, adminToken)
	admin.createProject("p1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	csB, _, err := dialMCP(b.url+"/projects/p1/mcp", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := csB.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo tenant-one > secret.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on B: %v %+v", err, res)
	}
	old, _ := structured(t, res)["session_id"].(string)
	e, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	eventually(t, 90*time.Second, func() (bool, string) {
		cs, vs, err := e.ProjectObjects(ctx, "p1")
		return err == nil && cs == 2 && vs == 2, fmt.Sprintf("p1 on the engine: %d containers, %d volumes, %v; want B's session and warm container", cs, vs, err)
	})

	admin.must(204, "DELETE", "/api/v1/projects/p1?force=true", nil, nil)
	_ = csB.Close()
	if cs, vs, err := e.ProjectObjects(ctx, "p1"); err != nil || cs != 0 || vs != 0 {
		t.Fatalf("after the deletion through A, p1 on the engine: %d containers, %d volumes, %v; want none", cs, vs, err)
	}
	if !strings.Contains(b.logs.String(), "sandbox: sessions of a deleted project ended") {
		t.Errorf("B did not say it ended the deleted project's session")
	}

	// The same id again: the old session is unknown on both replicas.
	admin.createProject("p1")
	for name, g := range map[string]*gateway{"A": a, "B": b} {
		cs, _, err := dialMCP(g.url+"/projects/p1/mcp", adminToken)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat secret.txt", "session_id": old}})
		if code := sdkCode(t, err); code != -32602 {
			t.Errorf("the old session in the new p1 on %s: code %d (%v), want -32602", name, code, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat secret.txt"}})
		if err != nil || res.IsError {
			t.Fatalf("execute_command on %s: %v %+v", name, err, res)
		}
		if r := structured(t, res); r["exit_code"] == float64(0) || strings.Contains(fmt.Sprint(r["stdout"]), "tenant-one") {
			t.Errorf("the new p1 reads the old tenant's file on %s: %+v", name, r)
		}
	}
}
