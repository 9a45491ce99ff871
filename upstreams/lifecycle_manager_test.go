package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

func prefixed(spec switchboard.ServerSpec, prefix string) switchboard.ServerSpec {
	spec.ToolPrefix = prefix
	return spec
}

// TestApplyReload: unchanged servers keep their connection, a changed
// server in use connects its replacement before the old one closes, and a
// removed (idle) server's child is reaped before Apply returns.
func TestApplyReload(t *testing.T) {
	report := filepath.Join(t.TempDir(), "report")
	// The "change" server reports, when it starts, whether the process
	// named by OLD_PID is still alive.
	changeEnv := map[string]string{
		"BIN": fixtureBin, "REPORT": report,
		mcptest.EnvFixture: "stdio", mcptest.EnvFixtureName: "change",
	}
	// OLD_PID is the host's pid, not one of the child's PID namespace, so
	// /proc (the host's) answers rather than kill -0.
	change := prefixed(shellScript(t, "change", `if [ -n "$OLD_PID" ]; then
  if [ -e "/proc/$OLD_PID" ]; then echo alive > "$REPORT"; else echo dead > "$REPORT"; fi
fi
exec "$BIN"
`, changeEnv), "change_")

	h := newHarness(t, testOptions())
	keep := prefixed(stdioSpec("keep"), "keep_")
	remove := prefixed(stdioSpec("remove"), "remove_")
	h.apply(keep, change, remove)
	h.tools()
	keepPid, changePid, removePid := h.pid("keep_pid"), h.pid("change_pid"), h.pid("remove_pid")

	// Reload: keep unchanged, change gets a new env, remove goes, added
	// is new.
	change2 := change
	change2.Env = map[string]string{"OLD_PID": strconv.Itoa(changePid)}
	for k, v := range changeEnv {
		change2.Env[k] = v
	}
	added := prefixed(stdioSpec("added"), "added_")
	h.apply(keep, change2, added)

	// Straight after Apply: the replacement is connected, the removed and
	// replaced children are gone (reaped), nothing new was started lazily.
	if st := h.status("change"); st.State != switchboard.StateReady {
		t.Errorf("replacement state right after Apply = %q, want ready (connected during Apply)", st.State)
	}
	if !processGone(removePid) {
		t.Errorf("removed server's child %d still exists after Apply", removePid)
	}
	if !processGone(changePid) {
		t.Errorf("replaced server's old child %d still exists after Apply", changePid)
	}
	if st := h.status("added"); st.State != switchboard.StateIdle {
		t.Errorf("new server state = %q, want idle (lazy)", st.State)
	}
	if n := countState(h.statesOf("keep"), switchboard.StateConnecting); n > 1 {
		t.Errorf("unchanged server connected %d times", n)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("replacement never reported: %v", err)
	}
	if got := strings.TrimSpace(string(b)); got != "alive" {
		t.Errorf("when the replacement started, the old child was %s; want alive (new connects before old closes)", got)
	}

	var names []string
	for _, s := range h.m.Status() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"keep", "change", "added"}, names); diff != "" {
		t.Errorf("status servers (-want +got):\n%s", diff)
	}
	cat := h.m.Catalog()
	if _, ok := cat.Lookup("remove_pid"); ok {
		t.Error("removed server's tools still in the catalog")
	}
	if _, ok := cat.Lookup("change_pid"); !ok {
		t.Error("replaced server's tools missing from the catalog")
	}
	if _, err := h.call("remove_pid", "{}"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("call to a removed server's tool: err = %v, want ErrNotFound", err)
	}

	if got := h.pid("keep_pid"); got != keepPid {
		t.Errorf("unchanged server pid = %d, want %d (connection kept)", got, keepPid)
	}
	if got := h.pid("change_pid"); got == changePid {
		t.Errorf("changed server still answered by the old process %d", got)
	}
	if got := h.pid("added_pid"); got == keepPid {
		t.Errorf("added server answered by keep's process")
	}
}

// TestApplyUnusedChangeStaysLazy: replacing a server that was never used
// starts nothing.
func TestApplyUnusedChangeStaysLazy(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))
	changed := stdioSpec("fx")
	changed.Env["X"] = "1"
	h.apply(changed)
	if st := h.status("fx"); st.State != switchboard.StateIdle {
		t.Errorf("state = %q, want idle", st.State)
	}
	if ev := h.eventsSnapshot(); len(ev) != 0 {
		t.Errorf("state changes = %v, want none", ev)
	}
}

