package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sony/gobreaker/v2"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// outage answers 503 to everything while down is set.
type outage struct {
	h    http.Handler
	down atomic.Bool
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.down.Load() {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	o.h.ServeHTTP(w, r)
}

// TestSSE: an SSE upstream works, fails fast while its stream is lost and
// reconnects in the background.
func TestSSE(t *testing.T) {
	gate := &outage{h: mcptest.SSEHandler(mcptest.Options{Name: "sse"})}
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)

	opts := testOptions()
	// Every failed reconnect counts as a breaker failure; this test is
	// about reconnecting, TestSSEBreaker about the breaker.
	opts.BreakerFailures = 1 << 20
	h := newHarness(t, opts)
	h.apply(switchboard.ServerSpec{Name: "sse", Transport: switchboard.TransportSSE, URL: ts.URL})

	if got := h.text("echo", `{"text":"over sse"}`); got != "over sse" {
		t.Fatalf("echo = %q", got)
	}
	_, err := h.call("rpc_error", "{}")
	var rpc *switchboard.RPCError
	if !errors.As(err, &rpc) || rpc.Code != switchboard.CodeInvalidParams || string(rpc.Data) != `{"field":"x"}` {
		t.Fatalf("rpc_error: err = %v, want RPCError -32602 with data {\"field\":\"x\"}", err)
	}
	res, err := h.call("exotic", `{"id":"a"}`)
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(res) || countBig(res) != 2 {
		t.Errorf("exotic over SSE lost the big integers: %s", res)
	}

	mark := h.mark()
	gate.down.Store(true)
	ts.CloseClientConnections()
	h.waitFor("sse to leave ready", func() bool { return h.sawSince(mark, "sse", switchboard.StateFailed) })

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	begin := time.Now()
	_, err = h.m.Call(ctx, switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	blocked := ctx.Err() != nil
	cancel()
	if blocked {
		t.Fatalf("call while disconnected blocked until its deadline (%s): %v", time.Since(begin), err)
	}
	if !errors.Is(err, switchboard.ErrUnavailable) || errors.Is(err, switchboard.ErrTimeout) {
		t.Fatalf("call while disconnected: err = %v, want ErrUnavailable at once", err)
	}
	if _, ok := h.m.Catalog().Lookup("echo"); !ok {
		t.Error("tools vanished from the catalog while reconnecting")
	}

	mark = h.mark()
	gate.down.Store(false)
	h.waitFor("sse to reconnect", func() bool {
		return h.sawSince(mark, "sse", switchboard.StateReady) && h.status("sse").State == switchboard.StateReady
	})
	if got := h.text("echo", `{"text":"again"}`); got != "again" {
		t.Fatalf("echo after reconnect = %q", got)
	}
}

// TestSSEBreaker: failed reconnects of a lost SSE stream open the breaker
// like any connect failures; calls then fail at once, and the one retry
// comes when the cooldown ends, not a backoff step later.
func TestSSEBreaker(t *testing.T) {
	const cooldown = 300 * time.Millisecond
	start := func(t *testing.T, failures uint32, reconnectMin, reconnectMax time.Duration) (*harness, *outage, *httptest.Server) {
		gate := &outage{h: mcptest.SSEHandler(mcptest.Options{Name: "sse"})}
		ts := httptest.NewServer(gate)
		t.Cleanup(ts.Close)
		opts := testOptions()
		opts.BreakerFailures, opts.BreakerCooldown = failures, cooldown
		opts.ReconnectMin, opts.ReconnectMax = reconnectMin, reconnectMax
		h := newHarness(t, opts)
		h.apply(switchboard.ServerSpec{Name: "sse", Transport: switchboard.TransportSSE, URL: ts.URL})
		h.tools()
		h.waitState("sse", switchboard.StateReady)
		return h, gate, ts
	}
	breakerState := func(h *harness) gobreaker.State {
		h.m.mu.Lock()
		u := h.m.byName["sse"]
		h.m.mu.Unlock()
		return u.breaker.State()
	}

	t.Run("retry when the cooldown ends", func(t *testing.T) {
		// Two failed reconnects (at 1s and 3s) open the breaker; the next
		// backoff step (4s) is far longer than the cooldown, as in
		// production (up to 30s against 60s).
		h, gate, ts := start(t, 2, time.Second, 30*time.Second)
		mark := h.mark()
		gate.down.Store(true)
		ts.CloseClientConnections()
		h.waitFor("the breaker to open", func() bool { return h.sawSince(mark, "sse", switchboard.StateUnavailable) })
		opened := time.Now()
		if st := breakerState(h); st == gobreaker.StateClosed { // half-open if we looked late
			t.Fatalf("server unavailable with the breaker %s", st)
		}

		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		blocked := ctx.Err() != nil
		cancel()
		if blocked || !errors.Is(err, switchboard.ErrUnavailable) {
			t.Fatalf("call with the breaker open: err = %v (blocked %v), want ErrUnavailable at once", err, blocked)
		}

		mark = h.mark()
		gate.down.Store(false)
		h.waitFor("sse to reconnect", func() bool {
			return h.sawSince(mark, "sse", switchboard.StateReady) && h.status("sse").State == switchboard.StateReady
		})
		// Generous for a loaded machine, yet well below the backoff step
		// (4s) a loop blind to the cooldown would wait.
		if d, limit := time.Since(opened), cooldown+2500*time.Millisecond; d > limit {
			t.Errorf("ready again %s after the breaker opened; want within the cooldown (%s) plus a margin (%s)", d, cooldown, limit)
		}
		if st := breakerState(h); st != gobreaker.StateClosed {
			t.Errorf("breaker %s after a successful reconnect, want closed", st)
		}
		if got := h.text("echo", `{"text":"back"}`); got != "back" {
			t.Fatalf("echo after reconnect = %q", got)
		}
	})

	t.Run("status names the cause once", func(t *testing.T) {
		// Backoff steps far below the cooldown: a loop that kept knocking
		// on the open breaker would rewrite the status on every step.
		h, gate, ts := start(t, 1, 5*time.Millisecond, 20*time.Millisecond)
		mark := h.mark()
		gate.down.Store(true)
		ts.CloseClientConnections()
		worst, text := 0, ""
		h.waitFor("a failed half-open retry", func() bool {
			st := h.status("sse")
			if n := strings.Count(st.LastError, sseLost); n > worst {
				worst, text = n, st.LastError
			}
			n := 0
			for _, e := range h.eventsSnapshot()[mark:] {
				if e.Server == "sse" && e.State == switchboard.StateUnavailable {
					n++
				}
			}
			return n >= 2
		})
		if worst > 1 {
			t.Errorf("status repeats %q %d times: %q", sseLost, worst, text)
		}
		if st := h.status("sse"); !strings.HasPrefix(st.LastError, sseLost+`server "sse": cannot connect`) {
			t.Errorf("LastError = %q, want %q and the cause", st.LastError, sseLost)
		}

		mark = h.mark()
		gate.down.Store(false)
		h.waitFor("sse to reconnect", func() bool {
			return h.sawSince(mark, "sse", switchboard.StateReady) && h.status("sse").State == switchboard.StateReady
		})
		if st := h.status("sse"); st.LastError != "" {
			t.Errorf("LastError after reconnect = %q, want none", st.LastError)
		}
	})
}

func countBig(b []byte) int {
	n := 0
	for i := 0; i+len(mcptest.BigInt) <= len(b); i++ {
		if string(b[i:i+len(mcptest.BigInt)]) == mcptest.BigInt {
			n++
		}
	}
	return n
}

// sessionGate forwards to a streamable HTTP handler but, once forget has
// been called, answers 404 for every session seen so far, like a server
// that restarted and lost its sessions. With forgetOnCall set, it answers
// 404 to every tools/call, like a server that loses the session each time.
type sessionGate struct {
	h            http.Handler
	forgetOnCall atomic.Bool
	toolCalls    atomic.Int32 // tools/call requests received
	mu           sync.Mutex
	seen         map[string]bool
	forgotten    map[string]bool
}

func newSessionGate(h http.Handler) *sessionGate {
	return &sessionGate{h: h, seen: map[string]bool{}, forgotten: map[string]bool{}}
}

func (g *sessionGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	isCall := false
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		isCall = json.Unmarshal(body, &m) == nil && m.Method == "tools/call"
	}
	if isCall {
		g.toolCalls.Add(1)
	}
	g.mu.Lock()
	gone := g.forgotten[id] || isCall && id != "" && g.forgetOnCall.Load()
	if id != "" {
		g.seen[id] = true
	}
	g.mu.Unlock()
	if gone {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	g.h.ServeHTTP(w, r)
}

func (g *sessionGate) forget() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.seen {
		g.forgotten[id] = true
	}
}

