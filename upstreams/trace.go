package upstreams

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/otelspan"
)

// Span attributes of the upstream hop; the mcp.*, gen_ai.*, network.*,
// server.* and error.type names are OpenTelemetry semantic conventions.
const (
	attrMethod     = attribute.Key("mcp.method.name")
	attrTool       = attribute.Key("gen_ai.tool.name")
	attrStatusCode = attribute.Key("rpc.response.status_code")
	attrErrorType  = attribute.Key("error.type")
	attrNetwork    = attribute.Key("network.transport")
	attrAddress    = attribute.Key("server.address")
	attrPort       = attribute.Key("server.port")
	attrServer     = attribute.Key("switchboard.server")
	attrTransport  = attribute.Key("switchboard.transport")
)

const tracerName = "github.com/switchboard-mcp/switchboard/upstreams"

// startHop starts the client span of one tools/call to an upstream, a
// child of the caller's span. With tracing off it costs nothing: no
// tracer, no span, no allocation.
func startHop(ctx context.Context, spec switchboard.ServerSpec, tool string) (context.Context, trace.Span) {
	tr := otelspan.Tracer(tracerName)
	if tr == nil {
		return ctx, otelspan.None
	}
	ctx, span := tr.Start(ctx, "upstream "+spec.Name+" tools/call", trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(attrMethod.String("tools/call"), attrTool.String(tool),
		attrServer.String(spec.Name), attrTransport.String(string(spec.Transport)))
	switch spec.Transport {
	case switchboard.TransportStdio, switchboard.TransportHosted:
		span.SetAttributes(attrNetwork.String("pipe"))
		return ctx, span
	case switchboard.TransportBuiltin:
		return ctx, span // in-process: no network
	}
	span.SetAttributes(attrNetwork.String("tcp"))
	// Host and port only: the URL's path or query may hold a secret.
	if u, err := url.Parse(spec.URL); err == nil && u.Hostname() != "" {
		span.SetAttributes(attrAddress.String(u.Hostname()))
		if p, err := strconv.Atoi(u.Port()); err == nil {
			span.SetAttributes(attrPort.Int(p))
		}
	}
	return ctx, span
}

// endHop records how the hop ended and ends the span. A tool result with
// isError true is a successful hop; the server span reports it.
func endHop(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		var rpc *switchboard.RPCError
		if errors.As(err, &rpc) {
			code := strconv.Itoa(rpc.Code)
			span.SetAttributes(attrStatusCode.String(code), attrErrorType.String(code))
		} else {
			span.SetAttributes(attrErrorType.String(errorType(err)))
		}
		span.SetStatus(codes.Error, switchboard.Clip(switchboard.Message(err)))
	}
	span.End()
}

// errorType names a failed hop by its domain error, for grouping.
func errorType(err error) string {
	for _, k := range []struct {
		kind error
		name string
	}{
		{switchboard.ErrTimeout, "timeout"},
		{switchboard.ErrCanceled, "canceled"},
		{switchboard.ErrUnavailable, "unavailable"},
		{switchboard.ErrNotFound, "not_found"},
		{switchboard.ErrInvalid, "invalid"},
		{switchboard.ErrConfig, "misconfigured"},
	} {
		if errors.Is(err, k.kind) {
			return k.name
		}
	}
	return "_OTHER"
}

// traceMeta returns the trace context of ctx as _meta entries
// (traceparent, and tracestate when there is one) for upstreams that have
// no HTTP headers to carry it: stdio. It is nil when ctx has no span,
// which is always the case with tracing off.
func traceMeta(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	m := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, m)
	if len(m) == 0 {
		return nil
	}
	return m
}

// traceTransport puts the trace context of each request's context into
// its headers (traceparent), so a remote upstream's spans join the call's
// trace. Requests without a span (the connection's own: initialize, the
// GET stream) and every request with tracing off go out untouched.
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		h := http.Header{}
		otel.GetTextMapPropagator().Inject(r.Context(), propagation.HeaderCarrier(h))
		if len(h) > 0 {
			// A RoundTripper must not modify the caller's request.
			r = r.Clone(r.Context())
			for k, v := range h {
				r.Header[k] = v
			}
		}
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t traceTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
