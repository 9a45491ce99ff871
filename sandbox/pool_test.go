package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

// warmRefs returns the session refs of project's sandbox containers on
// f's engine that serve no session of f's service: its warm ones.
func (f *fixture) warmRefs(project string) []string {
	f.t.Helper()
	cs, err := f.e.List(context.Background(), map[string]string{engine.LabelProject: project, engine.LabelKind: sandbox.KindSession})
	if err != nil {
		f.t.Fatal(err)
	}
	live := map[string]bool{}
	for _, x := range f.svc.Sessions(project) {
		live[x.SessionID] = true
	}
	var out []string
	for _, c := range cs {
		if ref := c.Labels[engine.LabelRef]; !live[ref] {
			out = append(out, ref)
		}
	}
	slices.Sort(out)
	return out
}

// waitWarm waits until project has n warm containers ready and none
// being made (its containers on the engine are its sessions plus n).
func (f *fixture) waitWarm(project string, n int) {
	f.t.Helper()
	waitFor(f.t, fmt.Sprintf("%d warm containers in %s", n, project), func() (bool, string) {
		got, refs := f.svc.Pooled(project), f.warmRefs(project)
		return got == n && len(refs) == n, fmt.Sprintf("pooled %d, containers without a session %v", got, refs)
	})
}

// pooledRows counts project's workspace rows of warm containers.
func pooledRows(t *testing.T, st switchboard.Store, project string) []switchboard.Workspace {
	t.Helper()
	rows, err := st.ListWorkspaces(context.Background(), switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(rows, func(w switchboard.Workspace) bool { return w.Status != sandbox.WorkspacePooled })
}

// TestWarmPoolNeverReused: with a pool, sessions after the first start
// on warm containers, each on its own fresh, empty workspace; a file one
// session wrote is absent for the next; a warm container is used by
// exactly one session and, once that session stops, is gone (never back
// in the pool); warm workspaces are nobody's until taken (not listed,
// not found by id).
func TestWarmPoolNeverReused(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) { mod(o); o.WarmPool = 1 })
	ctx := context.Background()

	first := f.exec("p", "execute_command", map[string]any{"command": "echo secret > s.txt; ls -A"})
	if !first.SessionCreated || first.Stdout != "s.txt\n" {
		t.Fatalf("first session: %+v", first)
	}
	seen := map[string]bool{first.SessionID: true}
	seenWS := map[string]bool{first.WorkspaceID: true}
	prev := first
	for i := range 3 {
		f.waitWarm("p", 1)
		warm := f.warmRefs("p")[0]
		rows := pooledRows(t, st, "p")
		if len(rows) != 1 {
			t.Fatalf("pooled rows: %+v", rows)
		}
		// A warm workspace is nobody's: not listed, not found by its id.
		list := f.must("agent-1", "list_workspaces", map[string]any{})
		if containsID(list, rows[0].ID) || !containsID(list, first.WorkspaceID) {
			t.Fatalf("the warm workspace is listed: %v", list)
		}
		if _, rerr := f.ws("agent-1", "delete_workspace", map[string]any{"workspace_id": rows[0].ID}); rerr == nil || rerr.Code != -32602 {
			t.Fatalf("delete of a warm workspace by its id: %v", rerr)
		}
		r := f.exec("p", "execute_command", map[string]any{"command": "ls -A; echo mine > m.txt"})
		if !r.SessionCreated || r.SessionID != warm {
			t.Fatalf("round %d: session %s did not start on the warm container %s: %+v", i, r.SessionID, warm, r)
		}
		if seen[r.SessionID] || seenWS[r.WorkspaceID] || r.WorkspaceID != rows[0].ID {
			t.Fatalf("round %d: session %s / workspace %s seen before (or not the warm one %s)", i, r.SessionID, r.WorkspaceID, rows[0].ID)
		}
		seen[r.SessionID], seenWS[r.WorkspaceID] = true, true
		if r.Stdout != "" {
			t.Fatalf("round %d: the warm workspace was not empty: %q", i, r.Stdout)
		}
		w, err := st.GetWorkspace(ctx, r.WorkspaceID)
		if err != nil || w.Status != sandbox.WorkspaceRunning || w.AgentSessionID != "agent-1" || w.ContainerID == "" {
			t.Fatalf("round %d: the taken workspace's row: %+v %v", i, w, err)
		}
		// The previous session stops; its container goes, never back.
		if _, rerr := f.call("p", "stop_session", map[string]any{"session_id": prev.SessionID}); rerr != nil {
			t.Fatal(rerr)
		}
		if cs, _ := f.e.List(ctx, map[string]string{engine.LabelRef: prev.SessionID}); len(cs) != 0 {
			t.Fatalf("round %d: the stopped session's container is still there: %v", i, cs)
		}
		prev = r
	}
	f.waitWarm("p", 1)
	for _, ref := range f.warmRefs("p") {
		if seen[ref] {
			t.Fatalf("a used container is back in the pool: %s", ref)
		}
	}
}

