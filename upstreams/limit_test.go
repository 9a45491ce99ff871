package upstreams

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// TestMessageLimitEveryTransport: a reply much larger than MaxMessageBytes
// is cut off as soon as it passes the limit on stdio, hosted streams, SSE
// and streamable HTTP alike, including an application/json reply padded
// with blank lines (only an event stream's blank line ends a message); the
// caller is told which limit was hit (not just "connection lost"), status
// says it too, and the server is usable again for replies that fit.
func TestMessageLimitEveryTransport(t *testing.T) {
	const limit = 4 << 10
	big := `{"text":"` + strings.Repeat("x", 64*limit) + `"}`
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
	specs["streamable-http-json-padded"] = func(t *testing.T) (switchboard.ServerSpec, Options) {
		ts := httptest.NewServer(paddedJSON{next: mcptest.StreamableHandler(mcptest.Options{Name: "padded"}), size: 64 * limit})
		t.Cleanup(ts.Close)
		return switchboard.ServerSpec{Name: "s", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL}, testOptions()
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
			if !errors.Is(err, switchboard.ErrUnavailable) || !strings.Contains(err.Error(), "MCP_SERVER_MAX_MESSAGE_BYTES") ||
				!strings.Contains(err.Error(), strconv.Itoa(limit)) || !strings.Contains(err.Error(), `"s"`) {
				t.Fatalf("oversized reply: %v; want ErrUnavailable naming the server, the limit and MCP_SERVER_MAX_MESSAGE_BYTES", err)
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

// paddedJSON answers a tools/call whose text argument is longer than 1 KiB
// with a single application/json response of about size bytes: many small
// content items with a blank line between each, so no stretch between
// blank lines comes near the limit. Everything else goes to next.
type paddedJSON struct {
	next http.Handler
	size int
}

func (p paddedJSON) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.Method != "tools/call" || len(req.Params.Arguments.Text) <= 1<<10 {
		p.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"content":[`)
	item := `{"type":"text","text":"` + strings.Repeat("x", 64) + `"}`
	for i := 0; b.Len() < p.size; i++ {
		if i > 0 {
			b.WriteString(",\n\n")
		}
		b.WriteString(item)
	}
	b.WriteString("]}}\n")
	_, _ = w.Write(b.Bytes())
}

// repeatReader yields s over and over, up to n bytes (forever if n < 0).
type repeatReader struct {
	s   string
	n   int64
	off int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	if r.n > 0 && int64(len(p)) > r.n {
		p = p[:r.n]
	}
	for i := range p {
		p[i] = r.s[r.off]
		r.off = (r.off + 1) % len(r.s)
	}
	if r.n > 0 {
		r.n -= int64(len(p))
	}
	return len(p), nil
}

// TestBlankLinesCountTowardTheLimit (issue 20, item 21): a server that
// sends only newlines (stdio, hosted) or only empty events (SSE: blank
// lines, comments) is cut at the message limit like one endless message,
// while a long stream of real events, each within the limit, is not.
func TestBlankLinesCountTowardTheLimit(t *testing.T) {
	const limit = 4 << 10
	t.Run("lines", func(t *testing.T) {
		for _, s := range []string{"\n", "\r\n", " \n"} {
			f := newFramer(io.Discard, false, lineLimits{max: limit}, nil, slog.New(slog.DiscardHandler))
			done := make(chan struct{})
			go func() {
				defer close(done)
				f.readLoop(&repeatReader{s: s, n: -1})
			}()
			select {
			case <-done:
			case <-time.After(waitTimeout):
				t.Fatalf("%q forever: the reader never stopped", s)
			}
			if got := f.brokenReason(); !strings.Contains(got, "MCP_SERVER_MAX_MESSAGE_BYTES") {
				t.Errorf("%q forever: broken reason %q, want the message limit", s, got)
			}
		}
	})
	t.Run("events", func(t *testing.T) {
		for _, tc := range []struct {
			name, s string
			cut     bool
		}{
			{"blank lines", "\n", true},
			{"CRLF blank lines", "\r\n", true},
			{"comments", ": keepalive\n\n", true},
			{"real events", "event: message\ndata: {}\n\n", false},
			{"events and keepalives", ": ping\n\ndata: {}\n\n", false},
		} {
			var exceeded error
			b := &limitedBody{ReadCloser: io.NopCloser(&repeatReader{s: tc.s, n: 64 * limit}), limit: limit, events: true,
				onExceed: func(err error) { exceeded = err }}
			_, err := io.Copy(io.Discard, b)
			var tl *tooLargeError
			if got := errors.As(err, &tl) && exceeded != nil; got != tc.cut {
				t.Errorf("%s: cut = %v (err %v), want %v", tc.name, got, err, tc.cut)
			}
		}
	})
}
