package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// TestOnStateInOrder: OnState reports every change in the order the
// changes happened, so a consumer (metrics) ends on the current state.
func TestOnStateInOrder(t *testing.T) {
	h := newHarness(t, testOptions())
	spec := switchboard.ServerSpec{Name: "missing", Transport: switchboard.TransportStdio, Command: "/nonexistent/switchboard-test-command"}
	h.apply(spec)

	h.tools()
	h.waitSettled("missing")
	// Background retries: two more failures open the breaker, then
	// attempts are refused by it (each reported connecting, failed,
	// unavailable).
	const refused = 20
	for range 2 + refused {
		h.tools()
		h.waitSettled("missing")
	}
	final := h.status("missing").State
	if final != switchboard.StateUnavailable {
		t.Fatalf("final state = %q, want unavailable", final)
	}
	// Close waits for every OnState callback.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const (
		c = switchboard.StateConnecting
		f = switchboard.StateFailed
		u = switchboard.StateUnavailable
	)
	want := []switchboard.ServerState{c, f, c, f, c, f, u}
	for range refused {
		want = append(want, c, f, u)
	}
	if diff := cmp.Diff(want, h.statesOf("missing")); diff != "" {
		t.Errorf("OnState sequence (-actual changes +reported):\n%s", diff)
	}
}

// TestStdioReplyBeforeExit: a child that answers and exits at once (a
// one-shot server) must still have its answer delivered.
func TestStdioReplyBeforeExit(t *testing.T) {
	spec := shellScript(t, "oneshot", `read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"oneshot","version":"1"}}}'
read -r l
read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"once","inputSchema":{"type":"object"}}]}}'
read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"bye"}]}}'
exit 0
`, nil)
	h := newHarness(t, testOptions())
	h.apply(spec)
	for i := range 100 {
		mark := h.mark()
		res, err := h.call("once", "{}")
		if err != nil {
			t.Fatalf("round %d: the child answered before exiting, but the call failed: %v", i, err)
		}
		if got := resultText(t, res); got != "bye" {
			t.Fatalf("round %d: result %q", i, got)
		}
		// The child exits after answering; wait until that is noticed so
		// the next round starts a fresh child.
		h.waitFor("the one-shot child's exit to be noticed", func() bool {
			return h.sawSince(mark, "oneshot", switchboard.StateFailed) && h.status("oneshot").State == switchboard.StateFailed
		})
	}
}

// TestStdioStuckChildHonoursTimeout: a child that stops reading its stdin
// must not make a call outlive its timeout (the request does not fit in
// the pipe buffer, so writing it blocks).
func TestStdioStuckChildHonoursTimeout(t *testing.T) {
	spec := shellScript(t, "stuck", `read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"stuck","version":"1"}}}'
read -r l
read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}}'
exec sleep 300
`, nil)
	spec.CallTimeout = 300 * time.Millisecond
	h := newHarness(t, testOptions())
	h.apply(spec)
	h.tools()
	h.waitState("stuck", switchboard.StateReady)

	args, _ := json.Marshal(map[string]string{"blob": strings.Repeat("x", 4<<20)})
	errc := make(chan error, 1)
	go func() {
		_, err := h.m.Call(context.Background(), switchboard.CallRequest{Tool: "big", Arguments: args})
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, switchboard.ErrTimeout) && !errors.Is(err, switchboard.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrTimeout (or ErrUnavailable if the stream was dropped)", err)
		}
	case <-time.After(5 * time.Second):
		// Cleanup's Close kills the child, which unblocks the write.
		t.Fatal("call to a child that stopped reading stdin blocked far past its 300ms timeout")
	}
}

// TestCrashWithDescendantHoldingStdout: when the child dies but a
// background process it started still holds its stdout open, the crash is
// still noticed (the call fails with ErrUnavailable, not at its timeout)
// and the server restarts on next use.
func TestCrashWithDescendantHoldingStdout(t *testing.T) {
	spec := shellScript(t, "parent", `sleep 300 &
exec "$BIN"
`, map[string]string{"BIN": fixtureBin, mcptest.EnvFixture: "stdio"})
	spec.CallTimeout = 8 * time.Second // StopTimeout is 2s
	h := newHarness(t, testOptions())
	h.apply(spec)
	pid := h.pid("pid")

	_, err := h.call("crash", "{}")
	if !errors.Is(err, switchboard.ErrUnavailable) {
		t.Fatalf("crash: err = %v, want ErrUnavailable", err)
	}
	st := h.waitState("parent", switchboard.StateFailed)
	if !strings.Contains(st.LastError, "exit status 3") {
		t.Errorf("LastError = %q, want it to mention exit status 3", st.LastError)
	}
	if np := h.pid("pid"); np == pid {
		t.Errorf("pid after restart = %d, same as the crashed child", np)
	}
}

// TestStdioEndlessLineBreaksStream: a child that starts a reply and then
// writes on without a newline (here 2 MiB, then nothing) does not stay
// ready until the message limit: the call still ends at its own deadline,
// and once the line has passed 1 MiB unfinished for StallTimeout, status
// says the stream is broken, the child is reset and the next use starts
// a fresh one.
func TestStdioEndlessLineBreaksStream(t *testing.T) {
	spec := shellScript(t, "endless", `read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"endless","version":"1"}}}'
read -r l
read -r l
printf '%s\n' '{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"endless","inputSchema":{"type":"object"}}]}}'
read -r l
printf '%s' '{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"'
head -c 2097152 /dev/zero | tr '\0' x
exec sleep 300
`, nil)
	spec.CallTimeout = 200 * time.Millisecond
	opts := testOptions()
	opts.StallTimeout = time.Second
	h := newHarness(t, opts)
	h.apply(spec)
	h.tools()
	h.waitState("endless", switchboard.StateReady)

	if _, err := h.call("endless", "{}"); !errors.Is(err, switchboard.ErrTimeout) {
		t.Fatalf("call into an endless line: %v, want ErrTimeout at the call's own deadline", err)
	}
	st := h.waitState("endless", switchboard.StateFailed)
	if !strings.Contains(st.LastError, "stream broken") || !strings.Contains(st.LastError, "without a newline") {
		t.Errorf("lastError = %q, want it to say the stream is broken by a line without a newline", st.LastError)
	}
	mark := h.mark()
	if _, err := h.call("endless", "{}"); !errors.Is(err, switchboard.ErrTimeout) {
		t.Fatalf("call after the reset: %v, want ErrTimeout from a fresh child", err)
	}
	if !h.sawSince(mark, "endless", switchboard.StateReady) {
		t.Errorf("the next use did not start a fresh child: states %v", h.statesOf("endless"))
	}
}
