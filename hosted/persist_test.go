package hosted

import (
	"context"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestStatusUpdatesNeverDropped (issue 20, item 29): every row ends with
// its server's latest status, however many servers change at once while
// the status writer is busy (it used to drop changes past a 64-slot
// buffer, leaving rows stale). Close writes what is left.
func TestStatusUpdatesNeverDropped(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	svc := New(Options{Store: st})
	const n = 200
	sups := make([]*supervisor, n)
	for i := range sups {
		row, err := st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
			Image: "img:1", Status: switchboard.HostedStarting})
		if err != nil {
			t.Fatal(err)
		}
		sups[i] = newSupervisor(svc, row, plan{})
	}
	// The writer blocks on the first server's lock while every other
	// server changes, twice.
	first := sups[0]
	first.mu.Lock()
	first.setLocked(switchboard.HostedRunning)
	for _, state := range []string{switchboard.HostedRunning, switchboard.HostedStopped} {
		for _, sup := range sups[1:] {
			sup.mu.Lock()
			sup.setLocked(state)
			sup.mu.Unlock()
		}
	}
	first.mu.Unlock()
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stale := 0
	for i, sup := range sups {
		want := switchboard.HostedStopped
		if i == 0 {
			want = switchboard.HostedRunning
		}
		row, err := st.GetWorkspace(ctx, sup.id)
		if err != nil {
			t.Fatal(err)
		}
		if row.Status != want {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d rows keep a stale status", stale, n)
	}
}
