package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// eventually polls cond until it holds, failing the test after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// burst calls read_file /etc/hostname n times back to back for session
// and returns the containers' hostnames (their short ids), failing if one
// served two calls.
func burst(t *testing.T, st *catalog.SessionTools, session string, n int) []string {
	t.Helper()
	seen := map[string]bool{}
	var hosts []string
	for range n {
		h := strings.TrimSpace(callText(t, st, session, "read_file", `{"path":"/etc/hostname"}`))
		if h == "" || seen[h] {
			t.Fatalf("hostname %q after %v: a pooled container served two calls", h, hosts)
		}
		seen[h] = true
		hosts = append(hosts, h)
	}
	return hosts
}

// A burst that empties the pool doubles its target on each miss (up to
// WarmPoolMax), the pool refills to it, and once idle it shrinks back to
// WarmPool, removing the rest; no container serves two calls.
func TestOnDemandPoolGrowsAndShrinks(t *testing.T) {
	o, eng, _ := onDemandEnvWith(t, func(opts *catalog.OnDemandOptions) {
		opts.WarmPool, opts.WarmPoolMax = 1, 4
	})
	ctx := context.Background()
	if _, err := o.Add(ctx, "p", "s1", "callfix", nil); err != nil {
		t.Fatal(err)
	}
	if s := o.Status(); s.WarmTarget != 1 {
		t.Fatalf("status after mcp-add %+v, want a target of WarmPool (1)", s)
	}
	st := o.SessionTools("p")
	// Back-to-back calls outrun a refill (a container takes hundreds of
	// milliseconds to start, a call a few): the pool misses and grows.
	hosts := burst(t, st, "s1", 8)
	if s := o.Status(); s.WarmTarget != 4 {
		t.Fatalf("status after a burst %+v, want the target grown to WarmPoolMax (4)", s)
	}
	eventually(t, 2*time.Minute, "the grown pool refills to 4", func() bool { return o.Status().Warm == 4 })
	o.WaitRetired() // the burst's containers removed, refills done
	if got := catalogContainers(t, eng); len(got) != 4 {
		t.Fatalf("containers %v with the pool grown to 4, want 4 warm ones", got)
	}
	for _, c := range catalogContainers(t, eng) {
		for _, h := range hosts {
			if strings.HasSuffix(c, "/"+h) {
				t.Fatalf("container %s served a call and is still there", c)
			}
		}
	}
	// The second burst is served from the pool, by fresh containers.
	burst(t, st, "s1", 4)
	// Idle: back to WarmPool.
	catalog.ShrinkIdlePools(o)
	o.WaitRetired()
	if s := o.Status(); s.WarmTarget != 1 || s.Warm != 1 || s.Containers != 1 {
		t.Fatalf("status after the idle shrink %+v, want target 1, 1 warm, 1 container", s)
	}
	if got := catalogContainers(t, eng); len(got) != 1 {
		t.Fatalf("containers after the idle shrink %v, want the 1 warm one", got)
	}
	// The last user leaving drains the pool.
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if got := catalogContainers(t, eng); len(got) != 0 {
		t.Fatalf("containers after the session ended: %v, want none", got)
	}
}

