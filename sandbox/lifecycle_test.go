package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
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
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": held.WorkspaceID})
	snap := f.must("agent-A", "snapshot_workspace", map[string]any{"workspace_id": held.WorkspaceID})
	f.must("agent-A", "restore_snapshot", map[string]any{"snapshot_id": snap["workspace_id"]})
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
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "cat secret.txt", "session_id": anon.SessionID})
	wantCode(t, rerr, -32602, "session not found")
	if r := f.exec("p", "execute_command", map[string]any{"command": "ls -A | wc -l"}); r.Stdout != "0\n" {
		t.Fatalf("a new session of p sees files: %q", r.Stdout)
	}
	// q is untouched.
	if r := f.exec("q", "execute_command", map[string]any{"command": "cat q.txt", "session_id": other.SessionID}); r.Stdout != "q\n" {
		t.Fatalf("q's session after p's deletion: %+v", r)
	}
	var list struct {
		Workspaces []switchboard.WorkspaceInfo `json:"workspaces"`
	}
	raw, _ := f.callCtx(ctx, "q", "agent-1", "list_workspaces", map[string]any{}, nil)
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Workspaces) != 1 {
		t.Fatalf("q's workspaces: %s %v", raw, err)
	}
}

// TestProjectGone: p is deleted elsewhere (another replica took the
// DELETE: the rows are gone while this process's session runs) and
// created again under the same id. The old session outlived its project,
// the new project's does not; ProjectGone ends the old one with its
// volume and keeps the new one, and the old id is then unknown to p.
func TestProjectGone(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()
	old := f.exec("p", "execute_command", map[string]any{"command": "echo secret > secret.txt"})
	if err := st.DeleteProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	fresh := f.exec("p", "execute_command", map[string]any{"command": "echo new > new.txt"})
	if !f.svc.Outlived(ctx, "p", old.SessionID) || f.svc.Outlived(ctx, "p", fresh.SessionID) {
		t.Fatalf("outlived: old %v, fresh %v; want true, false", f.svc.Outlived(ctx, "p", old.SessionID), f.svc.Outlived(ctx, "p", fresh.SessionID))
	}
	if err := f.svc.ProjectGone(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "cat secret.txt", "session_id": old.SessionID})
	wantCode(t, rerr, -32602, "session not found")
	if r := f.exec("p", "execute_command", map[string]any{"command": "cat new.txt", "session_id": fresh.SessionID}); r.Stdout != "new\n" {
		t.Fatalf("the new project's session after ProjectGone: %+v", r)
	}
	if c, v, r := f.projectLeft(st, "p"); c != 1 || v != 1 || r != 1 {
		t.Fatalf("left of p: %d containers, %d volumes, %d rows; want the new session's one each", c, v, r)
	}
}

// must runs a workspace tool as agent in project p, failing t when it
// fails.
func (f *fixture) must(agent, tool string, args map[string]any) map[string]any {
	f.t.Helper()
	m, rerr := f.ws(agent, tool, args)
	if rerr != nil {
		f.t.Fatalf("%s by %s: %d %s", tool, agent, rerr.Code, rerr.Message)
	}
	return m
}

// waitFor polls cond until it holds, failing t with cond's last word
// after a deadline.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s: %s", what, why)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// volumeExists reports whether volume name is on the engine.
func (f *fixture) volumeExists(name string) bool {
	f.t.Helper()
	_, err := f.e.InspectVolume(context.Background(), name)
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		f.t.Fatal(err)
	}
	return err == nil
}

