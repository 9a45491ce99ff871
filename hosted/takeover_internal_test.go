package hosted

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestTakeOverNotHeldUpByRegistration (issue 33): a registration in
// progress (held here in its secrets check, as a slow image check or
// container start holds it) does not hold up the reconciler: a server
// whose owner died is taken over meanwhile, and the registration's own
// name stays its own.
func TestTakeOverNotHeldUpByRegistration(t *testing.T) {
	ctx := t.Context()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(switchboard.HostedRegistration{Name: "orphan", Image: "img:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := encodeRow(nil, "default", p.reg)
	if err != nil {
		t.Fatal(err)
	}
	row, err := st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: p.reg.Image, Config: cfg, Status: switchboard.HostedRunning})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, leasePrefix+row.ID, "dead http://dead", time.Hour); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	svc := New(Options{Store: st,
		Secrets: func(context.Context, string) (map[string]string, error) {
			close(entered)
			<-release
			return map[string]string{"TOKEN": "x"}, nil
		},
		Replication: &Replication{Leases: st, Owner: "me", URL: "http://me", TTL: time.Hour, Tick: time.Hour,
			Alive: func(_ context.Context, owner string) (bool, error) { return owner != "dead", nil }}})
	t.Cleanup(func() { _ = svc.Close(context.Background()) })

	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		_, _ = svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "slow", Image: "img:1", Environment: map[string]string{"T": "${TOKEN}"}})
	})
	<-entered
	reconciled, second := make(chan struct{}), make(chan error, 1)
	wg.Go(func() {
		defer close(reconciled)
		svc.reconcile(ctx)
	})
	wg.Go(func() {
		_, err := svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "slow", Image: "img:1"})
		second <- err
	})
	deadline := time.Now().Add(10 * time.Second)
	select {
	case <-reconciled:
	case <-time.After(time.Until(deadline)):
		t.Error("the reconciler waited for a registration in progress")
	}
	select {
	case err := <-second:
		if !errors.Is(err, switchboard.ErrConflict) {
			t.Errorf("a second registration of a name being registered: %v, want ErrConflict", err)
		}
	case <-time.After(time.Until(deadline)):
		t.Error("a second registration waited for the first")
	}
	close(release)
	<-reconciled
	svc.mu.Lock()
	_, taken := svc.sups[row.ID]
	svc.mu.Unlock()
	if !taken {
		t.Error("the server whose owner died was not taken over")
	}
}
