package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/store/postgres"
)

// TestSandboxSessionFenced: a replica whose sandbox session's lease is
// taken by another replica (here, by the test, for B) stops serving the
// session within a few renewal periods: its container is removed, and a
// call on it naming the session goes to the lease's holder instead of
// running on a second copy (B, which does not run it, answers that it is
// no session of the project).
func TestSandboxSessionFenced(t *testing.T) {
	db := pgtest.NewDB(t)
	inst := testInstance("sbx-fence")
	env, _ := ownedGatewayEnv(t, inst, map[string]string{
		"MCP_SERVER_DATABASE_URL": db, "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_OWNER_LEASE": "3s", "MCP_SERVER_REPLICA_TICK": "200ms"})
	a, b := startGateway(t, nil, env), startGateway(t, nil, env)
	csA, csB := sdkConnect(t, a.url+"/mcp", nil), sdkConnect(t, b.url+"/mcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: args})
	}
	res, err := call(csA, map[string]any{"command": "echo on A > f.txt"})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on A: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)
	res, err = call(csB, map[string]any{"command": "true"})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on B: %v %+v", err, res)
	}
	onB, _ := structured(t, res)["session_id"].(string)

	st, err := postgres.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	leases, err := st.ListLeases(ctx, "sandbox/default/")
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, l := range leases {
		holders[strings.TrimPrefix(l.Name, "sandbox/default/")] = l.Holder
	}
	if holders[sid] == "" || holders[onB] == "" || holders[sid] == holders[onB] {
		t.Fatalf("the sessions' leases: %v", holders)
	}
	// B takes A's session's lease, for longer than the test runs.
	name := "sandbox/default/" + sid
	if err := st.ReleaseLease(ctx, name, holders[sid]); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, name, holders[onB], time.Hour); err != nil {
		t.Fatal(err)
	}
	// Within 5 s (25 renewal periods), A's calls naming it stop reaching
	// the session A ran (a call made while A stops it fails with it).
	eventually(t, 5*time.Second, func() (bool, string) {
		res, err := call(csA, map[string]any{"command": "cat f.txt", "session_id": sid})
		if err == nil && !res.IsError {
			return false, "A still serves the session whose lease B holds: " + structured(t, res)["stdout"].(string)
		}
		return true, ""
	})
	if !strings.Contains(a.logs.String(), "lease lost or not renewed in time") {
		t.Errorf("A did not say why it stopped the session")
	}
	eventually(t, opTimeout, func() (bool, string) {
		got := instanceContainers(t, inst)
		return len(got) == 1, itoa(len(got)) + " containers, want B's session's only (A's fenced one removed)"
	})
	// Stopped: the call goes to the lease's holder, B, which runs no such
	// session (-32602).
	_, err = call(csA, map[string]any{"command": "cat f.txt", "session_id": sid})
	if code := sdkCode(t, err); code != -32602 || !strings.Contains(err.Error(), "session not found") {
		t.Errorf("A's call naming the fenced session: %d %v, want B's -32602 session not found", code, err)
	}
}
