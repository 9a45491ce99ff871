package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// lazyGateway lists its tools only once Tools is called (as a project's
// servers connect on first need): Catalog is empty before.
type lazyGateway struct {
	cat    *switchboard.Catalog
	listed atomic.Bool
	calls  atomic.Int32
}

func (g *lazyGateway) Tools(context.Context) *switchboard.Catalog {
	g.listed.Store(true)
	return g.cat
}

func (g *lazyGateway) Catalog() *switchboard.Catalog {
	if !g.listed.Load() {
		return switchboard.NewCatalog(0, nil)
	}
	return g.cat
}

func (g *lazyGateway) Call(_ context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	g.calls.Add(1)
	return json.RawMessage(`{"content":[{"type":"text","text":"project"}]}`), nil
}

func (g *lazyGateway) Status() []switchboard.ServerStatus { return nil }

// ownTools gives session "s1" the tools "shared" and "mine".
type ownTools struct{ calls atomic.Int32 }

func (o *ownTools) SessionCatalog(session string) *switchboard.Catalog {
	if session != "s1" {
		return nil
	}
	return switchboard.NewCatalog(1, []switchboard.Tool{
		{Name: "shared", Server: "cat", UpstreamName: "shared", Raw: json.RawMessage(`{"name":"shared","from":"session"}`)},
		{Name: "mine", Server: "cat", UpstreamName: "mine", Raw: json.RawMessage(`{"name":"mine"}`)},
	})
}

func (o *ownTools) CallSessionTool(_ context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	o.calls.Add(1)
	return json.RawMessage(`{"content":[{"type":"text","text":"session ` + req.Tool + `"}]}`), nil
}

type recordObserver struct {
	last atomic.Pointer[switchboard.ToolCallRecord]
}

func (r *recordObserver) ObserveCall(rec switchboard.ToolCallRecord) { r.last.Store(&rec) }

func TestSessionToolsPrecedenceAndVisibility(t *testing.T) {
	gw := &lazyGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{
		{Name: "shared", Server: "up", UpstreamName: "shared", Raw: json.RawMessage(`{"name":"shared","from":"project"}`)},
	})}
	own := &ownTools{}
	obs := &recordObserver{}
	s := New(gw, Options{SessionTools: own, Observer: obs})
	defer s.Shutdown(context.Background())
	call := func(session, tool string) string {
		t.Helper()
		m := &rpcMessage{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`{"name":"` + tool + `"}`)}
		return string(s.dispatch(context.Background(), session, m, nil))
	}

	// Before any tools/list the project's servers have listed nothing,
	// yet the project's "shared" still wins over the session's.
	if got := call("s1", "shared"); !strings.Contains(got, `"text":"project"`) || own.calls.Load() != 0 {
		t.Fatalf("shared before tools/list answered %s (session calls %d): the project's tool must win", got, own.calls.Load())
	}
	if got := call("s1", "mine"); !strings.Contains(got, "session mine") {
		t.Fatalf("mine answered %s", got)
	}
	if rec := obs.last.Load(); rec == nil || rec.Server != "cat" || rec.Tool != "mine" {
		t.Fatalf("call log record %+v, want server cat", rec)
	}

	list := func(session string) string {
		m := &rpcMessage{ID: json.RawMessage(`2`), Method: "tools/list"}
		return string(s.dispatch(context.Background(), session, m, nil))
	}
	got := list("s1")
	if !strings.Contains(got, `"from":"project"`) || strings.Contains(got, `"from":"session"`) || !strings.Contains(got, `{"name":"mine"}`) {
		t.Fatalf("s1's tools/list %s: want the project's shared and the session's mine, once each", got)
	}
	for _, other := range []string{"s2", ""} { // another session; no session (plain POST, 2026-07-28)
		if got := list(other); strings.Contains(got, "mine") {
			t.Fatalf("session %q lists s1's tool: %s", other, got)
		}
		before := own.calls.Load()
		call(other, "mine")
		if own.calls.Load() != before {
			t.Fatalf("session %q reached s1's tool", other)
		}
	}
}

// callerTools gives one sessionless caller (key) the tool "mine".
type callerTools struct{ key atomic.Pointer[string] }

func (c *callerTools) SessionCatalog(session string) *switchboard.Catalog {
	if k := c.key.Load(); k == nil || *k != session {
		return nil
	}
	return switchboard.NewCatalog(1, []switchboard.Tool{{Name: "mine", Server: "cat", UpstreamName: "mine", Raw: json.RawMessage(`{"name":"mine"}`)}})
}

func (c *callerTools) CallSessionTool(context.Context, switchboard.CallRequest) (json.RawMessage, error) {
	return json.RawMessage(`{"content":[]}`), nil
}

// TestSessionlessCaller: a request without a session is named by its
// token and clientInfo (one key per pair); that caller's own tools are in
// its tools/list only, and SessionToolsChanged of its key wakes only its
// listen streams.
func TestSessionlessCaller(t *testing.T) {
	own := &callerTools{}
	s := New(&lazyGateway{cat: switchboard.NewCatalog(1, nil)}, Options{SessionTools: own,
		Principal: func(r *http.Request) string { return r.Header.Get("Authorization") }})
	defer s.Shutdown(context.Background())
	key := func(token, client string) string {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", token)
		m := &rpcMessage{Params: json.RawMessage(`{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"}}}`)}
		return callerOf(s.withCaller(r, m), "")
	}
	a := key("t1", "a")
	if a != key("t1", "a") || a == key("t1", "b") || a == key("t2", "a") || !isCaller(a) {
		t.Fatalf("caller keys: the same token and client must give one key, another token or client another")
	}
	own.key.Store(&a)
	list := func(caller string) string {
		ctx := context.WithValue(context.Background(), callerCtxKey{}, caller)
		return string(s.dispatch(ctx, "", &rpcMessage{ID: json.RawMessage(`1`), Method: "tools/list"}, nil))
	}
	if !strings.Contains(list(a), `"mine"`) || strings.Contains(list(key("t1", "b")), `"mine"`) {
		t.Fatal("a caller's own tools must be in its tools/list and in no other caller's")
	}
	la, lb := s.listens.add(listenTools, a), s.listens.add(listenTools, key("t1", "b"))
	defer s.listens.remove(la)
	defer s.listens.remove(lb)
	s.SessionToolsChanged(a)
	if la.pending.Load() != listenTools || lb.pending.Load() != 0 {
		t.Fatalf("pending after a change of caller a's tools: a %b, b %b; want a's stream only", la.pending.Load(), lb.pending.Load())
	}
}
