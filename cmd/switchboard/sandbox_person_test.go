package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/oidctest"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

// TestSandboxSessionsBoundToPerson (issue 35): a sandbox session a
// signed-in person starts is that person's. Another person of the same
// project who presents its id gets the answer of an unknown id (-32602
// "session not found") from execute_command, get_sessions, get_volume_path
// and stop_session, and get_sessions does not list it; its owner still
// uses it. A static project token starts unbound sessions, which every
// caller of the project reaches as before sign-in, and it does not reach a
// person's session either.
func TestSandboxSessionsBoundToPerson(t *testing.T) {
	const public = "https://gw.example.test"
	idp := oidctest.Start(t)
	g := sandboxGateway(t, t.TempDir(), map[string]string{
		"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_PUBLIC_URL": public, "MCP_SERVER_AUTH_ISSUER": idp.Issuer})
	now := time.Now()
	person := func(sub string) string {
		return idp.Sign(t, map[string]any{"iss": idp.Issuer, "sub": sub, "aud": []string{public + "/mcp"}, "scope": "mcp",
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()})
	}
	alice, _ := openMCP(t, g.url+"/mcp", person("alice"))
	bob, _ := openMCP(t, g.url+"/mcp", person("bob"))
	static, _ := openMCP(t, g.url+"/mcp", newAPI(t, g.url, adminToken).createToken("default", "shared").Token)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, error) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			t.Fatalf("%s %v: tool error %s", tool, args, text(t, res))
		}
		return structured(t, res), nil
	}
	must := func(cs *mcp.ClientSession, tool string, args map[string]any) map[string]any {
		t.Helper()
		m, err := call(cs, tool, args)
		if err != nil {
			t.Fatalf("%s %v: %v", tool, args, err)
		}
		return m
	}
	unknown := func(who string, cs *mcp.ClientSession, tool string, args map[string]any) {
		t.Helper()
		_, err := call(cs, tool, args)
		if err == nil {
			t.Fatalf("%s: %s %v answered; want the unknown-session error", who, tool, args)
		}
		if code := sdkCode(t, err); code != -32602 || !strings.Contains(err.Error(), "session not found") {
			t.Fatalf("%s: %s %v: %d %v; want -32602 session not found", who, tool, args, code, err)
		}
	}
	listed := func(cs *mcp.ClientSession) []string {
		t.Helper()
		var ids []string
		for _, s := range must(cs, "get_sessions", nil)["sessions"].([]any) {
			ids = append(ids, s.(map[string]any)["session_id"].(string))
		}
		slices.Sort(ids)
		return ids
	}

	mine := must(alice, "execute_command", map[string]any{"command": "echo alice > /workspace/f"})["session_id"].(string)
	shared := must(static, "execute_command", map[string]any{"command": "echo shared > /workspace/f"})["session_id"].(string)
	// An id nobody minted answers the same as alice's does to bob.
	unknown("bob", bob, "execute_command", map[string]any{"command": "true", "session_id": "sbx-0000000000000000"})

	for _, c := range []struct {
		who string
		cs  *mcp.ClientSession
	}{{"bob", bob}, {"a static project token", static}} {
		unknown(c.who, c.cs, "execute_command", map[string]any{"command": "cat /workspace/f", "session_id": mine})
		unknown(c.who, c.cs, "get_sessions", map[string]any{"session_id": mine})
		unknown(c.who, c.cs, "get_volume_path", map[string]any{"session_id": mine})
		unknown(c.who, c.cs, "stop_session", map[string]any{"session_id": mine})
		if got := listed(c.cs); !slices.Equal(got, []string{shared}) {
			t.Errorf("get_sessions for %s lists %v, want only the unbound %s", c.who, got, shared)
		}
	}

	// Alice still has hers (stop_session above did not stop it), and
	// reaches the project's unbound session as before sign-in.
	if out := must(alice, "execute_command", map[string]any{"command": "cat /workspace/f", "session_id": mine})["stdout"]; out != "alice\n" {
		t.Errorf("alice's session after the others tried it: stdout %q", out)
	}
	if out := must(bob, "execute_command", map[string]any{"command": "cat /workspace/f", "session_id": shared})["stdout"]; out != "shared\n" {
		t.Errorf("bob on the unbound session: stdout %q", out)
	}
	want := []string{mine, shared}
	slices.Sort(want)
	if got := listed(alice); !slices.Equal(got, want) {
		t.Errorf("get_sessions for alice lists %v, want %v", got, want)
	}
	if v := must(alice, "get_volume_path", map[string]any{"session_id": mine}); v["session_id"] != mine {
		t.Errorf("get_volume_path for alice: %v", v)
	}

	// Her session's workspace, and a snapshot of it, are hers as well:
	// the workspace tools are no way around the binding.
	ws := must(alice, "get_volume_path", map[string]any{"session_id": mine})["workspace_id"].(string)
	snap := must(alice, "snapshot_workspace", map[string]any{"workspace_id": ws})["workspace_id"].(string)
	workspaces := func(cs *mcp.ClientSession) string {
		t.Helper()
		return fmt.Sprint(must(cs, "list_workspaces", nil)["workspaces"])
	}
	missing := func(who string, cs *mcp.ClientSession, tool string, args map[string]any) {
		t.Helper()
		_, err := call(cs, tool, args)
		if err == nil {
			t.Fatalf("%s: %s %v answered; want the unknown-workspace error", who, tool, args)
		}
		if code := sdkCode(t, err); code != -32602 || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("%s: %s %v: %d %v; want -32602 not found", who, tool, args, code, err)
		}
	}
	for _, c := range []struct {
		who string
		cs  *mcp.ClientSession
	}{{"bob", bob}, {"a static project token", static}} {
		if got := workspaces(c.cs); strings.Contains(got, ws) || strings.Contains(got, snap) {
			t.Errorf("list_workspaces for %s lists alice's workspace or snapshot: %s", c.who, got)
		}
		missing(c.who, c.cs, "attach_workspace", map[string]any{"workspace_id": ws})
		missing(c.who, c.cs, "detach_workspace", map[string]any{"workspace_id": ws})
		missing(c.who, c.cs, "snapshot_workspace", map[string]any{"workspace_id": ws})
		missing(c.who, c.cs, "delete_workspace", map[string]any{"workspace_id": ws})
		missing(c.who, c.cs, "delete_workspace", map[string]any{"snapshot_id": snap})
		missing(c.who, c.cs, "restore_snapshot", map[string]any{"snapshot_id": snap})
	}
	if got := workspaces(alice); !strings.Contains(got, ws) || !strings.Contains(got, snap) {
		t.Errorf("list_workspaces for alice lacks her workspace %s or snapshot %s: %s", ws, snap, got)
	}
	restored := must(alice, "restore_snapshot", map[string]any{"snapshot_id": snap})["workspace_id"].(string)
	missing("bob on alice's restored copy", bob, "attach_workspace", map[string]any{"workspace_id": restored})

	must(alice, "stop_session", map[string]any{"session_id": mine})
	unknown("alice after stopping it", alice, "execute_command", map[string]any{"command": "true", "session_id": mine})
	// Attached again, the workspace runs a session that is still hers.
	again := must(alice, "attach_workspace", map[string]any{"workspace_id": ws})["session_id"].(string)
	unknown("bob on alice's re-attached workspace", bob, "get_volume_path", map[string]any{"session_id": again})
	if out := must(alice, "execute_command", map[string]any{"command": "cat /workspace/f", "session_id": again})["stdout"]; out != "alice\n" {
		t.Errorf("alice's re-attached workspace: stdout %q", out)
	}
}

