package tracing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

var (
	traceID  = trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c}
	traceID2 = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	spanA    = trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31}
	spanB    = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	spanC    = trace.SpanID{0x53, 0x99, 0x5c, 0x3f, 0x42, 0xcd, 0x8a, 0xd8}
	spanD    = trace.SpanID{0x1, 0x2, 0x3, 0x4, 0x5, 0x6, 0x7, 0x8}
	t0       = time.Unix(1_700_000_000, 123_456_789)
)

// roundTrip encodes spans as an export request and decodes them back
// with the collector's own types, as a collector would.
func roundTrip(t *testing.T, spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	t.Helper()
	body, err := encodeRequest(resourceSpans(spans))
	if err != nil {
		t.Fatalf("encodeRequest: %v", err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		t.Fatalf("the body is not an ExportTraceServiceRequest: %v", err)
	}
	return req.GetResourceSpans()
}

func sc(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags, state string, remote bool) trace.SpanContext {
	ts, err := trace.ParseTraceState(state)
	if err != nil {
		panic(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, TraceState: ts, Remote: remote})
}

func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}
func str(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func i64(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func dbl(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func boo(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

// has-is-remote and is-remote bits of Span.flags and Span_Link.flags.
const (
	hasRemote = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	isRemote  = uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
)

func TestConvertSpan(t *testing.T) {
	stub := tracetest.SpanStub{
		Name:        "tools/call",
		SpanContext: sc(traceID, spanB, trace.FlagsSampled, "vendor=v1,other=x", false),
		Parent:      sc(traceID, spanA, trace.FlagsSampled, "", true),
		SpanKind:    trace.SpanKindServer,
		StartTime:   t0,
		EndTime:     t0.Add(1500 * time.Millisecond),
		Attributes: []attribute.KeyValue{
			attribute.Bool("bool", true),
			attribute.Int64("int64", -42),
			attribute.Float64("float64", 2.5),
			attribute.String("string", "echo"),
			attribute.ByteSlice("bytes", []byte{0, 1, 0xff}),
			attribute.BoolSlice("bools", []bool{true, false}),
			attribute.Int64Slice("int64s", []int64{1, -2}),
			attribute.Float64Slice("float64s", []float64{0.5, -1}),
			attribute.StringSlice("strings", []string{"a", "b"}),
			attribute.Slice("slice", attribute.StringValue("x"), attribute.IntValue(7), attribute.SliceValue(attribute.BoolValue(false))),
			attribute.Map("map", attribute.String("k", "v"), attribute.Map("inner", attribute.Float64("f", 1))),
			{Key: "empty"},
			attribute.String("bad\xffkey", "bad\xfevalue"),
		},
		Events: []sdktrace.Event{
			{Name: "exception", Time: t0.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.String("exception.message", "boom")}, DroppedAttributeCount: 2},
			{Name: "bare", Time: t0.Add(2 * time.Millisecond)},
		},
		Links: []sdktrace.Link{
			{SpanContext: sc(traceID2, spanC, trace.FlagsSampled, "l=1", true), Attributes: []attribute.KeyValue{attribute.Int("n", 1)}, DroppedAttributeCount: 3},
			{SpanContext: sc(traceID2, spanD, 0, "", false)},
		},
		Status:               sdktrace.Status{Code: codes.Error, Description: "upstream down"},
		DroppedAttributes:    4,
		DroppedEvents:        5,
		DroppedLinks:         6,
		Resource:             resource.NewWithAttributes("https://opentelemetry.io/schemas/1.43.0", attribute.String("service.name", "switchboard")),
		InstrumentationScope: instrumentation.Scope{Name: "server", Version: "1.2.3", SchemaURL: "https://example.com/scope", Attributes: attribute.NewSet(attribute.Bool("scope.attr", true))},
	}
	want := []*tracepb.ResourceSpans{{
		Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("switchboard"))}},
		SchemaUrl: "https://opentelemetry.io/schemas/1.43.0",
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope:     &commonpb.InstrumentationScope{Name: "server", Version: "1.2.3", Attributes: []*commonpb.KeyValue{kv("scope.attr", boo(true))}},
			SchemaUrl: "https://example.com/scope",
			Spans: []*tracepb.Span{{
				TraceId:           traceID[:],
				SpanId:            spanB[:],
				TraceState:        "vendor=v1,other=x",
				ParentSpanId:      spanA[:],
				Flags:             1 | hasRemote | isRemote,
				Name:              "tools/call",
				Kind:              tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: uint64(t0.UnixNano()),
				EndTimeUnixNano:   uint64(t0.UnixNano()) + 1_500_000_000,
				Attributes: []*commonpb.KeyValue{
					kv("bool", boo(true)),
					kv("int64", i64(-42)),
					kv("float64", dbl(2.5)),
					kv("string", str("echo")),
					kv("bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}}),
					kv("bools", arr(boo(true), boo(false))),
					kv("int64s", arr(i64(1), i64(-2))),
					kv("float64s", arr(dbl(0.5), dbl(-1))),
					kv("strings", arr(str("a"), str("b"))),
					kv("slice", arr(str("x"), i64(7), arr(boo(false)))),
					kv("map", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
						// attribute.Map sorts its keys.
						kv("inner", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("f", dbl(1))}}}}),
						kv("k", str("v")),
					}}}}),
					kv("empty", &commonpb.AnyValue{}),
					kv("bad\uFFFDkey", str("bad\uFFFDvalue")),
				},
				DroppedAttributesCount: 4,
				Events: []*tracepb.Span_Event{
					{TimeUnixNano: uint64(t0.UnixNano()) + 1_000_000, Name: "exception", Attributes: []*commonpb.KeyValue{kv("exception.message", str("boom"))}, DroppedAttributesCount: 2},
					{TimeUnixNano: uint64(t0.UnixNano()) + 2_000_000, Name: "bare"},
				},
				DroppedEventsCount: 5,
				Links: []*tracepb.Span_Link{
					{TraceId: traceID2[:], SpanId: spanC[:], TraceState: "l=1", Attributes: []*commonpb.KeyValue{kv("n", i64(1))}, DroppedAttributesCount: 3, Flags: 1 | hasRemote | isRemote},
					{TraceId: traceID2[:], SpanId: spanD[:], Flags: hasRemote},
				},
				DroppedLinksCount: 6,
				Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream down"},
			}},
		}},
	}}
	got := roundTrip(t, []sdktrace.ReadOnlySpan{stub.Snapshot()})
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("export request (-want +got):\n%s", diff)
	}
}

