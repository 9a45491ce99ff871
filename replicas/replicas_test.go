package replicas

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// failing is a lease store that stops answering when down is set.
type failing struct {
	switchboard.LeaseStore
	down atomic.Bool
}

var errDown = switchboard.Errorf(switchboard.ErrUnavailable, "store down")

func (f *failing) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if f.down.Load() {
		return switchboard.Lease{}, errDown
	}
	return f.LeaseStore.AcquireLease(ctx, name, holder, ttl)
}

func newReplication(t *testing.T, ttl time.Duration) (*Replication, *failing) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &failing{LeaseStore: st}
	alive := func(_ context.Context, owner string) (bool, error) { return owner != "dead", nil }
	return &Replication{Leases: f, Owner: "me", URL: "http://me", TTL: ttl, Tick: ttl / 10, Alive: alive}, f
}

// A lease another holder took is lost at the next renewal: what runs
// under it must stop.
func TestRenewLosesATakenLease(t *testing.T) {
	ctx := t.Context()
	r, st := newReplication(t, time.Minute)
	if err := r.Claim(ctx, "x/1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Claim(ctx, "x/2"); err != nil {
		t.Fatal(err)
	}
	if lost, failed := r.Renew(ctx, []string{"x/1", "x/2"}); len(lost)+len(failed) != 0 {
		t.Fatalf("renewing held leases: lost %v, failed %v", lost, failed)
	}
	if err := st.ReleaseLease(ctx, "x/1", r.Holder()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireLease(ctx, "x/1", "other http://other", time.Minute); err != nil {
		t.Fatal(err)
	}
	lost, failed := r.Renew(ctx, []string{"x/1", "x/2"})
	if len(lost) != 1 || !errors.Is(lost["x/1"], switchboard.ErrConflict) || len(failed) != 0 {
		t.Fatalf("after another holder took x/1: lost %v, failed %v; want x/1 lost (conflict)", lost, failed)
	}
	if got := r.HolderURL(ctx, "x/1"); got != "http://other" {
		t.Errorf("x/1's holder URL %q, want the other's", got)
	}
}

// A lease the store does not renew stays held (a failure, retried) until
// half its time to live has passed since its last renewal; then it is
// lost.
func TestRenewLosesALeaseNotRenewedInTime(t *testing.T) {
	ctx := t.Context()
	const ttl = 600 * time.Millisecond
	r, st := newReplication(t, ttl)
	if err := r.Claim(ctx, "x/1"); err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	st.down.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		at := time.Now()
		lost, failed := r.Renew(ctx, []string{"x/1"})
		if len(lost) == 1 {
			if !errors.Is(lost["x/1"], errDown) {
				t.Errorf("lost with %v, want the store's error", lost["x/1"])
			}
			if since := at.Sub(renewed); since < ttl/2 {
				t.Errorf("lost %s after the last renewal, before half the time to live (%s)", since, ttl/2)
			}
			break
		}
		if len(failed) != 1 || time.Since(renewed) > ttl {
			t.Fatalf("%s after the last renewal: lost %v, failed %v; want a failure, then the lease lost by TTL/2", time.Since(renewed), lost, failed)
		}
		if time.Now().After(deadline) {
			t.Fatal("never lost")
		}
		time.Sleep(ttl / 20) // the renewal period
	}
	// Lost until released: a fence that failed is tried again.
	if lost, _ := r.Renew(ctx, []string{"x/1"}); len(lost) != 1 {
		t.Errorf("the next renewal forgot the lost lease: lost %v", lost)
	}
	st.down.Store(false)
	if err := r.Release(ctx, "x/1"); err != nil {
		t.Fatal(err)
	}
	if err := r.Claim(ctx, "x/1"); err != nil {
		t.Errorf("claiming the lease again once the store answers: %v", err)
	}
}

// Claim takes a lease a dead process holds, not one a live replica does.
func TestClaim(t *testing.T) {
	ctx := t.Context()
	r, st := newReplication(t, time.Minute)
	for holder, want := range map[string]error{"dead http://dead": nil, "live http://live": switchboard.ErrConflict} {
		name := "x/" + holder
		if _, err := st.AcquireLease(ctx, name, holder, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := r.Claim(ctx, name); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("held by %s: Claim = %v, want %v", holder, err, want)
		}
	}
	got := r.HolderURLs(ctx, "x/")
	if len(got) != 1 || got["x/live http://live"] != "http://live" {
		t.Errorf("HolderURLs = %v, want the live replica's lease only", got)
	}
	if err := r.Release(ctx, "x/dead http://dead"); err != nil {
		t.Fatal(err)
	}
	if err := r.Claim(ctx, "x/dead http://dead"); err != nil {
		t.Errorf("claiming a released lease: %v", err)
	}
}
