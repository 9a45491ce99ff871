package tracing

import (
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The OTLP trace messages are built from the trace, common and resource
// packages of go.opentelemetry.io/proto/otlp only. The collector package,
// which holds ExportTraceServiceRequest, imports gRPC and grpc-gateway for
// its service stubs; encodeRequest writes that one-field envelope itself.

// exportRequestResourceSpans is field 1 of ExportTraceServiceRequest:
// repeated ResourceSpans resource_spans.
const exportRequestResourceSpans protowire.Number = 1

// encodeRequest returns the protobuf encoding of an
// ExportTraceServiceRequest holding rss.
func encodeRequest(rss []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	opts := proto.MarshalOptions{UseCachedSize: true}
	for _, rs := range rss {
		b = protowire.AppendTag(b, exportRequestResourceSpans, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(opts.Size(rs)))
		var err error
		if b, err = opts.MarshalAppend(b, rs); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// resourceSpans converts spans to OTLP, grouped by resource and, within a
// resource, by instrumentation scope, each group in the order its first
// span came.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var (
		out    []*tracepb.ResourceSpans
		byRes  = map[attribute.Distinct]*tracepb.ResourceSpans{}
		byScop = map[scopeKey]*tracepb.ScopeSpans{}
	)
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: resourceProto(res), SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			out = append(out, rs)
		}
		scope := s.InstrumentationScope()
		sk := scopeKey{rk, scope}
		ss, ok := byScop[sk]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: scopeProto(scope), SchemaUrl: scope.SchemaURL}
			byScop[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, spanProto(s))
	}
	return out
}

func resourceProto(r *resource.Resource) *resourcepb.Resource {
	if r == nil {
		return nil
	}
	return &resourcepb.Resource{Attributes: iterProto(r.Iter())}
}

func scopeProto(s instrumentation.Scope) *commonpb.InstrumentationScope {
	if s == (instrumentation.Scope{}) {
		return nil
	}
	return &commonpb.InstrumentationScope{Name: text(s.Name), Version: text(s.Version), Attributes: iterProto(s.Attributes.Iter())}
}

func spanProto(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := s.Status()
	p := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Flags:                  flags(sc.TraceFlags(), s.Parent().IsRemote()),
		Name:                   text(s.Name()),
		Kind:                   kindProto(s.SpanKind()),
		StartTimeUnixNano:      unixNano(s.StartTime()),
		EndTimeUnixNano:        unixNano(s.EndTime()),
		Attributes:             attrsProto(s.Attributes()),
		DroppedAttributesCount: count(s.DroppedAttributes()),
		DroppedEventsCount:     count(s.DroppedEvents()),
		DroppedLinksCount:      count(s.DroppedLinks()),
		Status:                 &tracepb.Status{Code: statusProto(st.Code), Message: text(st.Description)},
	}
	if psid := s.Parent().SpanID(); psid.IsValid() {
		p.ParentSpanId = psid[:]
	}
	for _, e := range s.Events() {
		p.Events = append(p.Events, &tracepb.Span_Event{
			TimeUnixNano:           unixNano(e.Time),
			Name:                   text(e.Name),
			Attributes:             attrsProto(e.Attributes),
			DroppedAttributesCount: count(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		p.Links = append(p.Links, &tracepb.Span_Link{
			TraceId:                ltid[:],
			SpanId:                 lsid[:],
			TraceState:             l.SpanContext.TraceState().String(),
			Attributes:             attrsProto(l.Attributes),
			DroppedAttributesCount: count(l.DroppedAttributeCount),
			Flags:                  flags(l.SpanContext.TraceFlags(), l.SpanContext.IsRemote()),
		})
	}
	return p
}

// flags are the W3C trace flags in the low byte plus the bits saying
// whether the parent (of a span) or the linked span is remote, which
// the SDK always knows.
func flags(tf trace.TraceFlags, remote bool) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if remote {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func kindProto(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	}
	return tracepb.Span_SPAN_KIND_UNSPECIFIED
}

func statusProto(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	}
	return tracepb.Status_STATUS_CODE_UNSET
}

// unixNano is t for OTLP; the zero time (and anything before 1970) is 0,
// "unknown".
func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(max(0, t.UnixNano()))
}

func count(n int) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

func attrsProto(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(kvs))
	for i, kv := range kvs {
		out[i] = &commonpb.KeyValue{Key: text(string(kv.Key)), Value: valueProto(kv.Value)}
	}
	return out
}

func iterProto(it attribute.Iterator) []*commonpb.KeyValue {
	if it.Len() == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, it.Len())
	for it.Next() {
		kv := it.Attribute()
		out = append(out, &commonpb.KeyValue{Key: text(string(kv.Key)), Value: valueProto(kv.Value)})
	}
	return out
}

// valueProto converts every attribute type; an EMPTY value is an AnyValue
// with nothing set, which OTLP defines as the empty value.
func valueProto(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: text(v.AsString())}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
		})
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(n int64) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
		})
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
		})
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) *commonpb.AnyValue {
			return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: text(s)}}
		})
	case attribute.SLICE:
		return array(v.AsSlice(), valueProto)
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: attrsProto(v.AsMap())}}}
	}
	return &commonpb.AnyValue{}
}

// text makes s valid UTF-8, as protobuf requires of every string: one
// span name or attribute with stray bytes would otherwise fail the
// marshalling of its whole batch.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func array[T any](vs []T, conv func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	a := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, len(vs))}
	for i, v := range vs {
		a.Values[i] = conv(v)
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: a}}
}
