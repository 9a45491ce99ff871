package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// blockingGateway answers calls only when released.
type blockingGateway struct {
	fakeGateway
	release chan struct{}
}

func (b blockingGateway) Call(ctx context.Context, _ switchboard.CallRequest) (json.RawMessage, error) {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return json.RawMessage(`{"content":[]}`), nil
}

func postMessage(h http.Handler, id, body string) int {
	req := httptest.NewRequest(http.MethodPost, "/message?sessionId="+id, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// One legacy client cannot pin unbounded goroutines and bodies: beyond
// maxLegacyInFlight unanswered messages it gets 429.
func TestLegacyInFlightLimit(t *testing.T) {
	gw := blockingGateway{fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})}, make(chan struct{})}
	s := New(gw, Options{})
	ls := s.legacy.add(context.Background())
	h := s.Handler()
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo"}}`, id)
	}
	for i := range maxLegacyInFlight {
		if code := postMessage(h, ls.id, call(i)); code != http.StatusAccepted {
			t.Fatalf("message %d: %d", i, code)
		}
	}
	if code := postMessage(h, ls.id, call(maxLegacyInFlight)); code != http.StatusTooManyRequests {
		t.Fatalf("message beyond the limit: %d, want 429", code)
	}
	close(gw.release)
	s.legacy.remove(ls)
	_ = s.Shutdown(context.Background())
}

// A POST /message racing Shutdown is answered (202 or 503) and never
// panics the process (WaitGroup reuse).
func TestLegacyMessageDuringShutdown(t *testing.T) {
	for range 100 {
		s := New(fakeGateway{cat: switchboard.NewCatalog(1, nil)}, Options{})
		ls := s.legacy.add(context.Background())
		h := s.Handler()
		var wg sync.WaitGroup
		wg.Go(func() {
			for range 10 {
				code := postMessage(h, ls.id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
				if code != http.StatusAccepted && code != http.StatusServiceUnavailable {
					t.Errorf("status %d", code)
				}
			}
		})
		_ = s.Shutdown(context.Background())
		wg.Wait()
	}
}

// A request id still in flight on a session cannot be reused: the second
// call gets -32600 and the first stays cancellable.
func TestDuplicateInFlightID(t *testing.T) {
	gw := blockingGateway{fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})}, make(chan struct{})}
	s := New(gw, Options{})
	defer s.Shutdown(context.Background())
	m := &rpcMessage{JSONRPC: "2.0", ID: json.RawMessage(`7`), Method: "tools/call", Params: json.RawMessage(`{"name":"echo"}`)}
	first := make(chan []byte, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { first <- s.dispatch(ctx, "sess", m, nil) }()
	for {
		if _, ok := s.inflight.Load("sess\x007"); ok {
			break
		}
		select {
		case <-first:
			t.Fatal("first call returned early")
		default:
		}
		runtime.Gosched()
	}
	if got := string(s.dispatch(context.Background(), "sess", m, nil)); !strings.Contains(got, `"code":-32600`) {
		t.Fatalf("duplicate id: %s", got)
	}
	s.cancelled("sess", &rpcMessage{JSONRPC: "2.0", Method: "notifications/cancelled", Params: json.RawMessage(`{"requestId":7}`)})
	<-first // cancellation reached the first call
}

// Beyond MaxSessions, initialize gets 503 and no session is created.
func TestMaxSessions(t *testing.T) {
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, nil)}, Options{MaxSessions: 2})
	defer s.Shutdown(context.Background())
	h := s.Handler()
	for i, want := range []int{200, 200, 503} {
		rec := initializeOn(h)
		if rec.Code != want {
			t.Fatalf("initialize %d: %d, want %d: %s", i, rec.Code, want, rec.Body)
		}
	}
	if n := s.Sessions(); n != 2 {
		t.Fatalf("%d sessions, want 2", n)
	}
}

// MaxProjectSessions caps one edge even while the shared count
// (OpenSessions, all projects) has room.
func TestMaxProjectSessions(t *testing.T) {
	shared := 0
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, nil)}, Options{MaxSessions: 100, MaxProjectSessions: 1,
		OpenSessions: func() int { return shared }})
	defer s.Shutdown(context.Background())
	h := s.Handler()
	for i, want := range []int{200, 503} {
		rec := initializeOn(h)
		if rec.Code != want {
			t.Fatalf("initialize %d: %d, want %d: %s", i, rec.Code, want, rec.Body)
		}
		if want == 503 && !strings.Contains(rec.Body.String(), "MCP_SERVER_MAX_SESSIONS_PER_PROJECT") {
			t.Errorf("503 does not name the limit: %s", rec.Body)
		}
		shared = s.Sessions()
	}
	if n := s.Sessions(); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}
}