// rowExists reports whether workspace id has a row.
func rowExists(t *testing.T, st switchboard.Store, id string) bool {
	t.Helper()
	_, err := st.GetWorkspace(context.Background(), id)
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func volumeName(id string) string { return "switchboard-ws-" + id }

// TestDeleteWorkspace: delete_workspace removes a workspace (stopping its
// session) or a snapshot, volume and row; it is refused while another
// agent session holds the workspace, naming it, and the admin may.
func TestDeleteWorkspace(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()

	// An unheld workspace with a live session: both go.
	r := f.exec("p", "execute_command", map[string]any{"command": "echo x > x.txt"})
	got, rerr := f.ws("agent-B", "delete_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	if rerr != nil || got["deleted"] != true || got["stopped_session_id"] != r.SessionID || got["snapshot"] != false {
		t.Fatalf("delete: %v %v", got, rerr)
	}
	if f.volumeExists(volumeName(r.WorkspaceID)) || rowExists(t, st, r.WorkspaceID) {
		t.Fatal("the workspace's volume or row is left")
	}
	_, rerr = f.call("p", "execute_command", map[string]any{"command": "true", "session_id": r.SessionID})
	wantCode(t, rerr, -32602, "session not found")
	_, rerr = f.ws("agent-B", "delete_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	wantCode(t, rerr, -32602, "not found")

	// A held one: refused for others (with and without an MCP session),
	// allowed to the holder.
	h := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": h.WorkspaceID})
	snap := f.must("agent-A", "snapshot_workspace", map[string]any{"workspace_id": h.WorkspaceID})
	for _, agent := range []string{"agent-B", ""} {
		_, rerr = f.callCtx(ctx, "p", agent, "delete_workspace", map[string]any{"workspace_id": h.WorkspaceID}, nil)
		wantCode(t, rerr, -32600, "agent-A")
	}
	if !f.volumeExists(volumeName(h.WorkspaceID)) {
		t.Fatal("a refused delete removed the volume")
	}
	// A snapshot is nobody's: deleted by snapshot_id.
	got, rerr = f.ws("agent-B", "delete_workspace", map[string]any{"snapshot_id": snap["workspace_id"]})
	if rerr != nil || got["snapshot"] != true || got["stopped_session_id"] != nil {
		t.Fatalf("delete snapshot: %v %v", got, rerr)
	}
	if f.volumeExists(volumeName(snap["workspace_id"].(string))) {
		t.Fatal("the snapshot's volume is left")
	}
	if _, rerr := f.ws("agent-A", "delete_workspace", map[string]any{"workspace_id": h.WorkspaceID}); rerr != nil {
		t.Fatalf("the holder's delete: %v", rerr)
	}

	// The admin deletes what an agent session holds.
	a := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": a.WorkspaceID})
	if d, err := f.svc.Delete(ctx, "p", "", a.WorkspaceID); err != nil || d.SessionID != a.SessionID {
		t.Fatalf("admin delete: %+v %v", d, err)
	}
	if c, _ := f.e.List(ctx, map[string]string{engine.LabelKind: sandbox.KindSession}); len(c) != 0 {
		t.Fatalf("session containers left: %d", len(c))
	}

	// Arguments, and another project's workspace.
	q := f.exec("q", "execute_command", map[string]any{"command": "true"})
	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"neither", map[string]any{}, "workspace_id or snapshot_id"},
		{"both", map[string]any{"workspace_id": "a", "snapshot_id": "b"}, "workspace_id or snapshot_id"},
		{"unknown argument", map[string]any{"id": "a"}, "unknown argument"},
		{"another project's", map[string]any{"workspace_id": q.WorkspaceID}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rerr := f.ws("agent-A", "delete_workspace", tc.args)
			wantCode(t, rerr, -32602, tc.want)
		})
	}
	if !rowExists(t, st, q.WorkspaceID) {
		t.Fatal("q's workspace went")
	}
}

