package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/otlptest"
)

// A client's W3C trace context, as an instrumented MCP client sends it.
const (
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID      = "b7ad6b7169203331"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// tracedUpstream is the streamable-HTTP fixture behind a recorder of the
// traceparent header of every tools/call it receives.
type tracedUpstream struct {
	h     http.Handler
	mu    sync.Mutex
	calls []string
}

func (u *tracedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
		u.mu.Lock()
		u.calls = append(u.calls, r.Header.Get("Traceparent"))
		u.mu.Unlock()
	}
	u.h.ServeHTTP(w, r)
}

func (u *tracedUpstream) traceparents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

// tracingSetup is a gateway with a streamable-HTTP upstream "st" (its
// tools unprefixed) and a stdio upstream "io" (tools prefixed io_), and a
// client that sends a traceparent header with every request.
func tracingSetup(t *testing.T, env map[string]string) (*gateway, *rawClient, *tracedUpstream) {
	t.Helper()
	up := &tracedUpstream{h: mcptest.StreamableHandler(mcptest.Options{Name: "st"})}
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close)
	g := startGateway(t, [][2]any{
		{"st", map[string]any{"url": ts.URL, "transport": "streamable-http"}},
		{"io", stdioServer("io", "toolPrefix", "io_")},
	}, env)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	c.header.Set("Traceparent", clientTraceparent)
	return g, c, up
}

// metaTraceparent is the traceparent the stdio upstream found in _meta.
func metaTraceparent(t *testing.T, c *rawClient) string {
	t.Helper()
	var meta map[string]any
	if err := json.Unmarshal([]byte(c.toolText("io_meta", map[string]any{})), &meta); err != nil {
		t.Fatal(err)
	}
	tp, _ := meta["traceparent"].(string)
	return tp
}

func traceparentOf(s otlptest.Span) string { return "00-" + s.TraceID + "-" + s.SpanID + "-01" }

