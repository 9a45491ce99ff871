// Package otelspan is the one place that decides whether a span is worth
// starting: the edge (server/) and the upstream hop (upstreams/) both ask
// it, so tracing that is off costs them nothing.
package otelspan

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// unsetProvider is otel's global TracerProvider while none is installed.
// It records nothing but still allocates a span and a context per Start.
var unsetProvider = otel.GetTracerProvider()

// None stands in for a span when tracing is off.
var None trace.Span = noop.Span{}

// Tracer returns the global provider's tracer called name, or nil when
// tracing is off (no provider installed, or the no-op put back): then the
// caller starts nothing and allocates nothing. It is looked up per call,
// not kept: otel's global tracers stay bound to the first provider ever
// installed, and tests install several.
func Tracer(name string) trace.Tracer {
	tp := otel.GetTracerProvider()
	if _, off := tp.(noop.TracerProvider); off || tp == unsetProvider {
		return nil
	}
	return tp.Tracer(name)
}