func (g *sessionGate) sessions() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.seen)
}

// gatedStreamable serves the fixture over streamable HTTP behind a
// sessionGate and configures it as server "http".
func gatedStreamable(t *testing.T) (*harness, *sessionGate) {
	gate := newSessionGate(mcptest.StreamableHandler(mcptest.Options{Name: "http"}))
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	h := newHarness(t, testOptions())
	h.apply(switchboard.ServerSpec{Name: "http", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL})
	return h, gate
}

// TestStreamable: a streamable HTTP upstream works, and when the server
// forgets the session (404), the call that finds out re-initializes and
// is sent again: it succeeds.
func TestStreamable(t *testing.T) {
	h, gate := gatedStreamable(t)
	if got := h.text("echo", `{"text":"over http"}`); got != "over http" {
		t.Fatalf("echo = %q", got)
	}
	_, err := h.call("rpc_error", "{}")
	var rpc *switchboard.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("rpc_error: err = %v (%T), want *switchboard.RPCError", err, err)
	}
	want := &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: "bad argument x", Data: json.RawMessage(`{"field":"x"}`)}
	if diff := cmp.Diff(want, rpc, rawJSONAsString); diff != "" {
		t.Errorf("RPCError (-want +got):\n%s", diff)
	}
	res, err := h.call("exotic", `{"id":"a"}`)
	if err != nil {
		t.Fatal(err)
	}
	if countBig(res) != 2 {
		t.Errorf("exotic over streamable HTTP lost the big integers: %s", res)
	}
	if n := gate.sessions(); n != 1 {
		t.Fatalf("%d sessions before the restart, want 1", n)
	}

	gate.forget()
	calls := gate.toolCalls.Load()
	if got := h.text("echo", `{"text":"new session"}`); got != "new session" {
		t.Fatalf("first call after the server forgot the session = %q", got)
	}
	if n := gate.toolCalls.Load() - calls; n != 2 {
		t.Errorf("the server got the call %d times, want 2 (404, then on the new session)", n)
	}
	if n := gate.sessions(); n != 2 {
		t.Errorf("%d sessions after the restart, want 2", n)
	}
	if st := h.status("http"); st.State != switchboard.StateReady {
		t.Errorf("state = %q, want ready", st.State)
	}
	if got := h.text("echo", `{"text":"again"}`); got != "again" {
		t.Fatalf("echo on the new session = %q", got)
	}
	if n := countState(h.statesOf("http"), switchboard.StateConnecting); n != 2 {
		t.Errorf("connected %d times, want 2", n)
	}
}