func containsID(list map[string]any, id string) bool {
	ws, _ := list["workspaces"].([]any)
	for _, w := range ws {
		if m, _ := w.(map[string]any); m["workspace_id"] == id {
			return true
		}
	}
	return false
}

// TestWarmPoolCap: warm containers count in MaxSessions: the pool fills
// only where there is room, a session takes a warm one without room to
// spare, a session of another flavor gets the warm one's place, and the
// cap refuses what is over it.
func TestWarmPoolCap(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.MaxSessions = 2; o.WarmPool = 2 })
	ctx := context.Background()
	count := func() int {
		cs, err := f.e.List(ctx, map[string]string{engine.LabelProject: "p"})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}
	a := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("p", 1) // one session + one warm = the cap, not 1 + 2
	if n := count(); n != 2 {
		t.Fatalf("containers with one session and the pool: %d, want 2", n)
	}
	b := f.exec("p", "execute_command", map[string]any{"command": "true"})
	if b.SessionID == a.SessionID || f.svc.Pooled("p") != 0 {
		t.Fatalf("second session: %+v, pooled %d", b, f.svc.Pooled("p"))
	}
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "true"})
	wantCode(t, rerr, -32600, "MCP_SERVER_SANDBOX_MAX_SESSIONS")
	if n := count(); n != 2 {
		t.Fatalf("containers at the cap: %d, want 2", n)
	}
	// Room again: the pool takes it; a medium session gets its place.
	if _, rerr := f.call("p", "stop_session", map[string]any{"session_id": b.SessionID}); rerr != nil {
		t.Fatal(rerr)
	}
	f.exec("p", "execute_command", map[string]any{"command": "true", "session_id": a.SessionID}) // no refill: not a new session
	c := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("p", 0)
	_, rerr = f.call("p", "stop_session", map[string]any{"session_id": c.SessionID})
	if rerr != nil {
		t.Fatal(rerr)
	}
	waitFor(t, "the pool refilled to the room left", func() (bool, string) {
		return f.svc.Pooled("p") == 1 && count() == 2, fmt.Sprintf("pooled %d, containers %d", f.svc.Pooled("p"), count())
	})
	m := f.exec("p", "execute_command", map[string]any{"command": "true", "flavor": "medium"})
	if m.Flavor != "medium" {
		t.Fatalf("medium session: %+v", m)
	}
	waitFor(t, "the small warm container gave its place up", func() (bool, string) {
		return f.svc.Pooled("p") == 0 && count() == 2, fmt.Sprintf("pooled %d, containers %d", f.svc.Pooled("p"), count())
	})
}

// TestWarmPoolDrains: a project's warm containers and their workspaces
// (container, volume, row) go when the project is deleted, when its
// sandbox is switched off (Drain), and at shutdown, while sessions'
// workspaces stay where they stay without a pool.
func TestWarmPoolDrains(t *testing.T) {
	mod, st := withStore(t)
	f := newFixture(t, func(o *sandbox.Options) { mod(o); o.WarmPool = 2 })
	ctx := context.Background()
	left := func(project string) string {
		c, v, r := f.projectLeft(st, project)
		return fmt.Sprintf("%d containers, %d volumes, %d rows", c, v, r)
	}

	// Project deletion.
	f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("p", 2)
	if sessions, workspaces, err := f.svc.ProjectUsage(ctx, "p"); err != nil || sessions != 1 || workspaces != 1 {
		t.Fatalf("usage counts warm containers: %d sessions, %d workspaces, %v", sessions, workspaces, err)
	}
	if err := f.svc.DeleteProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if got := left("p"); got != "0 containers, 0 volumes, 0 rows" {
		t.Fatalf("after the project's deletion: %s", got)
	}

	// Switched off.
	r := f.exec("q", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("q", 2)
	f.svc.Drain("q")
	if got := left("q"); got != "1 containers, 1 volumes, 1 rows" || f.svc.Pooled("q") != 0 {
		t.Fatalf("after Drain: %s (the session's only)", got)
	}
	// It stays drained until the project starts a session again.
	f.exec("q", "execute_command", map[string]any{"command": "true", "session_id": r.SessionID})
	if n := f.svc.Pooled("q"); n != 0 {
		t.Fatalf("refilled after Drain without a new session: %d", n)
	}
	f.exec("q", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("q", 2)

	// Shutdown: the sessions' workspaces stay (ready), the pool's go.
	if err := f.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := left("q"); got != "0 containers, 2 volumes, 2 rows" {
		t.Fatalf("after Close: %s", got)
	}
	if rows := pooledRows(t, st, "q"); len(rows) != 0 {
		t.Fatalf("pooled rows after Close: %+v", rows)
	}
}

// TestWarmPoolIdle: a pool nobody takes from drains after PoolIdle.
func TestWarmPoolIdle(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) {
		o.WarmPool = 1
		o.PoolIdle = 200 * time.Millisecond
		o.SweepInterval = 50 * time.Millisecond
	})
	f.exec("p", "execute_command", map[string]any{"command": "true"})
	waitFor(t, "the idle pool drained", func() (bool, string) {
		refs := f.warmRefs("p")
		return f.svc.Pooled("p") == 0 && len(refs) == 0, fmt.Sprintf("pooled %d, warm containers %v", f.svc.Pooled("p"), refs)
	})
}

