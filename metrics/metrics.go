// Package metrics exposes Switchboard's Prometheus metrics: tool calls,
// errors by JSON-RPC code and latency per project, server and tool;
// prompt gets and resource reads per project;
// upstream and circuit-breaker state; open sessions.
//
// Label values come only from configuration and the upstreams' own tool
// lists, never from client input: a call to an unknown tool is counted
// under tool="(unknown)", so hostile names cannot blow up cardinality.
// A tool name holding NUL or invalid UTF-8 is escaped as in the call log
// (internal/safetext: a Go string literal).
package metrics

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/safetext"
)

// UnknownTool is the tool label of calls to names no server offers.
const UnknownTool = "(unknown)"

var states = []switchboard.ServerState{
	switchboard.StateIdle, switchboard.StateConnecting, switchboard.StateReady,
	switchboard.StateFailed, switchboard.StateUnavailable, switchboard.StateInvalid,
}

// Metrics is one registry with Switchboard's collectors.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	state    *prometheus.GaugeVec
	breaker  *prometheus.GaugeVec
	restarts *prometheus.CounterVec
	features *prometheus.CounterVec
}

// New registers every collector, plus Go runtime and process metrics.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tool_calls_total",
			Help: "Tool calls by outcome: ok, tool_error (result with isError) or error (JSON-RPC error).",
		}, []string{"project", "server", "tool", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_tool_call_errors_total",
			Help: "Tool calls that ended in a JSON-RPC error, by code.",
		}, []string{"project", "server", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchboard_tool_call_duration_seconds",
			Help:    "Tool call latency through the gateway.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"project", "server", "tool"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_state",
			Help: "1 for the upstream's current state, 0 for the others.",
		}, []string{"project", "server", "state"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_upstream_breaker_open",
			Help: "1 while the upstream's circuit breaker is open.",
		}, []string{"project", "server"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_upstream_connects_total",
			Help: "Successful (re)connections of an upstream, including stdio child restarts.",
		}, []string{"project", "server"}),
		features: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_feature_requests_total",
			Help: "Prompt gets (kind prompt) and resource reads (kind resource) by outcome: ok or error (JSON-RPC error).",
		}, []string{"project", "kind", "outcome"}),
	}
	m.reg.MustRegister(m.calls, m.errors, m.latency, m.state, m.breaker, m.restarts, m.features,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveCall records one tool call. A call to a tool no server offers
// is labelled tool="(unknown)".
func (m *Metrics) ObserveCall(rec switchboard.ToolCallRecord) {
	// The tool name is the upstream's: escaped (as in the call log) where
	// it holds what a label must not carry raw, such as NUL.
	server, tool := safetext.Of(rec.Server), safetext.Of(rec.Tool)
	if server == "" {
		tool = UnknownTool
	}
	m.calls.WithLabelValues(rec.ProjectID, server, tool, rec.Outcome).Inc()
	if rec.Code != 0 {
		m.errors.WithLabelValues(rec.ProjectID, server, strconv.Itoa(rec.Code)).Inc()
	}
	m.latency.WithLabelValues(rec.ProjectID, server, tool).Observe(rec.Duration.Seconds())
}

// ObserveFeature records one prompts/get (kind "prompt") or
// resources/read (kind "resource"). Neither the prompt's name nor the URI
// is a label: they come from clients.
func (m *Metrics) ObserveFeature(rec switchboard.ToolCallRecord, kind string) {
	m.features.WithLabelValues(rec.ProjectID, kind, rec.Outcome).Inc()
}

// SetState records an upstream's state change.
func (m *Metrics) SetState(project, server string, st switchboard.ServerState) {
	for _, s := range states {
		v := 0.0
		if s == st {
			v = 1
		}
		m.state.WithLabelValues(project, server, string(s)).Set(v)
	}
	open := 0.0
	if st == switchboard.StateUnavailable {
		open = 1
	}
	m.breaker.WithLabelValues(project, server).Set(open)
	if st == switchboard.StateReady {
		m.restarts.WithLabelValues(project, server).Inc()
	}
}

// Forget drops the state and breaker series of a server that is gone, or
// with server "" of every server of a project that is gone: a removed
// server must not stay "ready" (or its breaker "open") on dashboards.
// Counters and histograms stay, as counters do.
func (m *Metrics) Forget(project, server string) {
	labels := prometheus.Labels{"project": project}
	if server != "" {
		labels["server"] = server
	}
	m.state.DeletePartialMatch(labels)
	m.breaker.DeletePartialMatch(labels)
}

// Sessions registers a gauge of open client sessions read from fn.
func (m *Metrics) Sessions(fn func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_sessions",
		Help: "Open MCP client sessions (streamable HTTP and legacy SSE).",
	}, func() float64 { return float64(fn()) }))
}