// TestExclusiveAttach: while agent-A holds a workspace, every operation
// on it or its session by another agent session, or by a call without
// one, fails -32600 naming agent-A and changes nothing; agent-A (and the
// admin) may.
func TestExclusiveAttach(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()
	r := f.exec("p", "execute_command", map[string]any{"command": "echo keep > keep.txt"})
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	ops := []struct {
		tool string
		args map[string]any
	}{
		{"stop_session", map[string]any{"session_id": r.SessionID}},
		{"snapshot_workspace", map[string]any{"workspace_id": r.WorkspaceID}},
		{"execute_code", map[string]any{"code": "print(1)", "session_id": r.SessionID}},
		{"execute_command", map[string]any{"command": "rm keep.txt", "session_id": r.SessionID}},
		{"delete_workspace", map[string]any{"workspace_id": r.WorkspaceID}},
		{"detach_workspace", map[string]any{"workspace_id": r.WorkspaceID}},
		{"attach_workspace", map[string]any{"workspace_id": r.WorkspaceID}},
	}
	for _, agent := range []string{"agent-B", ""} {
		for _, op := range ops {
			t.Run(op.tool+" by "+orNone(agent), func(t *testing.T) {
				_, rerr := f.callCtx(ctx, "p", agent, op.tool, op.args, nil)
				wantCode(t, rerr, -32600, "agent-A")
			})
		}
	}
	// Nothing changed: the session runs, the file is there, no snapshot.
	if got := f.run("agent-A", r.SessionID, "cat keep.txt").Stdout; got != "keep\n" {
		t.Fatalf("the holder's session after the refusals: %q", got)
	}
	if rows, _ := st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: "p"}); len(rows) != 1 {
		t.Fatalf("%d workspace rows, want 1", len(rows))
	}
	// The holder may snapshot and stop.
	f.must("agent-A", "snapshot_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	f.must("agent-A", "stop_session", map[string]any{"session_id": r.SessionID})
	// The admin stops a held session.
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	if _, _, err := f.svc.StopSession(ctx, "p", "", f.svc.Sessions("p")[0].SessionID); err != nil {
		t.Fatalf("admin stop: %v", err)
	}
}

func orNone(agent string) string {
	if agent == "" {
		return "a call without an MCP session"
	}
	return agent
}

