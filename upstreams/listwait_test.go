package upstreams

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// TestListWaitBounded (issue 34, item 6): a server that never answers
// initialize does not hold the first tools/list for the connect timeout:
// the listing returns at ListWait with the ready server's tools, the slow
// one is still connecting, and its tools would be added when it arrives.
func TestListWaitBounded(t *testing.T) {
	opts := testOptions()
	opts.ListWait = 200 * time.Millisecond // the connect timeout stays waitTimeout
	h := newHarness(t, opts)
	// The ready one first, so its tools are what the bounded list shows.
	h.apply(stdioSpec("ready"))
	h.tools()
	h.apply(stdioSpec("ready"), shellScript(t, "mute", "exec sleep 300\n", nil))
	cat := h.tools()
	if _, ok := cat.Lookup("echo"); !ok {
		t.Fatalf("the first list lacks the ready server's echo: %+v", cat)
	}
	if st := h.status("mute"); st.State != switchboard.StateConnecting {
		t.Fatalf("the mute server is %s after the first list; want it still connecting (the list did not wait for it)", st.State)
	}
}

// TestInitializeTimeoutSaysSo: a server killed because it did not finish
// initialize within the connect timeout is reported as that, not as a
// process "killed during initialize".
func TestInitializeTimeoutSaysSo(t *testing.T) {
	opts := testOptions()
	opts.ConnectTimeout = 300 * time.Millisecond
	h := newHarness(t, opts)
	h.apply(shellScript(t, "mute", "exec sleep 300\n", nil))
	h.m.Lookup(t.Context(), "anything")
	st := h.waitState("mute", switchboard.StateFailed, switchboard.StateUnavailable)
	if !strings.Contains(st.LastError, "did not finish initialize within 300ms") || strings.Contains(st.LastError, "killed") {
		t.Fatalf("last error %q: want it to say initialize did not finish within 300ms", st.LastError)
	}
}

// TestUnknownToolNamesBrokenServers (issue 34, item 16): a call to a tool
// whose server could not start is not only "unknown tool": the message
// names the servers that never listed tools, with their state.
func TestUnknownToolNamesBrokenServers(t *testing.T) {
	opts := testOptions()
	opts.ConnectTimeout = 300 * time.Millisecond
	h := newHarness(t, opts)
	h.apply(stdioSpec("ready"), shellScript(t, "broken", "exit 3\n", nil))
	h.tools()
	h.waitState("broken", switchboard.StateFailed, switchboard.StateUnavailable)
	_, err := h.call("create_issue", "{}")
	if !errors.Is(err, switchboard.ErrNotFound) || !strings.Contains(err.Error(), `server "broken" (`) || strings.Contains(err.Error(), `"ready"`) {
		t.Fatalf("calling a tool no server offers, with one server broken: %v; want not found naming the broken server only", err)
	}
}
