package sandbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

func withStore(t *testing.T) (func(*sandbox.Options), switchboard.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, p := range []string{"p", "q"} {
		if _, err := st.CreateProject(context.Background(), switchboard.Project{ID: p}); err != nil {
			t.Fatal(err)
		}
	}
	return func(o *sandbox.Options) { o.Store = st }, st
}

func (f *fixture) ws(agent, tool string, args map[string]any) (map[string]any, *switchboard.RPCError) {
	f.t.Helper()
	raw, rerr := f.callCtx(context.Background(), "p", agent, tool, args, nil)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m, rerr
}

func (f *fixture) run(agent, sid, cmd string) result {
	f.t.Helper()
	raw, rerr := f.callCtx(context.Background(), "p", agent, "execute_command", map[string]any{"command": cmd, "session_id": sid}, nil)
	if rerr != nil {
		f.t.Fatalf("%s: %d %s", cmd, rerr.Code, rerr.Message)
	}
	var r result
	_ = json.Unmarshal(raw, &r)
	return r
}

// TestWorkspaceHandover: agent A works, detaches; agent B attaches and
// sees A's exact files; exclusivity; snapshot and restore.
func TestWorkspaceHandover(t *testing.T) {
	mod, st := withStore(t)
	logs := &testenv.Buffer{}
	f := newFixture(t, func(o *sandbox.Options) {
		mod(o)
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})

	// A starts a session implicitly and leaves files behind.
	raw, rerr := f.callCtx(context.Background(), "p", "agent-A", "execute_command", map[string]any{"command": "echo keep > keep.txt; echo old > change.txt; echo gone > delete.txt"}, nil)
	if rerr != nil {
		t.Fatal(rerr)
	}
	var first result
	_ = json.Unmarshal(raw, &first)
	wsID := first.WorkspaceID
	row, err := st.GetWorkspace(context.Background(), wsID)
	if err != nil || row.ContainerType != switchboard.ContainerWorkspace || row.Status != sandbox.WorkspaceRunning || row.AgentSessionID != "agent-A" || row.LastUsedAt.IsZero() {
		t.Fatalf("workspace row: %+v %v", row, err)
	}

	// A attaches explicitly: same session; B cannot attach or use it.
	att, rerr := f.ws("agent-A", "attach_workspace", map[string]any{"workspace_id": wsID})
	if rerr != nil || att["session_id"] != first.SessionID {
		t.Fatalf("attach A: %v %v", att, rerr)
	}
	_, rerr = f.ws("agent-B", "attach_workspace", map[string]any{"workspace_id": wsID})
	wantCode(t, rerr, -32600, "agent-A")
	_, rerr = f.callCtx(context.Background(), "p", "agent-B", "execute_command", map[string]any{"command": "true", "session_id": first.SessionID}, nil)
	wantCode(t, rerr, -32600, "agent-A")
	_, rerr = f.ws("agent-B", "detach_workspace", map[string]any{"workspace_id": wsID})
	wantCode(t, rerr, -32600, "agent-A")
	// Another project does not see it.
	_, rerr = f.callCtx(context.Background(), "q", "agent-B", "attach_workspace", map[string]any{"workspace_id": wsID}, nil)
	wantCode(t, rerr, -32602, "workspace not found")

	// Every call moves last_used_at.
	before, _ := st.GetWorkspace(context.Background(), wsID)
	// A changes and deletes, then detaches: the session is gone.
	f.run("agent-A", first.SessionID, "echo new > change.txt; rm delete.txt; echo added > added.txt; (sleep 1000 &)")
	if after, _ := st.GetWorkspace(context.Background(), wsID); !after.LastUsedAt.After(before.LastUsedAt) {
		t.Fatalf("last_used_at did not move: %v then %v", before.LastUsedAt, after.LastUsedAt)
	}
	if _, rerr := f.ws("agent-A", "detach_workspace", map[string]any{"workspace_id": wsID}); rerr != nil {
		t.Fatal(rerr)
	}
	_, rerr = f.callCtx(context.Background(), "p", "agent-A", "execute_command", map[string]any{"command": "true", "session_id": first.SessionID}, nil)
	wantCode(t, rerr, -32602, "session not found")
	row, _ = st.GetWorkspace(context.Background(), wsID)
	if row.Status != sandbox.WorkspaceReady || row.AgentSessionID != "" {
		t.Fatalf("after detach: %+v", row)
	}

	// B attaches: a new session on A's exact files; A's process is gone.
	att, rerr = f.ws("agent-B", "attach_workspace", map[string]any{"workspace_id": wsID})
	if rerr != nil {
		t.Fatal(rerr)
	}
	bSession, _ := att["session_id"].(string)
	if bSession == "" || bSession == first.SessionID || att["agent_session_id"] != "agent-B" {
		t.Fatalf("attach B: %v", att)
	}
	got := f.run("agent-B", bSession, "for f in $(ls | sort); do printf '%s=' $f; cat $f; done").Stdout
	if got != "added.txt=added\nchange.txt=new\nkeep.txt=keep\n" {
		t.Fatalf("B sees:\n%s", got)
	}
	// A's background process did not survive the detach.
	raw, rerr = f.callCtx(context.Background(), "p", "agent-B", "execute_command", map[string]any{"command": "sh", "args": []string{"-c", countProcs, "sh", "[s]leep 1000"}, "session_id": bSession}, nil)
	if n := string(raw); rerr != nil || !strings.Contains(n, `"stdout":"0\n"`) {
		t.Fatalf("A's processes in B's session: %s %v", n, rerr)
	}
	// The attach names whom B follows.
	if !strings.Contains(logs.String(), "agent_session=agent-B previous_agent_session=agent-A") {
		t.Fatalf("B's attach does not log A as the previous agent session:\n%s", logs.String())
	}
	row, _ = st.GetWorkspace(context.Background(), wsID)
	if row.AgentSessionID != "agent-B" || row.Status != sandbox.WorkspaceRunning {
		t.Fatalf("row after B attached: %+v", row)
	}

	// Snapshot while B's session runs, change the workspace, restore.
	snap, rerr := f.ws("agent-B", "snapshot_workspace", map[string]any{"workspace_id": wsID})
	if rerr != nil || snap["status"] != sandbox.WorkspaceSnapshot || snap["snapshot_of"] != wsID {
		t.Fatalf("snapshot: %v %v", snap, rerr)
	}
	f.run("agent-B", bSession, "rm keep.txt; echo later > later.txt")
	restored, rerr := f.ws("agent-B", "restore_snapshot", map[string]any{"snapshot_id": snap["workspace_id"]})
	if rerr != nil || restored["status"] != sandbox.WorkspaceReady || restored["workspace_id"] == wsID || restored["workspace_id"] == snap["workspace_id"] {
		t.Fatalf("restore: %v %v", restored, rerr)
	}
	_, rerr = f.ws("agent-B", "restore_snapshot", map[string]any{"snapshot_id": wsID})
	wantCode(t, rerr, -32602, "snapshot not found")
	att, rerr = f.ws("agent-C", "attach_workspace", map[string]any{"workspace_id": restored["workspace_id"]})
	if rerr != nil {
		t.Fatal(rerr)
	}
	got = f.run("agent-C", att["session_id"].(string), "ls | sort | tr '\\n' ' '").Stdout
	if got != "added.txt change.txt keep.txt " {
		t.Fatalf("restored workspace holds %q", got)
	}
	// Working in it keeps the record of its snapshot.
	list0, _ := f.ws("agent-C", "list_workspaces", map[string]any{})
	for _, w := range list0["workspaces"].([]any) {
		if m := w.(map[string]any); m["workspace_id"] == restored["workspace_id"] && m["snapshot_of"] != snap["workspace_id"] {
			t.Fatalf("the restored workspace lost snapshot_of once used: %v", m)
		}
	}

	// list_workspaces shows all three; an ended MCP session detaches.
	list, rerr := f.ws("agent-C", "list_workspaces", map[string]any{})
	if rerr != nil || len(list["workspaces"].([]any)) != 3 {
		t.Fatalf("list: %v %v", list, rerr)
	}
	<-f.svc.SessionEnded("p", "agent-C")
	if _, rerr := f.ws("agent-D", "attach_workspace", map[string]any{"workspace_id": restored["workspace_id"]}); rerr != nil {
		t.Fatalf("attach after the holder's session ended: %v", rerr)
	}
}