// TestClose: Close stops every child (and its process group) and leaves
// no goroutines behind.
func TestClose(t *testing.T) {
	ts := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "http"}))
	defer ts.Close()
	sse := httptest.NewServer(mcptest.SSEHandler(mcptest.Options{Name: "sse"}))
	defer sse.Close()

	baseline := runtime.NumGoroutine()

	grandPidFile := filepath.Join(t.TempDir(), "grandchild")
	grand := prefixed(shellScript(t, "grand", sleeperScript+`exec "$BIN"
`, map[string]string{"GRANDPID": grandPidFile, "BIN": fixtureBin, mcptest.EnvFixture: "stdio"}), "g_")

	h := newHarness(t, testOptions())
	h.apply(
		prefixed(stdioSpec("one"), "one_"),
		prefixed(stdioSpec("two"), "two_"),
		grand,
		switchboard.ServerSpec{Name: "http", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL, ToolPrefix: "h_"},
		switchboard.ServerSpec{Name: "sse", Transport: switchboard.TransportSSE, URL: sse.URL, ToolPrefix: "s_"},
	)
	h.tools()
	for _, s := range h.m.Status() {
		if s.State != switchboard.StateReady {
			t.Fatalf("%s not ready: %+v", s.Name, s)
		}
	}
	pids := []int{h.pid("one_pid"), h.pid("two_pid"), h.pid("g_pid")}
	grandPid := readPid(t, grandPidFile)
	if processGone(grandPid) {
		t.Fatal("grandchild already gone before Close")
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range pids {
		if !processGone(pid) {
			t.Errorf("child %d still exists after Close", pid)
		}
	}
	// The grandchild got the group's signal; it is not ours to reap, so
	// give the kernel (and init) a bounded moment.
	pollUntil(t, "grandchild to die", func() bool { return processGone(grandPid) })
	pollUntil(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseline })

	if _, err := h.call("one_echo", `{"text":"x"}`); err == nil {
		t.Error("call after Close succeeded")
	}
}

// pollUntil is for conditions no channel reports (processes we do not own,
// goroutine counts): it polls with a hard deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("timed out waiting for %s\n%s", what, buf[:runtime.Stack(buf, true)])
		}
		<-tick.C
	}
}

func countState(states []switchboard.ServerState, st switchboard.ServerState) int {
	n := 0
	for _, s := range states {
		if s == st {
			n++
		}
	}
	return n
}

