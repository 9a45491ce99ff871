// Package otlptest is an OTLP/HTTP trace collector for tests: an
// httptest.Server on loopback that accepts POST /v1/traces, decodes the
// protobuf export requests the way a real collector does and keeps the
// spans and the request headers for assertions.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for comparisons. IDs are lower-case
// hex as in a traceparent header; attribute values are rendered as text.
type Span struct {
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          string // "server", "client", "internal", ...
	Attrs                         map[string]string
	Error                         bool   // status code Error
	StatusMessage                 string // the status description
	Resource                      map[string]string
	Scope                         string // instrumentation scope name
}

// Collector is a running fake collector.
type Collector struct {
	// URL is the collector's base URL, as MCP_SERVER_OTLP_ENDPOINT takes it.
	URL string

	mu      sync.Mutex
	spans   []Span
	headers []http.Header
	changed chan struct{} // closed and replaced on every export
}

// New starts a collector that is closed when the test ends.
func New(t testing.TB) *Collector {
	c := &Collector{changed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.Error(w, "POST /v1/traces only", http.StatusNotFound)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, "not an ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					TraceID:       hex.EncodeToString(s.GetTraceId()),
					SpanID:        hex.EncodeToString(s.GetSpanId()),
					ParentSpanID:  hex.EncodeToString(s.GetParentSpanId()),
					Name:          s.GetName(),
					Kind:          strings.ToLower(strings.TrimPrefix(s.GetKind().String(), "SPAN_KIND_")),
					Attrs:         attrs(s.GetAttributes()),
					Error:         s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
					StatusMessage: s.GetStatus().GetMessage(),
					Resource:      res,
					Scope:         ss.GetScope().GetName(),
				})
			}
		}
	}
	c.mu.Lock()
	c.spans = append(c.spans, got...)
	c.headers = append(c.headers, r.Header.Clone())
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}

// Spans returns every span received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Headers returns the headers of every export request received so far.
func (c *Collector) Headers() []http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]http.Header(nil), c.headers...)
}

// WaitFor waits until done holds for the spans received, failing the test
// after timeout. It wakes on each export, never polls on a timer.
func (c *Collector) WaitFor(t testing.TB, timeout time.Duration, done func([]Span) bool) []Span {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		spans, changed := append([]Span(nil), c.spans...), c.changed
		c.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("collector: condition not met within %s; %d spans received: %+v", timeout, len(spans), spans)
			return nil
		}
	}
}

// Named returns the spans whose name is name.
func Named(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// RecordSpans installs a real SDK tracer provider that keeps ended spans
// in memory, and the W3C propagator, for the rest of the test; for unit
// tests that need spans without an exporter in between.
func RecordSpans(t testing.TB) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
	})
	return rec
}
