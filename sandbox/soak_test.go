package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

// soakFor is how long TestSoakAnonymousSessions starts sessions.
const soakFor = 12 * time.Second

// TestSoakAnonymousSessions: many short sessions started without
// session_id, half stopped with stop_session and half left to expire,
// for a fixed time, with a short retention. Throughout the wind-down the
// workspace volumes on the engine are exactly the rows, and every
// anonymous one is live or within its retention; after the service
// closes no container is left and the volumes are what the rule keeps;
// the next gateway process deletes those once they expire, and only the
// workspace that was attached stays.
func TestSoakAnonymousSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const retention = 2 * time.Second
	mod, st := withStore(t)
	opts := func(o *sandbox.Options) {
		mod(o)
		o.WorkspaceRetention = retention
		o.SessionTimeout = time.Second
		o.SweepInterval = 100 * time.Millisecond
		o.MaxSessions = 50
	}
	f := newFixture(t, opts)
	ctx := context.Background()

	// One workspace is kept: attached once, then detached.
	kept := f.exec("p", "execute_command", map[string]any{"command": "echo kept > kept.txt"})
	f.must("agent-K", "attach_workspace", map[string]any{"workspace_id": kept.WorkspaceID})
	f.must("agent-K", "detach_workspace", map[string]any{"workspace_id": kept.WorkspaceID})

	var started, stopped, failed atomic.Int64
	end := time.Now().Add(soakFor)
	var wg sync.WaitGroup
	for w := range 3 {
		agent := fmt.Sprintf("agent-%d", w)
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				raw, rerr := f.callCtx(ctx, "p", agent, "execute_command", map[string]any{"command": "echo $$ > pid; cat pid"}, nil)
				if rerr != nil {
					failed.Add(1)
					t.Errorf("%s: execute_command: %d %s", agent, rerr.Code, rerr.Message)
					return
				}
				started.Add(1)
				var r result
				_ = json.Unmarshal(raw, &r)
				if i%2 == 1 {
					continue // left to expire
				}
				if _, rerr := f.callCtx(ctx, "p", agent, "stop_session", map[string]any{"session_id": r.SessionID}, nil); rerr != nil {
					t.Errorf("%s: stop_session: %d %s", agent, rerr.Code, rerr.Message)
					return
				}
				stopped.Add(1)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d sessions in %s (%d stopped, the rest expired after %s idle), retention %s", started.Load(), soakFor, stopped.Load(), time.Second, retention)

	// While sessions expire and workspaces are deleted, the volumes are
	// the rows, and the rows are what the rule keeps.
	slack := time.Second // a sweep under load
	ruleHolds := func() (bool, string) {
		vols := workspaceVolumes(t, f.e)
		rows, err := st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: "p"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, w := range rows {
			names = append(names, "switchboard-ws-"+w.ID)
			info, err := f.svc.GetWorkspace(ctx, "p", w.ID)
			if err != nil {
				return false, err.Error()
			}
			if info.Anonymous && info.SessionID == "" && (info.ExpiresAt == nil || time.Since(*info.ExpiresAt) > slack) {
				return false, fmt.Sprintf("anonymous workspace %s outlived its retention: %+v", w.ID, info)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, vols) {
			return false, fmt.Sprintf("volumes %v, rows %v", vols, names)
		}
		return true, ""
	}
	checks := 0
	waitFor(t, "every session ended", func() (bool, string) {
		checks++
		if ok, why := ruleHolds(); !ok {
			return false, why
		}
		n := len(f.svc.Sessions("p"))
		return n == 0, fmt.Sprintf("%d sessions live", n)
	})
	t.Logf("the rule held at %d checks during the wind-down", checks)

	// One more session, live at shutdown: its workspace is kept for its
	// retention, as are those that ended less than that ago.
	f.exec("p", "execute_command", map[string]any{"command": "true"})
	if err := f.svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := f.e.List(ctx, nil); err != nil || len(c) != 0 {
		t.Fatalf("containers after close: %d %v", len(c), err)
	}
	if ok, why := ruleHolds(); !ok {
		t.Fatalf("after close: %s", why)
	}

	// The next gateway process deletes them once they expire.
	next := f.peer("next", st, opts)
	if err := next.svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// A deletion removes the volume, then the row: wait for both.
	waitFor(t, "only the kept workspace is left", func() (bool, string) {
		vols := workspaceVolumes(t, f.e)
		rows, err := st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: "p"})
		if err != nil {
			return false, err.Error()
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return slices.Equal(vols, []string{"switchboard-ws-" + kept.WorkspaceID}) && slices.Equal(ids, []string{kept.WorkspaceID}),
			fmt.Sprintf("volumes %v, rows %v", vols, ids)
	})
	if c, _ := f.e.List(ctx, nil); len(c) != 0 {
		t.Fatalf("containers left: %d", len(c))
	}
}

// workspaceVolumes lists the engine's workspace volumes, sorted.
func workspaceVolumes(t *testing.T, e *engine.Engine) []string {
	t.Helper()
	vols, err := e.ListVolumes(context.Background(), map[string]string{engine.LabelKind: sandbox.KindWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vols {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	return names
}
