package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// blockingGateway answers calls only when released.
type blockingGateway struct {
	fakeGateway
	release chan struct{}
}

func (b blockingGateway) Call(ctx context.Context, _ string, args, _ json.RawMessage, _ func(json.RawMessage)) (json.RawMessage, error) {
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
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`
	for i := range maxLegacyInFlight {
		if code := postMessage(h, ls.id, call); code != http.StatusAccepted {
			t.Fatalf("message %d: %d", i, code)
		}
	}
	if code := postMessage(h, ls.id, call); code != http.StatusTooManyRequests {
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