// TestSandboxPersonAcrossReplicas (issue 35): the binding holds where the
// session's home is another replica (the home checks the person the hop
// carries) and after a replica that ended is taken over (the binding is
// on the workspace row): bob, through B, never reaches alice's session
// made on A, and alice does.
func TestSandboxPersonAcrossReplicas(t *testing.T) {
	const public = "https://gw.example.test"
	idp := oidctest.Start(t)
	env, _ := ownedGatewayEnv(t, testInstance("sbx-person"), map[string]string{
		"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_OWNER_LEASE": "3s", "MCP_SERVER_REPLICA_TICK": "200ms",
		"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_PUBLIC_URL": public, "MCP_SERVER_AUTH_ISSUER": idp.Issuer})
	a, b := startGateway(t, nil, env), startGateway(t, nil, env)
	now := time.Now()
	person := func(sub string) string {
		return idp.Sign(t, map[string]any{"iss": idp.Issuer, "sub": sub, "aud": []string{public + "/mcp"}, "scope": "mcp",
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()})
	}
	aliceA, _ := openMCP(t, a.url+"/mcp", person("alice"))
	aliceB, _ := openMCP(t, b.url+"/mcp", person("alice"))
	bobB, _ := openMCP(t, b.url+"/mcp", person("bob"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	unknown := func(step, tool string, args map[string]any) {
		t.Helper()
		res, err := call(bobB, tool, args)
		if err == nil {
			t.Fatalf("%s: bob's %s %v answered %+v; want the unknown-session error", step, tool, args, res)
		}
		if code := sdkCode(t, err); code != -32602 || !strings.Contains(err.Error(), "session not found") {
			t.Fatalf("%s: bob's %s: %d %v; want -32602 session not found", step, tool, code, err)
		}
	}
	res, err := call(aliceA, "execute_command", map[string]any{"command": "echo alice > a.txt"})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on A: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)

	for _, step := range []string{"through a hop to A", "after B took it over from A"} {
		unknown(step, "execute_command", map[string]any{"command": "cat a.txt", "session_id": sid})
		unknown(step, "get_volume_path", map[string]any{"session_id": sid})
		unknown(step, "stop_session", map[string]any{"session_id": sid})
		res, err = call(bobB, "get_sessions", nil)
		if err != nil || res.IsError || strings.Contains(fmt.Sprint(structured(t, res)["sessions"]), sid) {
			t.Fatalf("%s: get_sessions for bob lists alice's session %s, or failed: %v %+v", step, sid, err, res)
		}
		res, err = call(aliceB, "execute_command", map[string]any{"command": "cat a.txt", "session_id": sid})
		if err != nil || res.IsError || structured(t, res)["stdout"] != "alice\n" {
			t.Fatalf("%s: alice through B: %v %+v", step, err, res)
		}
		if step == "through a hop to A" {
			a.stop(t)
			// Bob asks first: his call must not make B resume alice's
			// session (restarting her container for a caller it refuses);
			// alice's own call does, and the session is still hers.
			unknown("bob first after A stopped", "execute_command", map[string]any{"command": "true", "session_id": sid})
			if strings.Contains(b.logs.String(), "session taken over from a replica that ended") {
				t.Fatalf("bob's call made B resume alice's session")
			}
			res, err = call(aliceB, "execute_command", map[string]any{"command": "cat a.txt", "session_id": sid})
			if err != nil || res.IsError || structured(t, res)["stdout"] != "alice\n" {
				t.Fatalf("alice through B after A stopped: %v %+v", err, res)
			}
		}
	}
	if !strings.Contains(b.logs.String(), "session taken over from a replica that ended") {
		t.Errorf("B did not take the session over")
	}
}