// TestStreamableSessionRetryOnce: a call that meets a forgotten session is
// sent again once only; when the new session is forgotten too, the call
// fails with ErrUnavailable.
func TestStreamableSessionRetryOnce(t *testing.T) {
	h, gate := gatedStreamable(t)
	h.tools()

	gate.forgetOnCall.Store(true)
	_, err := h.call("echo", `{"text":"x"}`)
	if !errors.Is(err, switchboard.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if n := gate.toolCalls.Load(); n != 2 {
		t.Errorf("the server got the call %d times, want 2 (the call and one retry)", n)
	}
	if n := gate.sessions(); n != 2 {
		t.Errorf("%d sessions, want 2 (one re-initialize)", n)
	}

	gate.forgetOnCall.Store(false)
	if got := h.text("echo", `{"text":"back"}`); got != "back" {
		t.Fatalf("echo once the server keeps sessions = %q", got)
	}
}

// TestStreamableProgressAndListChanged: notifications from a streamable
// HTTP upstream reach the gateway.
func TestStreamableProgressAndListChanged(t *testing.T) {
	ts := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "http"}))
	t.Cleanup(ts.Close)
	h := newHarness(t, testOptions())
	h.apply(switchboard.ServerSpec{Name: "http", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL})
	h.tools()

	got := h.progressTokens(3)
	if diff := cmp.Diff([]string{`"tok-1"`, `"tok-1"`, `"tok-1"`}, got); diff != "" {
		t.Errorf("progress tokens (-want +got):\n%s", diff)
	}

	h.text("add_tool", `{"name":"newtool"}`)
	h.waitFor("newtool in the catalog", func() bool {
		_, ok := h.m.Catalog().Lookup("newtool")
		return ok
	})
}

