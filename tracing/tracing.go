// Package tracing switches on OpenTelemetry tracing for the gateway. Setup
// installs, as otel's globals, a TracerProvider that batches spans to an
// OTLP/HTTP collector and the W3C trace-context propagator.
//
// The packages that make spans (server, upstreams) use only the otel API
// through those globals. With tracing off Setup installs nothing, so they
// run against otel's built-in no-ops: no span is recorded, exported or
// propagated, and server and upstreams skip the otel calls altogether.
//
// Where spans go (endpoint, headers), how they are sampled and the
// resource come from Config alone, so the standard OTEL_* variables
// cannot switch tracing on or redirect it.
//
// Spans are batched by the SDK's batch span processor, which still reads
// its tuning variables (OTEL_BSP_*) from the environment when tracing is
// on. They are sent by this package's own OTLP/HTTP exporter rather than
// the SDK's otlptracehttp, whose configuration code links gRPC and
// grpc-gateway into the binary even with tracing off: protobuf, no
// compression, 10 s per export, a few retries when the collector answers
// 429, 502, 503 or 504 (honouring Retry-After up to 5 s). None of the
// exporter's OTEL_EXPORTER_OTLP_* variables apply (timeout, compression,
// certificates, protocol); the proxy variables (HTTPS_PROXY, NO_PROXY)
// and SSL_CERT_FILE / SSL_CERT_DIR do, as for any Go HTTP client.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceName is the service.name of every span the gateway exports.
const ServiceName = "switchboard"

// tracesPath is where an OTLP/HTTP collector takes spans, below its base URL.
const tracesPath = "/v1/traces"

// Config says where spans go. The zero value is tracing off.
type Config struct {
	// Endpoint is the collector's base URL, such as http://collector:4318;
	// spans are POSTed to Endpoint + "/v1/traces" (a URL that already ends
	// in /v1/traces is used as is). Empty means tracing is off.
	Endpoint string
	// Headers go with every export, for the collector's authentication.
	Headers map[string]string
	// SampleRatio is the share of new traces recorded, 0 to 1 (0 records
	// only traces a client started and sampled). A trace a client started
	// keeps the client's sampling decision.
	SampleRatio float64
	// Version is the service.version of the spans.
	Version string
	// Logger receives export failures; default: discarded.
	Logger *slog.Logger
}

// Enabled reports whether cfg switches tracing on.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// Setup installs the global TracerProvider and propagator when cfg is
// enabled, and returns the function that exports the spans still buffered
// and uninstalls both again (leaving otel's no-ops). Call it last at
// shutdown, with a deadline; calls after the first do nothing. When cfg
// is disabled Setup installs nothing and shutdown does nothing.
//
// Setup returns an error for an endpoint that is not an http or https
// URL. It never contacts the collector: a collector that is down costs
// spans (reported to cfg.Logger), never the gateway's start.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, err error) {
	if !cfg.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	endpoint, err := tracesURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(newExporter(ctx, endpoint, cfg.Headers, cfg.Version)),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL,
			semconv.ServiceName(ServiceName), semconv.ServiceVersion(cfg.Version))),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))),
	)
	setErrorLogger(cfg.Logger)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	var once sync.Once
	return func(ctx context.Context) error {
		var err error
		once.Do(func() {
			// No-ops rather than whatever was there before: once set,
			// otel's default globals keep forwarding to the first provider
			// and propagator they were given.
			otel.SetTracerProvider(noop.NewTracerProvider())
			otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator())
			err = tp.Shutdown(ctx) // exports what is buffered
			setErrorLogger(nil)
			if err != nil {
				err = fmt.Errorf("tracing: flushing spans: %w", err)
			}
		})
		return err
	}, nil
}

// tracesURL turns a collector base URL into its traces endpoint.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not echoed: a mistyped URL may carry a credential.
		return "", errors.New("tracing: the OTLP endpoint must be an http:// or https:// URL such as http://collector:4318")
	}
	if !strings.HasSuffix(u.Path, tracesPath) {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String(), nil
}

// errorLogger is where otel's global error handler (export failures)
// logs; nil drops. The handler is installed once; Setup and shutdown only
// swap the logger.
var (
	errorLogger      atomic.Pointer[slog.Logger]
	errorHandlerOnce sync.Once
)

func setErrorLogger(l *slog.Logger) {
	errorLogger.Store(l)
	errorHandlerOnce.Do(func() {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			if l := errorLogger.Load(); l != nil {
				l.Warn("tracing: OpenTelemetry reported an error; spans may be lost", "err", err)
			}
		}))
	})
}
