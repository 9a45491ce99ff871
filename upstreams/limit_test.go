package upstreams

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// TestMessageLimitEveryTransport: a reply larger than MaxMessageBytes is
// cut off as soon as it passes the limit on stdio, hosted streams, SSE and
// streamable HTTP alike; the caller is told which limit was hit (not just
// "connection lost"), status says it too, and the server is usable again
// for replies that fit.
func TestMessageLimitEveryTransport(t *testing.T) {
	const limit = 4 << 10
	big := `{"text":"` + strings.Repeat("x", 2*limit) + `"}`
	specs := map[string]func(t *testing.T) (switchboard.ServerSpec, Options){
		"stdio": func(t *testing.T) (switchboard.ServerSpec, Options) {
			return stdioSpec("s"), testOptions()
		},
		"hosted": func(t *testing.T) (switchboard.ServerSpec, Options) {
			o := testOptions()
			o.Streams = newPipeOpener(t)
			return switchboard.ServerSpec{Name: "s", Transport: switchboard.TransportHosted}, o
		},
	}
	for _, f := range remoteFixtures() {
		specs[string(f.transport)] = func(t *testing.T) (switchboard.ServerSpec, Options) {
			ts := httptest.NewServer(f.handler)
			t.Cleanup(ts.Close)
			return switchboard.ServerSpec{Name: "s", Transport: f.transport, URL: ts.URL}, testOptions()
		}
	}
	for name, mk := range specs {
		t.Run(name, func(t *testing.T) {
			spec, opts := mk(t)
			opts.MaxMessageBytes = limit
			h := newHarness(t, opts)
			h.apply(spec)
			if got := h.text("echo", `{"text":"fits"}`); got != "fits" {
				t.Fatalf("small echo = %q", got)
			}
			_, err := h.call("echo", big)
			if !errors.Is(err, switchboard.ErrUnavailable) || !strings.Contains(err.Error(), "MCP_SERVER_MAX_MESSAGE_BYTES") || !strings.Contains(err.Error(), `"s"`) {
				t.Fatalf("oversized reply: %v; want ErrUnavailable naming the server and MCP_SERVER_MAX_MESSAGE_BYTES", err)
			}
			h.waitFor("status naming the limit", func() bool {
				return strings.Contains(h.status("s").LastError, "MCP_SERVER_MAX_MESSAGE_BYTES")
			})
			if name == string(switchboard.TransportSSE) {
				h.waitState("s", switchboard.StateReady) // it reconnects in the background
			}
			if got := h.text("echo", `{"text":"again"}`); got != "again" {
				t.Fatalf("echo after the reset = %q", got)
			}
		})
	}
}
