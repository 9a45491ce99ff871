package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/otlptest"
)

// headerLog records the headers of every request an HTTP upstream
// receives, telling tools/call POSTs from the rest.
type headerLog struct {
	h    http.Handler
	mu   sync.Mutex
	reqs []loggedRequest
}

type loggedRequest struct {
	call   bool // a tools/call POST
	header http.Header
}

func (l *headerLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	l.mu.Lock()
	l.reqs = append(l.reqs, loggedRequest{
		call:   r.Method == http.MethodPost && bytes.Contains(body, []byte(`"method":"tools/call"`)),
		header: r.Header.Clone(),
	})
	l.mu.Unlock()
	l.h.ServeHTTP(w, r)
}

// snapshot returns the traceparent of each tools/call POST and of every
// other request.
func (l *headerLog) snapshot() (calls, other []string) {
	for _, r := range l.requests() {
		if r.call {
			calls = append(calls, r.header.Get("Traceparent"))
		} else {
			other = append(other, r.header.Get("Traceparent"))
		}
	}
	return calls, other
}

func (l *headerLog) requests() []loggedRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loggedRequest(nil), l.reqs...)
}

// metaTraceparent calls the fixture's meta tool and returns the
// traceparent the upstream found in params._meta ("" for none).
func metaTraceparent(t *testing.T, m *Manager, ctx context.Context, meta json.RawMessage) string {
	t.Helper()
	res, err := m.Call(ctx, switchboard.CallRequest{Tool: "meta", Meta: meta})
	if err != nil {
		t.Fatalf("meta: %v", err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(resultText(t, res)), &got); err != nil {
		t.Fatal(err)
	}
	tp, _ := got["traceparent"].(string)
	return tp
}

// Every call to an upstream gets a client span, child of the caller's,
// and the upstream receives that span as its parent: in the traceparent
// header over HTTP, in params._meta over stdio.
func TestHopSpanAndPropagation(t *testing.T) {
	sseLog := &headerLog{h: mcptest.SSEHandler(mcptest.Options{Name: "sse"})}
	stLog := &headerLog{h: mcptest.StreamableHandler(mcptest.Options{Name: "st"})}
	sse, st := httptest.NewServer(sseLog), httptest.NewServer(stLog)
	t.Cleanup(sse.Close)
	t.Cleanup(st.Close)
	tests := []struct {
		spec    switchboard.ServerSpec
		log     *headerLog // nil for stdio
		network string
	}{
		{stdioSpec("fx"), nil, "pipe"},
		{switchboard.ServerSpec{Name: "sse", Transport: switchboard.TransportSSE, URL: sse.URL + "/sse"}, sseLog, "tcp"},
		{switchboard.ServerSpec{Name: "st", Transport: switchboard.TransportStreamableHTTP, URL: st.URL}, stLog, "tcp"},
	}
	for _, tt := range tests {
		t.Run(string(tt.spec.Transport), func(t *testing.T) {
			rec := otlptest.RecordSpans(t)
			h := newHarness(t, testOptions())
			h.apply(tt.spec)
			h.tools() // connect outside any trace

			ctx, caller := otel.Tracer("test").Start(context.Background(), "caller", trace.WithSpanKind(trace.SpanKindServer))
			inMeta := metaTraceparent(t, h.m, ctx, nil)
			caller.End()

			var hop sdktrace.ReadOnlySpan
			for _, s := range rec.Ended() {
				if s.Name() == "upstream "+tt.spec.Name+" tools/call" {
					hop = s
				}
			}
			if hop == nil {
				t.Fatalf("no hop span among %d ended", len(rec.Ended()))
			}
			if hop.SpanKind() != trace.SpanKindClient || hop.Parent().SpanID() != caller.SpanContext().SpanID() ||
				hop.SpanContext().TraceID() != caller.SpanContext().TraceID() {
				t.Errorf("hop span kind %v parent %v, want a client child of %v", hop.SpanKind(), hop.Parent(), caller.SpanContext())
			}
			attrs := map[string]string{}
			for _, kv := range hop.Attributes() {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			for k, want := range map[string]string{"switchboard.server": tt.spec.Name, "switchboard.transport": string(tt.spec.Transport),
				"network.transport": tt.network, "mcp.method.name": "tools/call", "gen_ai.tool.name": "meta"} {
				if attrs[k] != want {
					t.Errorf("hop attribute %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
				}
			}
			if tt.log != nil && attrs["server.address"] != "127.0.0.1" {
				t.Errorf("server.address = %q, want 127.0.0.1", attrs["server.address"])
			}

			want := "00-" + hop.SpanContext().TraceID().String() + "-" + hop.SpanContext().SpanID().String() + "-01"
			if tt.log == nil {
				if inMeta != want {
					t.Errorf("stdio upstream got _meta.traceparent %q, want %q", inMeta, want)
				}
				return
			}
			if inMeta != "" {
				t.Errorf("HTTP upstream got _meta.traceparent %q; the header carries it, _meta stays the client's", inMeta)
			}
			calls, other := tt.log.snapshot()
			if diff := cmp.Diff([]string{want}, calls); diff != "" {
				t.Errorf("traceparent headers of tools/call (-want +got):\n%s", diff)
			}
			for _, tp := range other {
				if tp != "" {
					t.Errorf("a request outside any call (initialize, stream) carried traceparent %q", tp)
				}
			}
		})
	}
}

// A failed hop is an error span with the upstream's JSON-RPC code.
func TestHopSpanError(t *testing.T) {
	rec := otlptest.RecordSpans(t)
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))
	if _, err := h.call("rpc_error", "{}"); err == nil {
		t.Fatal("rpc_error succeeded")
	}
	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans, want 1", len(ended))
	}
	attrs := map[string]string{}
	for _, kv := range ended[0].Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if ended[0].Status().Code != codes.Error || attrs["rpc.response.status_code"] != "-32602" || attrs["error.type"] != "-32602" {
		t.Errorf("status %v, attributes %v; want Error with code -32602", ended[0].Status(), attrs)
	}
}

