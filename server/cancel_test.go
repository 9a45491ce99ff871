package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// progressingGateway sends one progress notification, then waits for its
// call to be cancelled.
type progressingGateway struct{ fakeGateway }

func (progressingGateway) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	if req.OnProgress != nil {
		req.OnProgress(json.RawMessage(`{"progressToken":"p","progress":1}`))
	}
	<-ctx.Done()
	return nil, switchboard.ErrCanceled
}

// post sends one JSON-RPC message on session sid to h.
func post(h http.Handler, sid, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const cancel5 = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`

// TestCancelledCallGetsNoResponse: the MCP specification says the
// receiver of notifications/cancelled should not answer the cancelled
// request (it answered -32603 "cancelled"). On streamable HTTP the POST
// still waiting for its answer gets 202 and no body, one that already
// streams progress ends without a response; on legacy SSE nothing goes
// down the stream.
func TestCancelledCallGetsNoResponse(t *testing.T) {
	call5 := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p"}}}`
	cat := switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "s"}})
	for _, tt := range []struct {
		name string
		gw   Gateway
		want func(t *testing.T, rec *httptest.ResponseRecorder)
	}{
		{"json", cancellableGateway{fakeGateway{cat: cat}, make(chan struct{})}, func(t *testing.T, rec *httptest.ResponseRecorder) {
			if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 {
				t.Errorf("cancelled call: HTTP %d %q, want 202 without a body", rec.Code, rec.Body)
			}
		}},
		{"sse", progressingGateway{fakeGateway{cat: cat}}, func(t *testing.T, rec *httptest.ResponseRecorder) {
			body := rec.Body.String()
			if rec.Code != http.StatusOK || !strings.Contains(body, "notifications/progress") || strings.Contains(body, `"id":5`) {
				t.Errorf("cancelled call's stream: HTTP %d %q, want the progress and no response", rec.Code, body)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.gw, Options{})
			defer s.Shutdown(context.Background())
			h := s.Handler()
			sid := initializeOn(h).Header().Get("Mcp-Session-Id")
			if sid == "" {
				t.Fatal("initialize gave no session")
			}
			done := make(chan *httptest.ResponseRecorder, 1)
			go func() { done <- post(h, sid, call5) }()
			for {
				if _, ok := s.inflight.Load(sid + "\x005"); ok {
					break
				}
				runtime.Gosched()
			}
			if rec := post(h, sid, cancel5); rec.Code != http.StatusAccepted {
				t.Fatalf("notifications/cancelled: HTTP %d", rec.Code)
			}
			tt.want(t, <-done)
		})
	}

	t.Run("legacy", func(t *testing.T) {
		s := New(cancellableGateway{fakeGateway{cat: cat}, make(chan struct{})}, Options{})
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close) // last: after the stream and the server end
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
		endpoint, lines := openLegacy(t, srv)
		startLegacyCall(t, s, endpoint)
		_, id, _ := strings.Cut(endpoint, "sessionId=")
		if code := postMessage(s.Handler(), id, cancel5); code != http.StatusAccepted {
			t.Fatalf("notifications/cancelled: HTTP %d", code)
		}
		// Once the call has let go of its slot, whatever it sent is on
		// the stream ahead of the next answer.
		ls := s.legacy.get(id)
		for len(ls.slots) > 0 {
			runtime.Gosched()
		}
		if code := postMessage(s.Handler(), id, `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`); code != http.StatusAccepted {
			t.Fatalf("tools/list: HTTP %d", code)
		}
		if got := <-lines; !strings.Contains(got, `"id":6`) {
			t.Errorf("first message after the cancellation: %.200s, want the answer to tools/list and nothing for the cancelled call", got)
		}
	})
}
