package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/internal/otlptest"
	"github.com/switchboard-mcp/switchboard/tracing"
)

// clientTraceparent is a sampled W3C trace context as a client sends it.
const (
	clientTraceID     = "0af7651916cd43dd8448eb211c80319c"
	clientSpanID      = "b7ad6b7169203331"
	clientTraceparent = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

func setup(t *testing.T, cfg tracing.Config) func(context.Context) error {
	t.Helper()
	shutdown, err := tracing.Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	t.Cleanup(func() { _ = shutdown(context.Background()) })
	return shutdown
}

// installed reports whether a real (SDK) tracer provider is the global.
func installed() bool {
	_, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	return ok
}

func TestDisabledInstallsNothing(t *testing.T) {
	shutdown := setup(t, tracing.Config{SampleRatio: 1})
	if installed() {
		t.Fatal("an SDK tracer provider is installed with tracing off")
	}
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier{"Traceparent": {clientTraceparent}})
	if trace.SpanContextFromContext(ctx).IsValid() {
		t.Error("the global propagator extracted a trace context with tracing off")
	}
	_, span := otel.Tracer("test").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("span records with tracing off")
	}
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestExportsToCollector(t *testing.T) {
	col := otlptest.New(t)
	shutdown := setup(t, tracing.Config{Endpoint: col.URL, SampleRatio: 1, Version: "1.2.3",
		Headers: map[string]string{"Authorization": "Bearer s3cret"}})
	if !installed() {
		t.Fatal("no SDK tracer provider installed")
	}

	// A client's trace continues through the global propagator.
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier{"Traceparent": {clientTraceparent}})
	_, span := otel.Tracer("test").Start(ctx, "child", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	_, root := otel.Tracer("test").Start(context.Background(), "root")
	root.End()

	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	spans := col.Spans() // shutdown has flushed: no waiting
	child := otlptest.Named(spans, "child")
	if len(child) != 1 || len(otlptest.Named(spans, "root")) != 1 {
		t.Fatalf("got spans %+v, want one child and one root", spans)
	}
	if diff := cmp.Diff(otlptest.Span{TraceID: clientTraceID, ParentSpanID: clientSpanID, Kind: "server", Scope: "test"},
		otlptest.Span{TraceID: child[0].TraceID, ParentSpanID: child[0].ParentSpanID, Kind: child[0].Kind, Scope: child[0].Scope}); diff != "" {
		t.Errorf("child span (-want +got):\n%s", diff)
	}
	res := child[0].Resource
	if res["service.name"] != "switchboard" || res["service.version"] != "1.2.3" {
		t.Errorf("resource = %v, want service.name switchboard, service.version 1.2.3", res)
	}
	for _, h := range col.Headers() {
		if got := h.Get("Authorization"); got != "Bearer s3cret" {
			t.Errorf("export request Authorization = %q, want the configured header", got)
		}
	}

	// Uninstalled again: nothing records or propagates.
	if installed() {
		t.Error("SDK tracer provider still installed after shutdown")
	}
	if f := otel.GetTextMapPropagator().Fields(); len(f) != 0 {
		t.Errorf("propagator still handles %v after shutdown", f)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Errorf("second shutdown: %v", err)
	}
}

func TestSampleRatioZeroKeepsClientDecision(t *testing.T) {
	col := otlptest.New(t)
	shutdown := setup(t, tracing.Config{Endpoint: col.URL, SampleRatio: 0})
	_, root := otel.Tracer("test").Start(context.Background(), "root")
	root.End()
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.HeaderCarrier{"Traceparent": {clientTraceparent}})
	_, child := otel.Tracer("test").Start(ctx, "sampled-by-client")
	child.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range col.Spans() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"sampled-by-client"}, names); diff != "" {
		t.Errorf("exported spans (-want +got):\n%s", diff)
	}
}

func TestEndpointPath(t *testing.T) {
	tests := []struct {
		name, endpoint, wantPath string
	}{
		{"base URL", "", "/v1/traces"},
		{"base URL with slash", "/", "/v1/traces"},
		{"full traces URL", "/v1/traces", "/v1/traces"},
		{"base URL with a path", "/otlp", "/otlp/v1/traces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paths := make(chan string, 16)
			col := http.NewServeMux()
			col.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				paths <- r.URL.Path
				w.WriteHeader(http.StatusOK)
			})
			srv := newServer(t, col)
			shutdown := setup(t, tracing.Config{Endpoint: srv + tt.endpoint, SampleRatio: 1})
			_, span := otel.Tracer("test").Start(context.Background(), "x")
			span.End()
			if err := shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			select { // shutdown has exported: no waiting
			case got := <-paths:
				if got != tt.wantPath {
					t.Errorf("export went to %s, want %s", got, tt.wantPath)
				}
			default:
				t.Fatal("no export request")
			}
		})
	}
}

func TestBadEndpoint(t *testing.T) {
	for _, e := range []string{"collector:4318", "ftp://collector", "http://", "://x"} {
		if _, err := tracing.Setup(context.Background(), tracing.Config{Endpoint: e}); err == nil {
			t.Errorf("Setup(%q) succeeded", e)
		}
		if installed() {
			t.Fatalf("Setup(%q) failed but installed a provider", e)
		}
	}
}

func newServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