// teeSpec runs the fixture behind `tee`, which logs every line the
// gateway writes to it: the bytes forwarded, exactly.
func teeSpec(t *testing.T) (switchboard.ServerSpec, string) {
	t.Helper()
	log := filepath.Join(t.TempDir(), "stdin.log")
	spec := shellScript(t, "tee", `tee "$LOG" | exec "$BIN"`+"\n", map[string]string{
		"LOG": log, "BIN": fixtureBin, mcptest.EnvFixture: "stdio", mcptest.EnvFixtureName: "tee"})
	return spec, log
}

// forwardedCall returns the params of the nth tools/call in the log
// (counting from 1). tee may pass a line on before it logs it, so the
// answer can arrive first: wait for the line.
func forwardedCall(t *testing.T, log string, n int) string {
	t.Helper()
	var calls []string
	pollUntil(t, fmt.Sprintf("tools/call #%d in the tee log", n), func() bool {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		calls = calls[:0]
		for _, line := range strings.Split(string(b), "\n") {
			var m struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Method == "tools/call" {
				calls = append(calls, string(m.Params))
			}
		}
		return len(calls) >= n
	})
	return calls[n-1]
}

// The trace context goes to a stdio upstream as _meta keys the client did
// not set; the arguments and the client's own _meta entries are
// forwarded exactly as without tracing.
func TestStdioTraceMetaKeepsClientBytes(t *testing.T) {
	spec, log := teeSpec(t)
	h := newHarness(t, testOptions())
	h.apply(spec)
	args := json.RawMessage(`{"b":1,"a":[9007199254740993]}`)
	calls := 0
	call := func(ctx context.Context, meta string) string {
		t.Helper()
		var m json.RawMessage
		if meta != "" {
			m = json.RawMessage(meta)
		}
		if _, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "meta", Arguments: args, Meta: m}); err != nil {
			t.Fatal(err)
		}
		calls++
		return forwardedCall(t, log, calls)
	}

	// Tracing off: exactly what the gateway always sent.
	const clientTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	offPlain := call(context.Background(), "")
	offMeta := call(context.Background(), `{"z":1,"traceparent":"`+clientTP+`"}`)
	if want := `{"name":"meta","arguments":{"b":1,"a":[9007199254740993]}}`; offPlain != want {
		t.Errorf("tracing off, no _meta: forwarded %s, want %s", offPlain, want)
	}
	if want := `{"name":"meta","arguments":{"b":1,"a":[9007199254740993]},"_meta":{"traceparent":"` + clientTP + `","z":1}}`; offMeta != want {
		t.Errorf("tracing off, client _meta: forwarded %s, want %s", offMeta, want)
	}

	rec := otlptest.RecordSpans(t)
	ctx, caller := otel.Tracer("test").Start(context.Background(), "caller")
	defer caller.End()
	onPlain := call(ctx, "")
	hop := rec.Ended()[len(rec.Ended())-1].SpanContext()
	ours := "00-" + hop.TraceID().String() + "-" + hop.SpanID().String() + "-01"
	if want := `{"name":"meta","arguments":{"b":1,"a":[9007199254740993]},"_meta":{"traceparent":"` + ours + `"}}`; onPlain != want {
		t.Errorf("tracing on, no _meta: forwarded %s, want %s", onPlain, want)
	}
	// The client's own traceparent is its to set: forwarded unchanged.
	if onMeta := call(ctx, `{"z":1,"traceparent":"`+clientTP+`"}`); onMeta != offMeta {
		t.Errorf("tracing on, client _meta: forwarded %s, want %s as with tracing off", onMeta, offMeta)
	}
}

// Tracing off, the hop's span machinery allocates nothing.
func TestTracingOffAllocatesNothing(t *testing.T) {
	spec := switchboard.ServerSpec{Name: "st", Transport: switchboard.TransportStreamableHTTP, URL: "http://127.0.0.1:1/mcp"}
	otel.SetTracerProvider(noop.NewTracerProvider())
	var err error = &switchboard.RPCError{Code: -32602}
	n := testing.AllocsPerRun(100, func() {
		ctx, span := startHop(context.Background(), spec, "echo")
		if traceMeta(ctx) != nil {
			t.Fatal("trace context in _meta with tracing off")
		}
		endHop(span, err)
	})
	if n != 0 {
		t.Errorf("%v allocations per call, want 0", n)
	}
}