// cancellableGateway answers a call when released, or fails it when its
// context ends first.
type cancellableGateway struct {
	fakeGateway
	release chan struct{}
}

func (b cancellableGateway) Call(ctx context.Context, _ switchboard.CallRequest) (json.RawMessage, error) {
	select {
	case <-b.release:
		return json.RawMessage(`{"content":[{"type":"text","text":"finished"}]}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// openLegacy opens GET /sse on srv and returns the POST endpoint and a
// channel of the stream's data lines.
func openLegacy(t *testing.T, srv *httptest.Server) (string, <-chan string) {
	t.Helper()
	resp, err := http.Get(srv.URL + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				lines <- data
			}
		}
	}()
	return srv.URL + <-lines, lines
}

// startLegacyCall posts a tools/call on a legacy session and waits until
// the edge is running it.
func startLegacyCall(t *testing.T, s *Server, endpoint string) {
	t.Helper()
	resp, err := http.Post(endpoint, "application/json",
		strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /message: %d", resp.StatusCode)
	}
	_, id, _ := strings.Cut(endpoint, "sessionId=")
	for {
		if _, ok := s.inflight.Load(id + "\x005"); ok {
			return
		}
		runtime.Gosched()
	}
}

// A legacy call in flight when shutdown starts finishes, and its answer
// still goes down the client's stream before the stream ends.
func TestShutdownLetsLegacyCallsFinish(t *testing.T) {
	gw := cancellableGateway{fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})}, make(chan struct{})}
	s := New(gw, Options{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	endpoint, lines := openLegacy(t, srv)
	startLegacyCall(t, s, endpoint)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	for {
		s.goMu.Lock()
		closing := s.closing
		s.goMu.Unlock()
		if closing {
			break
		}
		runtime.Gosched()
	}
	if code := postMessage(s.Handler(), strings.SplitN(endpoint, "sessionId=", 2)[1], `{"jsonrpc":"2.0","id":6,"method":"ping"}`); code != http.StatusServiceUnavailable {
		t.Errorf("a new message during shutdown: %d, want 503", code)
	}
	close(gw.release)
	var got []string
	for l := range lines {
		got = append(got, l)
	}
	if len(got) != 1 || !strings.Contains(got[0], `"id":5`) || !strings.Contains(got[0], "finished") {
		t.Fatalf("stream after shutdown carried %q, want the call's result", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// At the shutdown deadline a legacy call still running is cancelled and
// Shutdown returns, saying so.
func TestShutdownDeadlineCancelsLegacyCalls(t *testing.T) {
	gw := cancellableGateway{fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})}, make(chan struct{})}
	s := New(gw, Options{})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	endpoint, _ := openLegacy(t, srv)
	startLegacyCall(t, s, endpoint)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("Shutdown past its deadline = %v, want an error naming the cancelled calls", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// callLogLine returns the "tool call" log line whose request_id is id.
func (l *lockedBuffer) callLogLine(t *testing.T, id string) map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(l.b.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "tool call" && m["request_id"] == id {
			return m
		}
	}
	t.Fatalf("no tool call log line with request_id %s in:\n%s", id, l.b.String())
	return nil
}

// A tool call's log line carries the request id (the client's
// X-Request-Id) and the session id, on both transports: a legacy answer
// runs after its POST has returned, on the session's context.
func TestCallLogsCarryRequestAndSession(t *testing.T) {
	logs := &lockedBuffer{}
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})},
		Options{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer s.Shutdown(context.Background())
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close) // after openLegacy closes its stream

	post := func(url, session, requestID, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Request-Id", requestID)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	init := post(srv.URL+"/mcp", "", "init-1", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	post(srv.URL+"/mcp", sid, "call-streamable", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	if m := logs.callLogLine(t, "call-streamable"); m["session_id"] != sid {
		t.Errorf("streamable call logged with session_id %v, want %s", m["session_id"], sid)
	}

	endpoint, lines := openLegacy(t, srv)
	post(endpoint, "", "call-legacy", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}`)
	<-lines // the answer: its log line was written before it was sent
	_, legacyID, _ := strings.Cut(endpoint, "sessionId=")
	if m := logs.callLogLine(t, "call-legacy"); m["session_id"] != legacyID {
		t.Errorf("legacy call logged with session_id %v, want %s", m["session_id"], legacyID)
	}
}

// initializeOn sends one initialize POST to h and returns the answer.
func initializeOn(h http.Handler) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
