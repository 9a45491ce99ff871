package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/otelspan"
)

// Span attributes of a tools/call. The mcp.*, gen_ai.* and error.type
// names are OpenTelemetry's MCP semantic conventions (semconv 1.39-1.41),
// so tracing backends show the spans as tool calls.
const (
	attrMethod     = attribute.Key("mcp.method.name")
	attrSession    = attribute.Key("mcp.session.id")
	attrOperation  = attribute.Key("gen_ai.operation.name")
	attrTool       = attribute.Key("gen_ai.tool.name")
	attrStatusCode = attribute.Key("rpc.response.status_code")
	attrErrorType  = attribute.Key("error.type")
	attrProject    = attribute.Key("switchboard.project")
	attrServer     = attribute.Key("switchboard.server")
)

const tracerName = "github.com/switchboard-mcp/switchboard/server"

// withTraceContext continues the client's trace: the W3C traceparent of
// the HTTP request becomes the parent of the call's span. With tracing
// off the global propagator is a no-op and ctx comes back unchanged.
func withTraceContext(ctx context.Context, h http.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
}

// startCallSpan starts the server span of one tools/call. With tracing off
// it costs nothing: no tracer, no span, no allocation.
func (s *Server) startCallSpan(ctx context.Context, session string) (context.Context, trace.Span) {
	tr := otelspan.Tracer(tracerName)
	if tr == nil {
		return ctx, otelspan.None
	}
	ctx, span := tr.Start(ctx, "tools/call", trace.WithSpanKind(trace.SpanKindServer))
	if span.IsRecording() {
		span.SetAttributes(attrMethod.String("tools/call"), attrOperation.String("execute_tool"),
			attrProject.String(s.opts.Project), attrSession.String(sessionHash(session)))
	}
	return ctx, span
}

// endCallSpan names the span after the tool, when the params had one,
// and ends it. The catalog is consulted only now because a first call
// connects its server, and so fills the catalog, on the way. Only tools
// in the catalog name the span: an arbitrary client string must not mint
// span names without bound.
func (s *Server) endCallSpan(span trace.Span, tool *string) {
	if tool != nil && span.IsRecording() {
		span.SetAttributes(attrTool.String(switchboard.Clip(*tool)))
		if t, ok := s.gw.Catalog().Lookup(*tool); ok {
			span.SetName("tools/call " + *tool)
			span.SetAttributes(attrServer.String(t.Server))
		}
	}
	span.End()
}

// failCallSpan marks the span failed with the JSON-RPC error the client
// gets (its message is client-safe by construction).
func failCallSpan(span trace.Span, rpc *switchboard.RPCError) {
	if !span.IsRecording() {
		return
	}
	code := strconv.Itoa(rpc.Code)
	span.SetAttributes(attrStatusCode.String(code), attrErrorType.String(code))
	span.SetStatus(codes.Error, switchboard.Clip(rpc.Message))
}

// toolErrorCallSpan marks a result with isError true.
func toolErrorCallSpan(span trace.Span) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrErrorType.String("tool_error"))
	span.SetStatus(codes.Error, "tool result has isError true")
}

// sessionHash stands in for a session id on spans. The id authorizes
// requests on its session, and spans leave for a collector that others
// read: a short digest still ties a session's calls together.
func sessionHash(id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}