// one returns the one span named name whose gen_ai.tool.name is tool.
func one(t *testing.T, spans []otlptest.Span, name, tool string) otlptest.Span {
	t.Helper()
	var got []otlptest.Span
	for _, s := range otlptest.Named(spans, name) {
		if s.Attrs["gen_ai.tool.name"] == tool {
			got = append(got, s)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d spans named %q for tool %s, want 1; all: %+v", len(got), name, tool, spans)
	}
	return got[0]
}

// TestTracing: with MCP_SERVER_OTLP_ENDPOINT set, a real tools/call through
// the real gateway reaches a real OTLP/HTTP collector as a server span in
// the client's trace and a client span for the upstream hop, and each
// upstream receives that hop as its parent.
func TestTracing(t *testing.T) {
	const token = "otlp-t0ken-never-logged"
	col := otlptest.New(t)
	g, c, up := tracingSetup(t, map[string]string{
		"MCP_SERVER_OTLP_ENDPOINT": col.URL,
		"MCP_SERVER_OTLP_HEADERS":  "Authorization=Bearer%20" + token,
	})
	if got := c.toolText("echo", map[string]any{"text": "traced"}); got != "traced" {
		t.Fatalf("echo = %q", got)
	}
	inMeta := metaTraceparent(t, c)
	if rep := c.call("tools/call", map[string]any{"name": "rpc_error", "arguments": map[string]any{}}); rep.code() != -32602 {
		t.Fatalf("rpc_error: %s", rep.Body)
	}
	g.stop(t) // the last shutdown step exports every buffered span
	spans := col.Spans()

	for _, tt := range []struct{ tool, upstreamTool, server, transport string }{
		{"echo", "echo", "st", "streamable-http"},
		{"io_meta", "meta", "io", "stdio"},
	} {
		callName, hopName := "tools/call "+tt.tool, "upstream "+tt.server+" tools/call"
		call, hop := one(t, spans, callName, tt.tool), one(t, spans, hopName, tt.upstreamTool)
		if call.Kind != "server" || call.TraceID != clientTraceID || call.ParentSpanID != clientSpanID {
			t.Errorf("%s: kind %s trace %s parent %s, want a server span under the client's %s", callName, call.Kind, call.TraceID, call.ParentSpanID, clientTraceparent)
		}
		if call.Attrs["switchboard.server"] != tt.server || call.Attrs["switchboard.project"] != "default" || call.Error {
			t.Errorf("%s: attributes %v, error %v", callName, call.Attrs, call.Error)
		}
		if call.Resource["service.name"] != "switchboard" || call.Resource["service.version"] != version {
			t.Errorf("%s: resource %v", callName, call.Resource)
		}
		if hop.Kind != "client" || hop.TraceID != clientTraceID || hop.ParentSpanID != call.SpanID {
			t.Errorf("%s: kind %s trace %s parent %s, want a client child of %s", hopName, hop.Kind, hop.TraceID, hop.ParentSpanID, call.SpanID)
		}
		if hop.Attrs["switchboard.server"] != tt.server || hop.Attrs["switchboard.transport"] != tt.transport {
			t.Errorf("%s: attributes %v", hopName, hop.Attrs)
		}
	}
	if got, want := up.traceparents(), []string{
		traceparentOf(one(t, spans, "upstream st tools/call", "echo")),
		traceparentOf(one(t, spans, "upstream st tools/call", "rpc_error")),
	}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("streamable-HTTP upstream got traceparent headers %q, want %q", got, want)
	}
	if want := traceparentOf(one(t, spans, "upstream io tools/call", "meta")); inMeta != want {
		t.Errorf("stdio upstream got _meta.traceparent %q, want %q", inMeta, want)
	}
	failed := one(t, spans, "tools/call rpc_error", "rpc_error")
	if !failed.Error || failed.Attrs["rpc.response.status_code"] != "-32602" {
		t.Errorf("rpc_error span: error %v, attributes %v", failed.Error, failed.Attrs)
	}
	for _, h := range col.Headers() {
		if h.Get("Authorization") != "Bearer "+token {
			t.Errorf("export without the configured Authorization header: %v", h)
		}
	}
	logs := g.logs.String()
	if strings.Contains(logs, token) {
		t.Errorf("the OTLP header value reached the log")
	}
	if !strings.Contains(logs, "otlp_endpoint="+col.URL) {
		t.Errorf("the effective configuration does not name the collector:\n%s", logs)
	}
}

// TestTracingOff: without MCP_SERVER_OTLP_ENDPOINT (even with the standard
// OTEL_ variables set) nothing is installed, nothing is exported, no
// trace context is passed on, and calls work as ever.
func TestTracingOff(t *testing.T) {
	col := otlptest.New(t)
	g, c, up := tracingSetup(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL})
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); ok {
		t.Error("a tracer provider is installed with tracing off")
	}
	if got := c.toolText("echo", map[string]any{"text": "plain"}); got != "plain" {
		t.Fatalf("echo = %q", got)
	}
	if tp := metaTraceparent(t, c); tp != "" {
		t.Errorf("stdio upstream got _meta.traceparent %q with tracing off", tp)
	}
	g.stop(t)
	if got := up.traceparents(); len(got) != 1 || got[0] != "" {
		t.Errorf("streamable-HTTP upstream got traceparent headers %q with tracing off, want one call without", got)
	}
	if n := len(col.Spans()) + len(col.Headers()); n != 0 {
		t.Errorf("the collector received %d exports or spans with tracing off", n)
	}
}

// TestTracingCollectorDown: a collector that cannot be reached costs the
// spans, never the calls or the shutdown; the loss is logged.
func TestTracingCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more: connections are refused
	g, c, _ := tracingSetup(t, map[string]string{"MCP_SERVER_OTLP_ENDPOINT": down})
	if got := c.toolText("echo", map[string]any{"text": "still works"}); got != "still works" {
		t.Fatalf("echo = %q", got)
	}
	g.stop(t)
	if logs := g.logs.String(); !strings.Contains(logs, "spans may be lost") {
		t.Errorf("the lost spans are not logged:\n%s", logs)
	}
}