// wsInfo returns workspace id as list_workspaces shows it (nil: absent).
func (f *fixture) wsInfo(id string) *switchboard.WorkspaceInfo {
	f.t.Helper()
	raw, rerr := f.callCtx(context.Background(), "p", "agent-1", "list_workspaces", map[string]any{}, nil)
	if rerr != nil {
		f.t.Fatal(rerr)
	}
	var list struct {
		Workspaces []switchboard.WorkspaceInfo `json:"workspaces"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		f.t.Fatal(err)
	}
	for _, w := range list.Workspaces {
		if w.WorkspaceID == id {
			return &w
		}
	}
	return nil
}

// TestRetention: a workspace made by an execution without session_id is
// deleted (volume and row) its retention after its session ended, by
// stop_session or idle expiry; one attached, detached or snapshotted is
// kept, and so are snapshots.
func TestRetention(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) {
		mod(o)
		o.WorkspaceRetention = time.Second
		o.SessionTimeout = 3 * time.Second
		o.SweepInterval = 50 * time.Millisecond
	})
	gone := func(id string) bool { return !rowExists(t, st, id) && !f.volumeExists(volumeName(id)) }
	kept := func(id string) bool { return rowExists(t, st, id) && f.volumeExists(volumeName(id)) }

	// Stopped: kept for the retention, then deleted.
	a := f.exec("p", "execute_command", map[string]any{"command": "echo a > a.txt"})
	if w := f.wsInfo(a.WorkspaceID); w == nil || !w.Anonymous || w.ExpiresAt != nil {
		t.Fatalf("a running anonymous workspace: %+v", w)
	}
	raw, rerr := f.call("p", "stop_session", map[string]any{"session_id": a.SessionID})
	if rerr != nil || !strings.Contains(string(raw), `"workspace_retained":true`) {
		t.Fatalf("stop_session: %s %v", raw, rerr)
	}
	stopped := time.Now()
	if w := f.wsInfo(a.WorkspaceID); w == nil || w.ExpiresAt == nil || w.ExpiresAt.Before(stopped.Add(500*time.Millisecond)) {
		t.Fatalf("a stopped anonymous workspace: %+v", w)
	}
	// Attached (then detached) and snapshotted ones are kept, the
	// snapshot too.
	b := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": b.WorkspaceID})
	f.must("agent-A", "detach_workspace", map[string]any{"workspace_id": b.WorkspaceID})
	c := f.exec("p", "execute_command", map[string]any{"command": "true"})
	snap := f.must("agent-B", "snapshot_workspace", map[string]any{"workspace_id": c.WorkspaceID})
	if _, rerr := f.call("p", "stop_session", map[string]any{"session_id": c.SessionID}); rerr != nil {
		t.Fatal(rerr)
	}
	// Idle expiry ends a session too.
	d := f.exec("p", "execute_command", map[string]any{"command": "true"})

	waitFor(t, "the stopped anonymous workspace is deleted", func() (bool, string) { return gone(a.WorkspaceID), "" })
	if time.Since(stopped) < time.Second {
		t.Fatalf("deleted %v after its session stopped, before its retention", time.Since(stopped))
	}
	waitFor(t, "the expired session's anonymous workspace is deleted", func() (bool, string) { return gone(d.WorkspaceID), "" })
	for _, id := range []string{b.WorkspaceID, c.WorkspaceID, snap["workspace_id"].(string)} {
		if !kept(id) {
			t.Errorf("workspace %s was not kept", id)
		}
	}
}

// TestRetentionZero: with a negative retention (the setting's 0) an
// anonymous workspace goes when its session stops, expires or the
// service closes; an attached one stays.
func TestRetentionZero(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) {
		mod(o)
		o.WorkspaceRetention = -1
		o.SessionTimeout = 2 * time.Second
		o.SweepInterval = 50 * time.Millisecond
	})
	a := f.exec("p", "execute_command", map[string]any{"command": "true"})
	raw, rerr := f.call("p", "stop_session", map[string]any{"session_id": a.SessionID})
	if rerr != nil || !strings.Contains(string(raw), `"workspace_retained":false`) {
		t.Fatalf("stop_session: %s %v", raw, rerr)
	}
	if rowExists(t, st, a.WorkspaceID) || f.volumeExists(volumeName(a.WorkspaceID)) {
		t.Fatal("the anonymous workspace is left after its session stopped")
	}
	b := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": b.WorkspaceID})
	stop, rerr := f.ws("agent-A", "stop_session", map[string]any{"session_id": b.SessionID})
	if rerr != nil || stop["workspace_retained"] != true {
		t.Fatalf("stop of an attached workspace's session: %v %v", stop, rerr)
	}
	d := f.exec("p", "execute_command", map[string]any{"command": "true"})
	waitFor(t, "the expired session's workspace is deleted", func() (bool, string) { return !f.volumeExists(volumeName(d.WorkspaceID)), "" })
	e := f.exec("p", "execute_command", map[string]any{"command": "true"})
	if err := f.svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rowExists(t, st, e.WorkspaceID) || f.volumeExists(volumeName(e.WorkspaceID)) {
		t.Fatal("the anonymous workspace is left after the service closed")
	}
	if !rowExists(t, st, b.WorkspaceID) || !f.volumeExists(volumeName(b.WorkspaceID)) {
		t.Fatal("the attached workspace went")
	}
}

// peer is another gateway process on f's engine instance and store: its
// own owner id, its own sandbox service.
func (f *fixture) peer(name string, st switchboard.Store, mod func(*sandbox.Options)) *fixture {
	f.t.Helper()
	e, err := engine.New(engine.Options{Instance: f.e.Instance(), Host: f.e.Host(), Owner: name + "-" + f.e.Owner()})
	if err != nil {
		f.t.Fatal(err)
	}
	opts := sandbox.Options{Engine: e, Store: st, ImagePython: f.img, ImageNode: f.img, SweepInterval: time.Hour}
	if mod != nil {
		mod(&opts)
	}
	svc := sandbox.New(opts)
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			f.t.Errorf("close %s: %v", name, err)
		}
		_ = e.Close()
	})
	return &fixture{t: f.t, e: e, svc: svc, img: f.img}
}

// TestCrashTruth: a gateway process dies (its containers are swept, as
// the next start's sweep does); the next start's Start makes its
// workspace rows ready (container and holder cleared) and applies the
// retention rule to them, while a live replica's row stays running and
// its session keeps working.
func TestCrashTruth(t *testing.T) {
	_, st := withStore(t)
	base := newFixture(t, nil) // the engine instance the gateways share
	ctx := context.Background()
	dead := base.peer("dead", st, nil)
	live := base.peer("live", st, nil)
	anon := dead.exec("p", "execute_command", map[string]any{"command": "echo a > a.txt"})
	held := dead.exec("p", "execute_command", map[string]any{"command": "echo h > h.txt"})
	dead.must("agent-X", "attach_workspace", map[string]any{"workspace_id": held.WorkspaceID})
	other := live.exec("p", "execute_command", map[string]any{"command": "echo l > l.txt"})

	// The dead process's containers go, as its successor's sweep removes
	// them; the rows still say running.
	removed, err := base.e.Sweep(ctx, func(_ context.Context, owner string) (bool, error) { return owner != dead.e.Owner(), nil })
	if err != nil || len(removed) != 2 {
		t.Fatalf("sweep: %d removed, %v", len(removed), err)
	}
	if w, _ := st.GetWorkspace(ctx, held.WorkspaceID); w.Status != sandbox.WorkspaceRunning {
		t.Fatalf("before the restart: %+v", w)
	}

	next := base.peer("next", st, func(o *sandbox.Options) { o.WorkspaceRetention = -1 })
	if err := next.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := st.GetWorkspace(ctx, held.WorkspaceID)
	if err != nil || w.Status != sandbox.WorkspaceReady || w.ContainerID != "" || w.AgentSessionID != "" {
		t.Fatalf("the dead process's held workspace after the start: %+v %v", w, err)
	}
	if rowExists(t, st, anon.WorkspaceID) || next.volumeExists(volumeName(anon.WorkspaceID)) {
		t.Fatal("the dead process's anonymous workspace outlived its retention (0)")
	}
	if w, _ := st.GetWorkspace(ctx, other.WorkspaceID); w.Status != sandbox.WorkspaceRunning || w.ContainerID == "" {
		t.Fatalf("the live replica's workspace after the start: %+v", w)
	}
	if r := live.exec("p", "execute_command", map[string]any{"command": "cat l.txt", "session_id": other.SessionID}); r.Stdout != "l\n" {
		t.Fatalf("the live replica's session: %+v", r)
	}
	// The held workspace is attachable from the new process, files intact.
	att := next.must("agent-Y", "attach_workspace", map[string]any{"workspace_id": held.WorkspaceID})
	if got := next.run("agent-Y", att["session_id"].(string), "cat h.txt").Stdout; got != "h\n" {
		t.Fatalf("files of the held workspace: %q", got)
	}
}

// TestVanishedContainer: a session whose container was removed outside
// the gateway is healed on its next call (a new container on the same
// workspace, same session id, files intact), with the supervisor and
// with docker exec; when its workspace volume went too, the call says
// so and the session and its row are forgotten.
func TestVanishedContainer(t *testing.T) {
	for _, mode := range []struct {
		name  string
		noSup bool
	}{{"supervisor", false}, {"docker exec", true}} {
		t.Run(mode.name, func(t *testing.T) {
			mod, st := withStore(t)
			f := newFixture(t, func(o *sandbox.Options) { mod(o); o.NoSupervisor = mode.noSup })
			ctx := context.Background()
			r := f.exec("p", "execute_command", map[string]any{"command": "echo keep > keep.txt"})
			old := f.container(r.SessionID)
			if err := f.e.Remove(ctx, old); err != nil {
				t.Fatal(err)
			}
			got := f.exec("p", "execute_command", map[string]any{"command": "cat keep.txt", "session_id": r.SessionID})
			if got.Stdout != "keep\n" || got.SessionID != r.SessionID || got.SessionCreated {
				t.Fatalf("the call after the container vanished: %+v", got)
			}
			w, _ := st.GetWorkspace(ctx, r.WorkspaceID)
			if now := f.container(r.SessionID); now == old || w.ContainerID != now || w.Status != sandbox.WorkspaceRunning {
				t.Fatalf("container %s (was %s), row %+v", now, old, w)
			}

			// Container and volume gone: the session is gone, said once.
			if err := f.e.Remove(ctx, f.container(r.SessionID)); err != nil {
				t.Fatal(err)
			}
			if err := f.e.RemoveVolume(ctx, volumeName(r.WorkspaceID)); err != nil {
				t.Fatal(err)
			}
			_, rerr := f.call("p", "execute_command", map[string]any{"command": "true", "session_id": r.SessionID})
			wantCode(t, rerr, -32602, "removed outside the gateway")
			if len(f.svc.Sessions("p")) != 0 || rowExists(t, st, r.WorkspaceID) {
				t.Fatal("the session or its row is left")
			}
			_, rerr = f.call("p", "execute_command", map[string]any{"command": "true", "session_id": r.SessionID})
			wantCode(t, rerr, -32602, "session not found")
			if vols, _ := f.e.ListVolumes(ctx, nil); len(vols) != 0 {
				t.Fatalf("volumes left: %v", vols)
			}
		})
	}
}

// container returns the id of session sid's container.
func (f *fixture) container(sid string) string {
	f.t.Helper()
	list, err := f.e.List(context.Background(), map[string]string{engine.LabelRef: sid})
	if err != nil || len(list) != 1 {
		f.t.Fatalf("containers of %s: %v %v", sid, list, err)
	}
	return list[0].ID
}

// TestLastUsedAndHistory: every operation on a workspace moves its
// last_used_at (a snapshot's too, when it is restored), and
// list_workspaces shows who attached it after whom.
func TestLastUsedAndHistory(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()
	r := f.exec("p", "execute_command", map[string]any{"command": "true"})
	lastUsed := func(id string) time.Time {
		w, err := st.GetWorkspace(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return w.LastUsedAt
	}
	var snapID string
	for _, step := range []struct {
		name, agent, tool string
		args              func() map[string]any
		workspace         func() string
	}{
		{"get_sessions", "agent-1", "get_sessions", func() map[string]any { return map[string]any{"session_id": r.SessionID} }, nil},
		{"get_volume_path", "agent-1", "get_volume_path", func() map[string]any { return map[string]any{"session_id": r.SessionID} }, nil},
		{"attach by A", "agent-A", "attach_workspace", func() map[string]any { return map[string]any{"workspace_id": r.WorkspaceID} }, nil},
		{"snapshot", "agent-A", "snapshot_workspace", func() map[string]any { return map[string]any{"workspace_id": r.WorkspaceID} }, nil},
		{"detach", "agent-A", "detach_workspace", func() map[string]any { return map[string]any{"workspace_id": r.WorkspaceID} }, nil},
		{"restore", "agent-B", "restore_snapshot", func() map[string]any { return map[string]any{"snapshot_id": snapID} }, func() string { return snapID }},
		{"attach by B", "agent-B", "attach_workspace", func() map[string]any { return map[string]any{"workspace_id": r.WorkspaceID} }, nil},
	} {
		id := r.WorkspaceID
		if step.workspace != nil {
			id = step.workspace()
		}
		before := lastUsed(id)
		out, rerr := f.ws(step.agent, step.tool, step.args())
		if rerr != nil {
			t.Fatalf("%s: %v", step.name, rerr)
		}
		if step.tool == "snapshot_workspace" {
			snapID = out["workspace_id"].(string)
		}
		if after := lastUsed(id); !after.After(before) {
			t.Errorf("%s did not move last_used_at: %v then %v", step.name, before, after)
		}
	}
	w := f.wsInfo(r.WorkspaceID)
	if w == nil || len(w.AttachHistory) != 2 {
		t.Fatalf("attach history: %+v", w)
	}
	if h := w.AttachHistory[0]; h.Previous != "agent-1" || h.Holder != "agent-A" || h.At.IsZero() {
		t.Errorf("first attach: %+v", h)
	}
	if h := w.AttachHistory[1]; h.Previous != "agent-A" || h.Holder != "agent-B" || !h.At.After(w.AttachHistory[0].At) {
		t.Errorf("second attach: %+v", h)
	}
	if got, err := f.svc.GetWorkspace(ctx, "p", r.WorkspaceID); err != nil || len(got.AttachHistory) != 2 {
		t.Fatalf("GetWorkspace: %+v %v", got, err)
	}
}

// withDisks makes the service's engine one with sized volumes (a fresh
// disk directory, the same instance); a host where they cannot work
// skips the test, or fails it when SWITCHBOARD_TEST_REQUIRE names
// "loopdisk".
func withDisks(t *testing.T, o *sandbox.Options) {
	t.Helper()
	o.Engine, _ = enginetest.Disks(t, o.Engine.(*engine.Engine))
}

// TestWorkspaceSize: a program that writes past the workspace's size gets
// "No space left on device", the session goes on and the space freed is
// usable; a snapshot restored into a new workspace is limited too.
func TestWorkspaceSize(t *testing.T) {
	mod, _ := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) {
		mod(o)
		withDisks(t, o)
		o.WorkspaceBytes = 32 << 20
	})
	fill := "head -c 64m /dev/zero > big; echo exit=$?; ls -l big | awk '{print $5}'"
	r := f.exec("p", "execute_command", map[string]any{"command": "echo small > small.txt; " + fill})
	if !strings.Contains(r.Stdout, "exit=1") || !strings.Contains(r.Stderr, "No space left on device") {
		t.Fatalf("writing past the size: %+v", r)
	}
	r = f.exec("p", "execute_command", map[string]any{"command": "rm big && head -c 8m /dev/zero > mid && cat small.txt", "session_id": r.SessionID})
	if exitCode(r) != 0 || r.Stdout != "small\n" {
		t.Fatalf("the session after the disk was full: %+v", r)
	}
	snap := f.must("agent-A", "snapshot_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	restored := f.must("agent-A", "restore_snapshot", map[string]any{"snapshot_id": snap["workspace_id"]})
	att := f.must("agent-A", "attach_workspace", map[string]any{"workspace_id": restored["workspace_id"]})
	r = f.run("agent-A", att["session_id"].(string), "cat small.txt; "+fill)
	if !strings.HasPrefix(r.Stdout, "small\nexit=1") || !strings.Contains(r.Stderr, "No space left on device") {
		t.Fatalf("writing past the size of a restored workspace: %+v", r)
	}
}

// TestSnapshotNamesUnreadableFile: a snapshot of a workspace holding a
// file its user cannot read fails naming that file, as the workspace
// names it, and leaves no copy behind.
func TestSnapshotNamesUnreadableFile(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	r := f.exec("p", "execute_command", map[string]any{"command": "echo s > secret.txt && chmod 000 secret.txt"})
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %+v", r)
	}
	_, rerr := f.ws("agent-A", "snapshot_workspace", map[string]any{"workspace_id": r.WorkspaceID})
	if rerr == nil || rerr.Code != -32603 || !strings.Contains(rerr.Message, "'secret.txt'") || strings.Contains(rerr.Message, "/src/") {
		t.Fatalf("snapshot of an unreadable file: %+v; want -32603 naming 'secret.txt'", rerr)
	}
	rows, err := st.ListWorkspaces(context.Background(), switchboard.WorkspaceFilter{ProjectID: "p"})
	if err != nil || len(rows) != 1 {
		t.Fatalf("rows after the failed snapshot: %d %v; want the workspace alone", len(rows), err)
	}
}

// TestSnapshotNodeWithoutPythonImage: a node workspace is copied with
// the node image, so it snapshots with the python image missing.
func TestSnapshotNodeWithoutPythonImage(t *testing.T) {
	mod, _ := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) { mod(o); o.ImagePython = "switchboard-sandbox:absent-python" })
	r := f.exec("p", "execute_command", map[string]any{"command": "echo n > n.txt", "template": "node"})
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("setup: %+v", r)
	}
	f.must("agent-A", "snapshot_workspace", map[string]any{"workspace_id": r.WorkspaceID})
}

// TestStopSessionTouchesWorkspace: stop_session is an operation on the
// session's workspace, so its last_used_at moves past the last call's.
func TestStopSessionTouchesWorkspace(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, mod)
	ctx := context.Background()
	r := f.exec("p", "execute_command", map[string]any{"command": "true"})
	before, err := st.GetWorkspace(ctx, r.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	f.must("", "stop_session", map[string]any{"session_id": r.SessionID})
	after, err := st.GetWorkspace(ctx, r.WorkspaceID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.LastUsedAt.After(before.LastUsedAt) {
		t.Fatalf("last_used_at %s after stop_session, %s before: want it later", after.LastUsedAt, before.LastUsedAt)
	}
}