// TestApplyAfterClose: a reconcile that races Close must not bring the
// manager back: nothing it applies afterwards starts a child.
func TestApplyAfterClose(t *testing.T) {
	h := newHarness(t, testOptions())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.apply(stdioSpec("late"))
	if cat := h.tools(); len(cat.Tools) != 0 {
		t.Fatalf("a closed manager lists %d tools", len(cat.Tools))
	}
	if st := h.m.Status(); len(st) != 0 {
		t.Fatalf("a closed manager reports servers: %+v", st)
	}
	if _, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{}`)}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("call on a closed manager: %v", err)
	}
}

// sleeperScript starts a `sleep 300` in the background and writes its pid
// to $GRANDPID as the host's /proc names it ($! would be its pid in the
// child's PID namespace).
const sleeperScript = `echo "$( (read -r p _ </proc/self/stat; echo "$p"; exec sleep 300 </dev/null >/dev/null 2>&1) & )" >"$GRANDPID"
`

// stubbornScript is a stdio server that ignores SIGTERM, as does the
// grandchild it leaves running; it writes the grandchild's pid to
// $GRANDPID.
const stubbornScript = "trap '' TERM\n" + sleeperScript + `read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"stubborn","version":"1"}}}'
read -r l
read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"stubborn","inputSchema":{"type":"object"}}]}}'
exec sleep 300
`

// TestStopEscalatesToSIGKILL: a child that ignores SIGTERM is killed with
// SIGKILL after the stop timeout, when a reload removes its server and on
// Close, and nothing of its process group survives, grandchild included,
// whether the child is init of a PID namespace or not.
func TestStopEscalatesToSIGKILL(t *testing.T) {
	for _, iso := range []isolation{isolationGroup, isolationPIDNS, isolationUserPIDNS} {
		for _, how := range []string{"Apply", "Close"} {
			t.Run(iso.String()+"/"+how, func(t *testing.T) {
				testenv.Need(t, "pidns", isolationWorks(iso), iso.String()+" not permitted")
				stopEscalatesToSIGKILL(t, iso, how)
			})
		}
	}
}

func stopEscalatesToSIGKILL(t *testing.T, iso isolation, how string) {
	grandPidFile := filepath.Join(t.TempDir(), "grandchild")
	spec := shellScript(t, "stubborn", stubbornScript, map[string]string{"GRANDPID": grandPidFile})
	opts := testOptions()
	opts.StopTimeout = 200 * time.Millisecond
	opts.isolation = iso
	h := newHarness(t, opts)
	h.apply(spec)
	h.tools()
	if st := h.waitState("stubborn", switchboard.StateReady, switchboard.StateFailed); st.State != switchboard.StateReady {
		t.Fatalf("stubborn did not start: %+v", st)
	}
	h.m.mu.Lock()
	u := h.m.byName["stubborn"]
	h.m.mu.Unlock()
	u.mu.Lock()
	sc := u.conn.(*stdioConn)
	u.mu.Unlock()
	pgid, grandPid := sc.cmd.Process.Pid, readPid(t, grandPidFile)
	if got := groupMembers(t, pgid); !slices.Contains(got, pgid) || !slices.Contains(got, grandPid) {
		t.Fatalf("process group %d = %v, want the child and the grandchild %d", pgid, got, grandPid)
	}

	switch how {
	case "Apply":
		h.apply()
	case "Close":
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := h.m.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	select {
	case <-sc.exited:
	case <-time.After(waitTimeout):
		t.Fatal("child never reaped")
	}
	if got := sc.exitStatus(); got != "signal: killed" {
		t.Errorf("child ended with %q, want SIGKILL (it ignores SIGTERM)", got)
	}
	// The grandchild is not ours to reap: poll for the kernel.
	pollUntil(t, "the process group to be gone", func() bool { return len(groupMembers(t, pgid)) == 0 })
}

// groupMembers lists the live (not zombie) processes in process group pgid.
func groupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	testenv.Need(t, "procfs", err == nil, "no /proc")
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := procStat(pid); ok && st.live() && st.pgrp == pgid {
				out = append(out, pid)
			}
		}
	}
	return out
}

// TestApplyDrainsInBackground: a reload that removes a server with a call
// in flight does not wait for the call; the call finishes, and then the
// child goes. Close waits for such drains, and at its deadline cuts them
// off, still leaving no child behind.
func TestApplyDrainsInBackground(t *testing.T) {
	// slowCall starts a slow call and returns once its handler runs.
	slowCall := func(t *testing.T, h *harness, ms int) <-chan error {
		t.Helper()
		started := make(chan struct{})
		var once sync.Once
		errc := make(chan error, 1)
		go func() {
			res, err := h.m.Call(context.Background(), switchboard.CallRequest{Tool: "slow", Arguments: json.RawMessage(`{"ms":` + strconv.Itoa(ms) + `}`), Meta: json.RawMessage(`{"progressToken":"d"}`), OnProgress: func(json.RawMessage) { once.Do(func() { close(started) }) }})
			if err == nil && resultTextNoFatal(res) != "slept "+strconv.Itoa(ms)+"ms" {
				err = fmt.Errorf("result %s", res)
			}
			errc <- err
		}()
		select {
		case <-started:
		case err := <-errc:
			t.Fatalf("slow call ended before it started: %v", err)
		case <-time.After(waitTimeout):
			t.Fatal("slow never reported that it started")
		}
		return errc
	}
	wait := func(t *testing.T, what string, errc <-chan error) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-time.After(waitTimeout):
			t.Fatalf("%s never returned", what)
			return nil
		}
	}

	t.Run("Apply returns at once", func(t *testing.T) {
		h := newHarness(t, testOptions())
		h.apply(stdioSpec("busy"))
		pid := h.pid("pid")
		errc := slowCall(t, h, 2000)
		applied := make(chan error, 1)
		go func() {
			h.m.Apply(context.Background(), nil)
			applied <- nil
		}()
		_ = wait(t, "Apply", applied)
		select {
		case err := <-errc:
			t.Fatalf("Apply returned only once the call in flight on the removed server had ended (%v)", err)
		default:
		}
		if processGone(pid) {
			t.Error("removed server's child stopped while its call was in flight")
		}
		if _, err := h.call("pid", "{}"); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("new call to the removed server: err = %v, want ErrNotFound", err)
		}
		if err := wait(t, "the call in flight", errc); err != nil {
			t.Errorf("call in flight on the removed server: %v, want its result", err)
		}
		pollUntil(t, "the removed server's child to be reaped", func() bool { return processGone(pid) })
	})

	for _, tc := range []struct {
		name     string
		ms       int           // how long the call in flight takes
		deadline time.Duration // Close's
		wantErr  error         // Close's
		wantCall error         // the call's: nil for its result
	}{
		{"Close waits for the drain", 300, waitTimeout, nil, nil},
		{"Close cuts the drain off at its deadline", 60000, 200 * time.Millisecond, context.DeadlineExceeded, switchboard.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testOptions())
			h.apply(stdioSpec("busy"))
			pid := h.pid("pid")
			errc := slowCall(t, h, tc.ms)
			h.apply()
			ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
			defer cancel()
			if err := h.m.Close(ctx); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Close: err = %v, want %v", err, tc.wantErr)
			}
			if !processGone(pid) {
				t.Errorf("removed server's child %d still exists after Close", pid)
			}
			if err := wait(t, "the call in flight", errc); !errors.Is(err, tc.wantCall) {
				t.Errorf("call in flight during Close: err = %v, want %v", err, tc.wantCall)
			}
		})
	}
}
