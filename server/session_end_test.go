package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// endLog records OnSessionEnd calls.
type endLog struct {
	mu    sync.Mutex
	ended []string
	ch    chan string
}

func newEndLog() *endLog { return &endLog{ch: make(chan string, 64)} }

func (l *endLog) onEnd(session string) {
	l.mu.Lock()
	l.ended = append(l.ended, session)
	l.mu.Unlock()
	l.ch <- session
}

func (l *endLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ended)
}

// wait fails the test unless session is reported ended within a deadline.
func (l *endLog) wait(t *testing.T, session string) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case got := <-l.ch:
			if got == session {
				return
			}
		case <-deadline.C:
			t.Fatalf("session %q never reported ended; reported: %v", session, l.all())
		}
	}
}

// once fails the test unless every session in want was reported exactly
// once and nothing else was.
func (l *endLog) once(t *testing.T, want ...string) {
	t.Helper()
	got := l.all()
	slices.Sort(got)
	want = slices.Clone(want)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("OnSessionEnd calls %v, want each of %v once", got, want)
	}
}

// openLegacyCtx opens GET /sse with a request ctx the test can cancel
// (the client dropping its stream) and returns the session id.
func openLegacyCtx(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/sse", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_, id, _ := strings.Cut(data, "sessionId=")
			return id
		}
	}
	t.Fatal("legacy stream ended before its endpoint event")
	return ""
}

func TestOnSessionEnd(t *testing.T) {
	cat := switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})

	t.Run("DELETE", func(t *testing.T) {
		log := newEndLog()
		s := New(fakeGateway{cat: cat}, Options{OnSessionEnd: log.onEnd})
		defer s.Shutdown(context.Background())
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		sid := initializeSession(t, srv.URL+"/mcp")
		for range 2 { // the second DELETE finds the session gone
			req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/mcp", nil)
			req.Header.Set("Mcp-Session-Id", sid)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		log.wait(t, sid)
		_ = s.Shutdown(context.Background())
		log.once(t, sid)
	})

	t.Run("idle expiry", func(t *testing.T) {
		log := newEndLog()
		s := New(fakeGateway{cat: cat}, Options{OnSessionEnd: log.onEnd, SessionIdleTTL: 50 * time.Millisecond})
		defer s.Shutdown(context.Background())
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		sid := initializeSession(t, srv.URL+"/mcp")
		log.wait(t, sid)
		_ = s.Shutdown(context.Background())
		log.once(t, sid)
	})

	t.Run("legacy stream dropped", func(t *testing.T) {
		log := newEndLog()
		s := New(fakeGateway{cat: cat}, Options{OnSessionEnd: log.onEnd})
		defer s.Shutdown(context.Background())
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		ctx, drop := context.WithCancel(context.Background())
		sid := openLegacyCtx(t, ctx, srv.URL)
		if !strings.HasPrefix(sid, "sse-") {
			t.Fatalf("legacy session id %q", sid)
		}
		drop()
		log.wait(t, sid)
		_ = s.Shutdown(context.Background())
		log.once(t, sid)
	})

	t.Run("shutdown", func(t *testing.T) {
		log := newEndLog()
		s := New(fakeGateway{cat: cat}, Options{OnSessionEnd: log.onEnd})
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		a := initializeSession(t, srv.URL+"/mcp")
		b := initializeSession(t, srv.URL+"/mcp")
		// One of them with its GET stream open, which mcp-go tracks.
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", b)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		legacy := openLegacyCtx(t, context.Background(), srv.URL)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		// Reported before Shutdown returns, each once.
		log.once(t, a, b, legacy)
		_ = s.Shutdown(ctx)
		log.once(t, a, b, legacy)
	})
}

// sessionGateway records the CallRequests the edge makes.
type sessionGateway struct {
	fakeGateway
	got chan switchboard.CallRequest
}

func (g sessionGateway) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	g.got <- req
	return g.fakeGateway.Call(ctx, req)
}

// The edge names the project and the client's session in every call, for
// both transports.
func TestCallCarriesProjectAndSession(t *testing.T) {
	gw := sessionGateway{fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})}, make(chan switchboard.CallRequest, 4)}
	s := New(gw, Options{Project: "p1"})
	defer s.Shutdown(context.Background())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	sid := initializeSession(t, srv.URL+"/mcp")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"x":1},"_meta":{"k":"v"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := <-gw.got
	if got.Project != "p1" || got.Session != sid || got.Tool != "echo" || string(got.Arguments) != `{"x":1}` || string(got.Meta) != `{"k":"v"}` || got.OnProgress == nil {
		t.Fatalf("streamable call request = %+v", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	legacy := openLegacyCtx(t, ctx, srv.URL)
	if code := postMessage(s.Handler(), legacy, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`); code != http.StatusAccepted {
		t.Fatalf("POST /message: %d", code)
	}
	got = <-gw.got
	if got.Project != "p1" || got.Session != legacy || got.Tool != "echo" {
		t.Fatalf("legacy call request = %+v", got)
	}
}