// TestWarmPoolAfterCrash: a gateway process with a full pool dies; its
// containers are swept (as the next start's sweep does), and the next
// process's Start removes the warm workspaces they leave (volume and
// row), while a live replica's warm containers and rows stay.
func TestWarmPoolAfterCrash(t *testing.T) {
	_, st := withStore(t)
	base := newFixture(t, nil)
	ctx := context.Background()
	warm := func(o *sandbox.Options) { o.WarmPool = 2 }
	dead := base.peer("dead", st, warm)
	live := base.peer("live", st, warm)
	dead.exec("p", "execute_command", map[string]any{"command": "true"})
	live.exec("p", "execute_command", map[string]any{"command": "true"})
	waitFor(t, "both pools full", func() (bool, string) {
		return dead.svc.Pooled("p") == 2 && live.svc.Pooled("p") == 2 && len(pooledRows(t, st, "p")) == 4, fmt.Sprintf("%d %d", dead.svc.Pooled("p"), live.svc.Pooled("p"))
	})
	var deadVolumes []string
	for _, w := range pooledRows(t, st, "p") {
		var cfg struct{ Owner string }
		_ = json.Unmarshal(w.Config, &cfg)
		if cfg.Owner == dead.e.Owner() {
			deadVolumes = append(deadVolumes, volumeName(w.ID))
		}
	}
	if len(deadVolumes) != 2 {
		t.Fatalf("the dead process's warm rows: %v", deadVolumes)
	}
	removed, err := base.e.Sweep(ctx, func(_ context.Context, owner string) (bool, error) { return owner != dead.e.Owner(), nil })
	if err != nil || len(removed) != 3 {
		t.Fatalf("sweep: %d removed, %v", len(removed), err)
	}
	// Without Alive, another process's warm rows are left alone.
	unsure := base.peer("unsure", st, warm)
	if err := unsure.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if rows := pooledRows(t, st, "p"); len(rows) != 4 {
		t.Fatalf("pooled rows after a start that cannot tell who lives: %d, want 4", len(rows))
	}
	next := base.peer("next", st, func(o *sandbox.Options) {
		warm(o)
		o.Alive = func(_ context.Context, owner string) (bool, error) { return owner != dead.e.Owner(), nil }
	})
	if err := next.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if rows := pooledRows(t, st, "p"); len(rows) != 2 {
		t.Fatalf("pooled rows after the restart: %d, want the live replica's 2", len(rows))
	}
	for _, v := range deadVolumes {
		if base.volumeExists(v) {
			t.Fatalf("the dead process's warm volume %s is left", v)
		}
	}
	// The live replica's warm containers still serve.
	r := live.exec("p", "execute_command", map[string]any{"command": "ls -A"})
	if r.Stdout != "" || !r.SessionCreated {
		t.Fatalf("the live replica after the restart: %+v", r)
	}
}

// TestWarmPoolGrows: new sessions that find their pool empty, started
// together, grow it (each miss doubles it) up to WarmPoolMax, within the
// cap; the next burst of that size starts on warm containers only.
func TestWarmPoolGrows(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.MaxSessions = 8; o.WarmPool = 1; o.WarmPoolMax = 2 })
	f.exec("p", "execute_command", map[string]any{"command": "true"}) // the pool is in demand from now
	f.waitWarm("p", 1)
	burst := func(n int) []result {
		out := make([]result, n)
		errs := make([]*switchboard.RPCError, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				raw, rerr := f.call("p", "execute_command", map[string]any{"command": "true"})
				if errs[i] = rerr; rerr == nil {
					errs[i] = func() *switchboard.RPCError {
						if err := json.Unmarshal(raw, &out[i]); err != nil {
							return &switchboard.RPCError{Code: -1, Message: err.Error()}
						}
						return nil
					}()
				}
			})
		}
		wg.Wait()
		for i, e := range errs {
			if e != nil {
				t.Fatalf("session %d of the burst: %d %s", i, e.Code, e.Message)
			}
		}
		return out
	}
	warmOnes := func(rs []result, warm []string) int {
		n := 0
		for _, r := range rs {
			if slices.Contains(warm, r.SessionID) {
				n++
			}
		}
		return n
	}
	warm := f.warmRefs("p")
	if got := warmOnes(burst(3), warm); got != 1 {
		t.Fatalf("first burst: %d sessions on warm containers, want 1 (the pool held 1)", got)
	}
	f.waitWarm("p", 2) // grown to WarmPoolMax, not 4
	warm = f.warmRefs("p")
	if got := warmOnes(burst(2), warm); got != 2 {
		t.Fatalf("second burst: %d of 2 sessions on warm containers %v", got, warm)
	}
	f.waitWarm("p", 2) // 6 sessions + 2 warm: the cap
}