// TestSSEDropFailsCallInFlight: a call waiting for its answer when the SSE
// stream drops fails with ErrUnavailable instead of waiting for its
// timeout, and the upstream reconnects in the background.
func TestSSEDropFailsCallInFlight(t *testing.T) {
	gate := &outage{h: mcptest.SSEHandler(mcptest.Options{Name: "sse"})}
	ts := httptest.NewServer(gate)
	t.Cleanup(ts.Close)
	opts := testOptions()
	opts.BreakerFailures = 1 << 20
	h := newHarness(t, opts)
	h.apply(switchboard.ServerSpec{Name: "sse", Transport: switchboard.TransportSSE, URL: ts.URL})
	h.tools()

	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := h.m.Call(context.Background(), switchboard.CallRequest{Tool: "slow", Arguments: json.RawMessage(`{"ms":2000}`), Meta: json.RawMessage(`{"progressToken":"s"}`), OnProgress: func(json.RawMessage) { once.Do(func() { close(started) }) }})
		errc <- err
	}()
	select {
	case <-started:
	case <-time.After(waitTimeout):
		t.Fatal("slow never reported that it started")
	}
	mark := h.mark()
	gate.down.Store(true)
	ts.CloseClientConnections()
	select {
	case err := <-errc:
		if !errors.Is(err, switchboard.ErrUnavailable) {
			t.Fatalf("call in flight: err = %v, want ErrUnavailable", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("call in flight when the stream dropped never returned")
	}
	gate.down.Store(false)
	h.waitFor("sse to reconnect in the background", func() bool {
		return h.sawSince(mark, "sse", switchboard.StateReady) && h.status("sse").State == switchboard.StateReady
	})
	if got := h.text("echo", `{"text":"again"}`); got != "again" {
		t.Fatalf("echo after reconnect = %q", got)
	}
}

// remoteFixture is the fixture served over one remote transport.
type remoteFixture struct {
	transport switchboard.Transport
	handler   http.Handler
}

// remoteFixtures returns a fresh fixture for each remote transport.
func remoteFixtures() []remoteFixture {
	return []remoteFixture{
		{switchboard.TransportSSE, mcptest.SSEHandler(mcptest.Options{Name: "sse"})},
		{switchboard.TransportStreamableHTTP, mcptest.StreamableHandler(mcptest.Options{Name: "http"})},
	}
}

// TestRemoteCallTimeout: over HTTP too, a per-server CallTimeout ends a
// slow call with ErrTimeout, tells the server, and keeps the connection.
func TestRemoteCallTimeout(t *testing.T) {
	for _, tc := range remoteFixtures() {
		t.Run(string(tc.transport), func(t *testing.T) {
			ts := httptest.NewServer(tc.handler)
			t.Cleanup(ts.Close)
			h := newHarness(t, testOptions())
			spec := switchboard.ServerSpec{Name: "r", Transport: tc.transport, URL: ts.URL, CallTimeout: time.Second}
			h.apply(spec)

			// The fixture's counter is per process, and HTTP fixtures run in
			// this one: count from here.
			n0, err := strconv.Atoi(h.text("cancelled_count", "{}"))
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			_, err = h.m.Call(ctx, switchboard.CallRequest{Tool: "slow", Arguments: json.RawMessage(`{"ms":60000}`), Meta: json.RawMessage(`{"progressToken":"t"}`), OnProgress: func(json.RawMessage) {
				select {
				case started <- struct{}{}:
				default:
				}
			}})
			if !errors.Is(err, switchboard.ErrTimeout) {
				t.Fatalf("err = %v, want ErrTimeout", err)
			}
			select {
			case <-started:
			default:
				t.Fatal("slow handler never started")
			}
			if got := h.text("cancelled_count", `{"atLeast":`+strconv.Itoa(n0+1)+`}`); got != strconv.Itoa(n0+1) {
				t.Errorf("cancelled_count = %s, want %d", got, n0+1)
			}
			if st := h.status("r"); st.State != switchboard.StateReady {
				t.Errorf("state = %q, want ready", st.State)
			}
			if n := countState(h.statesOf("r"), switchboard.StateConnecting); n != 1 {
				t.Errorf("connected %d times, want once", n)
			}
		})
	}
}

// TestRemoteHeaders: every request to a remote upstream carries the
// configured headers, and none of the client's, even when the call runs
// on the client's own request context.
func TestRemoteHeaders(t *testing.T) {
	configured := map[string]string{"Authorization": "Bearer upstream-token", "X-Api-Key": "key-123"}
	const clientSecret = "client-secret-4711"
	for _, tc := range remoteFixtures() {
		t.Run(string(tc.transport), func(t *testing.T) {
			upstream := &headerLog{h: tc.handler}
			ts := httptest.NewServer(upstream)
			t.Cleanup(ts.Close)
			h := newHarness(t, testOptions())
			h.apply(switchboard.ServerSpec{Name: "r", Transport: tc.transport, URL: ts.URL, Headers: configured})

			// A client request to the gateway; the call (and the lazy
			// connect it triggers) runs on its context.
			edge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				res, err := h.m.Call(r.Context(), switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)})
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				_, _ = w.Write(res)
			}))
			t.Cleanup(edge.Close)
			req, err := http.NewRequest(http.MethodPost, edge.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+clientSecret)
			req.Header.Set("Cookie", "session="+clientSecret)
			req.Header.Set("X-Client-Only", clientSecret)
			resp, err := edge.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("call through the edge: %s: %s", resp.Status, body)
			}
			if got := resultText(t, body); got != "hi" {
				t.Fatalf("echo = %q", got)
			}

			reqs := upstream.requests()
			if !slices.ContainsFunc(reqs, func(r loggedRequest) bool { return r.call }) {
				t.Fatalf("upstream saw no tools/call among %d requests", len(reqs))
			}
			for i, r := range reqs {
				hdr := r.header
				for k, v := range configured {
					if got := hdr.Values(k); !slices.Equal(got, []string{v}) {
						t.Errorf("request %d: %s = %q, want [%q]", i, k, got, v)
					}
				}
				for k, vs := range hdr {
					for _, v := range vs {
						if strings.Contains(v, clientSecret) {
							t.Errorf("request %d: client header reached the upstream: %s: %s", i, k, v)
						}
					}
				}
				if _, ok := hdr["Cookie"]; ok {
					t.Errorf("request %d carries a Cookie header", i)
				}
			}
		})
	}
}
