package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSession: a session opens, a request's answer is found in an event
// stream among notifications and other ids, errors come back typed, and
// DELETE ends the session.
func TestSession(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		got = append(got, r.Method+" "+m.Method+" "+r.Header.Get("Mcp-Session-Id")+" "+r.Header.Get("Mcp-Protocol-Version"))
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}`)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"id\":2,\n"+"data: \"result\":{\"ok\":true}}\n\n")
		case "tools/list":
			io.WriteString(w, `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad","data":{"field":"x"}}}`)
		case "ping":
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"jsonrpc":"2.0","id":4,"error":{"code":-32001,"message":"no session"}}`)
		}
	}))
	defer srv.Close()

	var notes []string
	s := &Session{Endpoint: srv.URL, Do: srv.Client().Do, Client: "test", ClientVersion: "1",
		Notified: func(method string, params json.RawMessage) { notes = append(notes, method+" "+string(params)) }}
	ctx := context.Background()
	if err := s.Initialize(ctx); err != nil {
		t.Fatalf("Initialize: %v", err)
	}
	res, err := s.Request(ctx, "tools/call", map[string]any{"name": "echo"})
	if err != nil || string(res) != `{"ok":true}` {
		t.Errorf("tools/call = %s, %v; want the result of id 2", res, err)
	}
	if diff := cmp.Diff([]string{`notifications/progress {"progress":1}`}, notes); diff != "" {
		t.Errorf("notifications (-want +got):\n%s", diff)
	}
	var re *RPCError
	if _, err := s.Request(ctx, "tools/list", nil); !errors.As(err, &re) || re.Code != -32602 || !strings.Contains(err.Error(), `"field"`) {
		t.Errorf("tools/list: got %v, want RPCError -32602 with data", err)
	}
	var he *HTTPError
	if _, err := s.Request(ctx, "ping", nil); !errors.As(err, &he) || he.Status != http.StatusNotFound || he.RPC("ping") == nil || he.RPC("ping").Code != -32001 {
		t.Errorf("ping: got %v, want HTTPError 404 holding JSON-RPC error -32001", err)
	}
	s.Close(ctx)
	want := []string{"POST initialize  ", "POST notifications/initialized s1 2025-06-18", "POST tools/call s1 2025-06-18",
		"POST tools/list s1 2025-06-18", "POST ping s1 2025-06-18", "DELETE  s1 2025-06-18"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

// TestSessionWithoutID: an initialize answer without Mcp-Session-Id is
// an error, and no session is left to close.
func TestSessionWithoutID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer srv.Close()
	s := &Session{Endpoint: srv.URL, Do: srv.Client().Do}
	if err := s.Initialize(context.Background()); err == nil || s.ID != "" {
		t.Errorf("Initialize = %v with ID %q; want an error and no session", err, s.ID)
	}
}
