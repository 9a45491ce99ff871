package sandbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

// projectLeft counts project's containers and workspace volumes on the
// engine, and its workspace rows.
func (f *fixture) projectLeft(st switchboard.Store, project string) (containers, volumes, rows int) {
	f.t.Helper()
	ctx := context.Background()
	cs, err := f.e.List(ctx, map[string]string{engine.LabelProject: project})
	if err != nil {
		f.t.Fatal(err)
	}
	vs, err := f.e.ListVolumes(ctx, map[string]string{engine.LabelProject: project})
	if err != nil {
		f.t.Fatal(err)
	}
	ws, err := st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project})
	if err != nil {
		f.t.Fatal(err)
	}
	return len(cs), len(vs), len(ws)
}

// TestDeleteProject: everything the sandbox keeps for a project (an
// anonymous session, a held workspace, a snapshot, a restored copy, and
// a volume whose row is already gone) is counted, then removed; another
// project's session is untouched, and a project made again with the
// same id starts empty.
func TestDeleteProject(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()

	anon := f.exec("p", "execute_command", map[string]any{"command": "echo secret > secret.txt"})
	held := f.exec("p", "execute_command", map[string]any{"command": "echo mine > mine.txt"})
	if _, rerr := f.ws("agent-A", "attach_workspace", map[string]any{"workspace_id": held.WorkspaceID}); rerr != nil {
		t.Fatal(rerr)
	}
	snap, rerr := f.ws("agent-A", "snapshot_workspace", map[string]any{"workspace_id": held.WorkspaceID})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if _, rerr := f.ws("agent-A", "restore_snapshot", map[string]any{"snapshot_id": snap["workspace_id"]}); rerr != nil {
		t.Fatal(rerr)
	}
	// A volume of the project whose row went (a crash between the two).
	if err := f.e.CreateVolume(ctx, "switchboard-ws-orphan-"+f.e.Instance(), map[string]string{engine.LabelKind: sandbox.KindWorkspace, engine.LabelProject: "p"}); err != nil {
		t.Fatal(err)
	}
	other := f.exec("q", "execute_command", map[string]any{"command": "echo q > q.txt"})

	sessions, workspaces, err := f.svc.ProjectUsage(ctx, "p")
	if err != nil || sessions != 2 || workspaces != 5 {
		t.Fatalf("usage before: %d sessions, %d workspaces, %v; want 2, 5", sessions, workspaces, err)
	}
	if err := f.svc.DeleteProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if c, v, r := f.projectLeft(st, "p"); c+v+r != 0 {
		t.Fatalf("left of p: %d containers, %d volumes, %d rows", c, v, r)
	}
	if sessions, workspaces, err := f.svc.ProjectUsage(ctx, "p"); err != nil || sessions+workspaces != 0 {
		t.Fatalf("usage after: %d sessions, %d workspaces, %v", sessions, workspaces, err)
	}
	// The old sessions are gone, also for a new tenant of the same id.
	_, rerr = f.call("p", "execute_command", map[string]any{"command": "cat secret.txt", "session_id": anon.SessionID})
	wantCode(t, rerr, -32602, "session not found")
	if r := f.exec("p", "execute_command", map[string]any{"command": "ls -A | wc -l"}); r.Stdout != "0\n" {
		t.Fatalf("a new session of p sees files: %q", r.Stdout)
	}
	// q is untouched.
	if r := f.exec("q", "execute_command", map[string]any{"command": "cat q.txt", "session_id": other.SessionID}); r.Stdout != "q\n" {
		t.Fatalf("q's session after p's deletion: %+v", r)
	}
	var list struct {
		Workspaces []sandbox.WorkspaceInfo `json:"workspaces"`
	}
	raw, _ := f.callCtx(ctx, "q", "agent-1", "list_workspaces", map[string]any{}, nil)
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Workspaces) != 1 {
		t.Fatalf("q's workspaces: %s %v", raw, err)
	}
}
