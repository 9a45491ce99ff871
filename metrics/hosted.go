package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard"
)

var hostedStates = []string{
	switchboard.HostedStarting, switchboard.HostedRunning, switchboard.HostedStopped, switchboard.HostedRestarting,
	switchboard.HostedUnresponsive, switchboard.HostedBackoff, switchboard.HostedFailed,
}

// Hosted registers the hosted servers' series, read from fn at every
// scrape: switchboard_hosted_state (1 for the current state),
// switchboard_hosted_restarts and switchboard_hosted_crashes (as status
// counts them: since the gateway started the server, crashes since the last
// manual restart; hence gauges). Call latency per hosted server is in the tool-call series,
// labelled with the server's name like any upstream's.
func (m *Metrics) Hosted(fn func() []switchboard.HostedStatus) {
	m.reg.MustRegister(hostedCollector{fn})
}

var (
	hostedStateDesc    = prometheus.NewDesc("switchboard_hosted_state", "1 for the hosted server's current state, 0 for the others.", []string{"project", "server", "state"}, nil)
	hostedRestartsDesc = prometheus.NewDesc("switchboard_hosted_restarts", "Container restarts of a hosted server since this gateway process started it.", []string{"project", "server"}, nil)
	hostedCrashesDesc  = prometheus.NewDesc("switchboard_hosted_crashes", "Crashes (non-zero exit or OOM kill) of a hosted server since it was started or manually restarted.", []string{"project", "server"}, nil)
)

type hostedCollector struct {
	fn func() []switchboard.HostedStatus
}

func (c hostedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- hostedStateDesc
	ch <- hostedRestartsDesc
	ch <- hostedCrashesDesc
}

func (c hostedCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.fn() {
		for _, s := range hostedStates {
			v := 0.0
			if s == st.Status {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(hostedStateDesc, prometheus.GaugeValue, v, st.Project, st.Name, s)
		}
		ch <- prometheus.MustNewConstMetric(hostedRestartsDesc, prometheus.GaugeValue, float64(st.RestartCount), st.Project, st.Name)
		ch <- prometheus.MustNewConstMetric(hostedCrashesDesc, prometheus.GaugeValue, float64(st.CrashCount), st.Project, st.Name)
	}
}