// TestConvertRootSpan: no parent, a local (not sampled) span context, and
// no resource or scope at all.
func TestConvertRootSpan(t *testing.T) {
	stub := tracetest.SpanStub{
		Name:        "root",
		SpanContext: sc(traceID, spanA, 0, "", false),
		SpanKind:    trace.SpanKindInternal,
		Status:      sdktrace.Status{Code: codes.Ok},
	}
	want := []*tracepb.ResourceSpans{{
		ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
			TraceId: traceID[:],
			SpanId:  spanA[:],
			Flags:   hasRemote,
			Name:    "root",
			Kind:    tracepb.Span_SPAN_KIND_INTERNAL,
			Status:  &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
		}}}},
	}}
	got := roundTrip(t, []sdktrace.ReadOnlySpan{stub.Snapshot()})
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("export request (-want +got):\n%s", diff)
	}
}

func TestConvertKindAndStatus(t *testing.T) {
	kinds := map[trace.SpanKind]tracepb.Span_SpanKind{
		trace.SpanKindUnspecified: tracepb.Span_SPAN_KIND_UNSPECIFIED,
		trace.SpanKindInternal:    tracepb.Span_SPAN_KIND_INTERNAL,
		trace.SpanKindServer:      tracepb.Span_SPAN_KIND_SERVER,
		trace.SpanKindClient:      tracepb.Span_SPAN_KIND_CLIENT,
		trace.SpanKindProducer:    tracepb.Span_SPAN_KIND_PRODUCER,
		trace.SpanKindConsumer:    tracepb.Span_SPAN_KIND_CONSUMER,
		trace.SpanKind(99):        tracepb.Span_SPAN_KIND_UNSPECIFIED,
	}
	for k, want := range kinds {
		if got := kindProto(k); got != want {
			t.Errorf("kindProto(%v) = %v, want %v", k, got, want)
		}
	}
	statuses := map[codes.Code]tracepb.Status_StatusCode{
		codes.Unset: tracepb.Status_STATUS_CODE_UNSET,
		codes.Ok:    tracepb.Status_STATUS_CODE_OK,
		codes.Error: tracepb.Status_STATUS_CODE_ERROR,
	}
	for c, want := range statuses {
		if got := statusProto(c); got != want {
			t.Errorf("statusProto(%v) = %v, want %v", c, got, want)
		}
	}
}

// TestConvertGroups: spans are grouped by resource, then by scope (name,
// version, schema URL and attributes all count), in first-seen order.
func TestConvertGroups(t *testing.T) {
	resA := resource.NewSchemaless(attribute.String("service.name", "a"))
	resA2 := resource.NewSchemaless(attribute.String("service.name", "a")) // equal to resA, another pointer
	resB := resource.NewSchemaless(attribute.String("service.name", "b"))
	server := instrumentation.Scope{Name: "server"}
	upstreams := instrumentation.Scope{Name: "upstreams", Version: "1"}
	upstreams2 := instrumentation.Scope{Name: "upstreams", Version: "2"}
	span := func(name string, res *resource.Resource, scope instrumentation.Scope) sdktrace.ReadOnlySpan {
		return tracetest.SpanStub{Name: name, SpanContext: sc(traceID, spanA, 1, "", false), Resource: res, InstrumentationScope: scope}.Snapshot()
	}
	spans := []sdktrace.ReadOnlySpan{
		span("1", resA, server),
		span("2", resB, server),
		span("3", resA, upstreams),
		nil, // tolerated
		span("4", resA2, server),
		span("5", resA, upstreams2),
		span("6", resB, server),
	}
	type group struct {
		Resource, Scope, Version string
		Spans                    []string
	}
	var got []group
	for _, rs := range roundTrip(t, spans) {
		for _, ss := range rs.GetScopeSpans() {
			g := group{Resource: rs.GetResource().GetAttributes()[0].GetValue().GetStringValue(), Scope: ss.GetScope().GetName(), Version: ss.GetScope().GetVersion()}
			for _, s := range ss.GetSpans() {
				g.Spans = append(g.Spans, s.GetName())
			}
			got = append(got, g)
		}
	}
	want := []group{
		{"a", "server", "", []string{"1", "4"}},
		{"a", "upstreams", "1", []string{"3"}},
		{"a", "upstreams", "2", []string{"5"}},
		{"b", "server", "", []string{"2", "6"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

func TestEncodeEmpty(t *testing.T) {
	if got := roundTrip(t, nil); len(got) != 0 {
		t.Errorf("no spans encoded as %v", got)
	}
}