// A pool growing under a burst stays within MaxContainers (warm,
// starting and serving containers together), an mcp-add of a long-lived
// server takes a warm container's place rather than being refused, and
// Close removes a grown pool.
func TestOnDemandPoolBurstWithinCap(t *testing.T) {
	const limit = 3
	o, eng, _ := onDemandEnvWith(t, func(opts *catalog.OnDemandOptions) {
		opts.WarmPool, opts.WarmPoolMax, opts.MaxContainers = 2, 16, limit
	})
	ctx := context.Background()
	if _, err := o.Add(ctx, "p", "s1", "callfix", nil); err != nil {
		t.Fatal(err)
	}
	// Watch the engine while the burst runs.
	var (
		mu       sync.Mutex
		most     int
		mostSeen []string
	)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for wctx.Err() == nil {
			if n := o.Status().Containers; n > limit {
				mu.Lock()
				most = max(most, n)
				mu.Unlock()
			}
			cs, err := eng.List(wctx, map[string]string{engine.LabelKind: catalog.KindCatalog})
			mu.Lock()
			if err == nil && len(cs) > most {
				most, mostSeen = len(cs), nil
				for _, c := range cs {
					mostSeen = append(mostSeen, c.Labels[engine.LabelRef]+"/"+c.ID[:12])
				}
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // a poll, not a wait for a state
		}
	})
	burst(t, o.SessionTools("p"), "s1", 10)
	stop()
	wg.Wait()
	if most > limit {
		t.Fatalf("%d catalog containers at once during the burst (%v), want at most MaxContainers (%d)", most, mostSeen, limit)
	}
	if s := o.Status(); s.WarmTarget <= 2 {
		t.Fatalf("status after the burst %+v, want the target grown past WarmPool", s)
	}
	eventually(t, 2*time.Minute, "the pool fills what the cap allows", func() bool { return o.Status().Warm == limit })
	// Every place is taken by a warm container: a long-lived server
	// takes one of them.
	if _, err := o.Add(ctx, "p", "s2", "longfix", nil); err != nil {
		t.Fatalf("mcp-add with only warm containers in the way: %v", err)
	}
	o.WaitRetired()
	if s := o.Status(); s.Containers != limit || s.LongLived != 1 || s.Warm != limit-1 {
		t.Fatalf("status %+v, want %d containers: the long-lived one and %d warm", s, limit, limit-1)
	}
	if got := catalogContainers(t, eng); len(got) != limit {
		t.Fatalf("containers %v, want %d", got, limit)
	}
	// A second long-lived one takes another warm container's place; a
	// third has none left to take.
	if _, err := o.Add(ctx, "p", "s3", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(ctx, "p", "s4", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(ctx, "p", "s5", "longfix", nil); !errors.Is(err, switchboard.ErrResourceLimit) {
		t.Fatalf("long-lived server past the cap with no warm container left: %v, want ErrResourceLimit", err)
	}
	// Shutdown removes everything, the grown pool included.
	if err := o.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := catalogContainers(t, eng); len(got) != 0 {
		t.Fatalf("containers after Close: %v", got)
	}
}

// A call waiting on the pool's refill gets the refill's error when it
// fails, not a wait until its deadline.
func TestOnDemandPoolRefillFailureEndsWait(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(
		"registry:\n  secretcall: {image: %q, disableNetwork: true, env: [{name: MCPFIXTURE_NAME, value: \"${NAME}\"}]}\n", image)))
	if err != nil {
		t.Fatal(err)
	}
	// Once the secret is gone, a start's secret lookup waits for release
	// and then finds nothing: the refills are under way when the call
	// misses, and fail while it waits.
	var secretGone atomic.Bool
	var lookups atomic.Int32
	release := make(chan struct{})
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, WarmPool: 1, Version: "test",
		Secrets: func(context.Context, string) (map[string]string, error) {
			if secretGone.Load() {
				lookups.Add(1)
				<-release
				return nil, nil
			}
			return map[string]string{"NAME": "x"}, nil
		}})
	t.Cleanup(func() {
		_ = o.Close(context.Background())
		if left := catalogContainers(t, eng); len(left) > 0 {
			t.Errorf("containers left after Close: %v", left)
		}
	})
	ctx := context.Background()
	if _, err := o.Add(ctx, "p", "s1", "secretcall", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the pool holds its warm container", func() bool { return o.Status().Warm == 1 })
	secretGone.Store(true) // every start from now on fails
	st := o.SessionTools("p")
	callText(t, st, "s1", "echo", `{"text":"warm"}`) // the warm one; its refill waits
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := st.CallSessionTool(cctx, switchboard.CallRequest{Project: "p", Session: "s1", Tool: "echo", Arguments: json.RawMessage(`{"text":"cold"}`)})
		done <- err
	}()
	// The miss doubled the target: a second refill is under way too.
	eventually(t, 10*time.Second, "the call missed and the pool is starting two", func() bool { return lookups.Load() >= 2 })
	close(release)
	err = <-done
	if !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(err.Error(), "NAME") {
		t.Fatalf("call with every start failing: %v, want the start's ErrConfig naming the secret", err)
	}
}
