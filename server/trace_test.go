package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/otlptest"
)

const (
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID      = "b7ad6b7169203331"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// toolErrorGateway answers the tool "tool_error" with isError true.
type toolErrorGateway struct{ fakeGateway }

func (g toolErrorGateway) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	if req.Tool == "tool_error" {
		return json.RawMessage(`{"content":[{"type":"text","text":"it failed"}],"isError":true}`), nil
	}
	return g.fakeGateway.Call(ctx, req)
}

// spanView is what a test compares of a span.
type spanView struct {
	Name     string
	Kind     trace.SpanKind
	TraceID  string
	ParentID string
	Attrs    map[string]string
	Status   codes.Code
}

func view(s sdktrace.ReadOnlySpan) spanView {
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	return spanView{Name: s.Name(), Kind: s.SpanKind(), TraceID: s.SpanContext().TraceID().String(),
		ParentID: s.Parent().SpanID().String(), Attrs: attrs, Status: s.Status().Code}
}

// One server span per tools/call continues the client's trace and says
// what was called and how it ended; the session id never appears raw.
func TestCallSpans(t *testing.T) {
	rec := otlptest.RecordSpans(t)
	cat := switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "up"}, {Name: "tool_error", Server: "up"}})
	s := New(toolErrorGateway{fakeGateway{cat: cat}}, Options{Project: "p1"})
	defer s.Shutdown(context.Background())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	sid := initializeSession(t, ts.URL+"/mcp")
	hash := sessionHash(sid)
	base := func(more map[string]string) map[string]string {
		m := map[string]string{"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool",
			"switchboard.project": "p1", "mcp.session.id": hash}
		for k, v := range more {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name string
		body string
		want spanView
	}{
		{"ok", `{"name":"echo","arguments":{"text":"hi"}}`, spanView{Name: "tools/call echo", Status: codes.Unset,
			Attrs: base(map[string]string{"gen_ai.tool.name": "echo", "switchboard.server": "up"})}},
		{"tool error", `{"name":"tool_error"}`, spanView{Name: "tools/call tool_error", Status: codes.Error,
			Attrs: base(map[string]string{"gen_ai.tool.name": "tool_error", "switchboard.server": "up", "error.type": "tool_error"})}},
		{"unknown tool", `{"name":"no such tool"}`, spanView{Name: "tools/call", Status: codes.Error,
			Attrs: base(map[string]string{"gen_ai.tool.name": "no such tool", "rpc.response.status_code": "-32601", "error.type": "-32601"})}},
		{"bad params", `{"arguments":{}}`, spanView{Name: "tools/call", Status: codes.Error,
			Attrs: base(map[string]string{"rpc.response.status_code": "-32602", "error.type": "-32602"})}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Ended())
			req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(
				`{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/call","params":`+tt.body+`}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Traceparent", clientTraceparent)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// The span ends before the response is written.
			ended := rec.Ended()[before:]
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want 1", len(ended))
			}
			tt.want.Kind, tt.want.TraceID, tt.want.ParentID = trace.SpanKindServer, clientTraceID, clientSpanID
			if diff := cmp.Diff(tt.want, view(ended[0])); diff != "" {
				t.Errorf("span (-want +got):\n%s", diff)
			}
			for _, kv := range ended[0].Attributes() {
				if strings.Contains(kv.Value.String(), sid) {
					t.Errorf("attribute %s holds the raw session id", kv.Key)
				}
			}
		})
	}
	if n := len(rec.Ended()); n != len(tests) {
		t.Errorf("%d spans for %d tools/call (initialize and other methods get none)", n, len(tests))
	}
}

// A legacy HTTP+SSE client's trace continues too: the response is sent
// later, on the session's stream.
func TestLegacyCallSpan(t *testing.T) {
	rec := otlptest.RecordSpans(t)
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "up"}})}, Options{})
	defer s.Shutdown(context.Background())
	ls := s.legacy.add(context.Background())
	defer s.legacy.remove(ls)
	req := httptest.NewRequest(http.MethodPost, "/message?sessionId="+ls.id,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", clientTraceparent)
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusAccepted {
		t.Fatalf("POST /message: %d", w.Code)
	}
	<-ls.out // the answer is queued after the span ended
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	got := view(ended[0])
	if got.Name != "tools/call echo" || got.TraceID != clientTraceID || got.ParentID != clientSpanID {
		t.Errorf("span %+v, want tools/call echo in the client's trace", got)
	}
}

// With otel's no-op globals (tracing off) calls carry no span at all.
func TestNoSpanWithTracingOff(t *testing.T) {
	gw := spyGateway{fakeGateway: fakeGateway{cat: switchboard.NewCatalog(1, []switchboard.Tool{{Name: "echo", Server: "up"}})}, seen: make(chan trace.SpanContext, 1)}
	s := New(gw, Options{})
	defer s.Shutdown(context.Background())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	sid := initializeSession(t, ts.URL+"/mcp")
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Traceparent", clientTraceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if len(out.Result) == 0 {
		t.Fatal("call failed")
	}
	if seen := <-gw.seen; seen.IsValid() {
		t.Errorf("the gateway's ctx carries span context %v with tracing off", seen)
	}
}

// spyGateway records the span context each call's ctx carries.
type spyGateway struct {
	fakeGateway
	seen chan trace.SpanContext
}

func (g spyGateway) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	g.seen <- trace.SpanContextFromContext(ctx)
	return g.fakeGateway.Call(ctx, req)
}

func initializeSession(t *testing.T, url string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s, no session id", resp.Status)
	}
	return sid
}

// Tracing off, the span machinery allocates nothing: no tracer, no span,
// no context. Both ways of being off count: never installed (when this
// test runs first) and the no-op that tracing's shutdown puts back.
func TestTracingOffAllocatesNothing(t *testing.T) {
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, nil)}, Options{})
	defer s.Shutdown(context.Background())
	name := "echo"
	rpc := &switchboard.RPCError{Code: -32601}
	h := http.Header{"Traceparent": {clientTraceparent}}
	run := func() {
		ctx, span := s.startCallSpan(withTraceContext(context.Background(), h), "sb-1")
		failCallSpan(span, rpc)
		toolErrorCallSpan(span)
		s.endCallSpan(span, &name)
		if trace.SpanContextFromContext(ctx).IsValid() {
			t.Fatal("a span context with tracing off")
		}
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("globals as found: %v allocations per call, want 0", n)
	}
	otel.SetTracerProvider(noop.NewTracerProvider())
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("no-op put back: %v allocations per call, want 0", n)
	}
}
