package console

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// TestBuildCharts: calls land in the interval of their start, per
// server; latency quantiles and failure shares are computed from them.
func TestBuildCharts(t *testing.T) {
	from := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Minute) // one minute per interval
	at := func(min int) time.Time { return from.Add(time.Duration(min)*time.Minute + time.Second) }
	calls := []apiclient.Call{
		{Server: "a", Outcome: "ok", DurationMS: 10, StartedAt: at(0)},
		{Server: "a", Outcome: "ok", DurationMS: 30, StartedAt: at(0)},
		{Server: "a", Outcome: "error", DurationMS: 1000, StartedAt: at(5)},
		{Server: "a", Outcome: "tool_error", DurationMS: 20, StartedAt: at(5)},
		{Server: "b", Outcome: "ok", DurationMS: 5, StartedAt: at(23)},
		{Server: "", Outcome: "error", DurationMS: 1, StartedAt: at(1)},
	}
	charts := buildCharts(calls, from, to)
	type sum struct {
		Server           string
		Calls, Errs, TEs int
		P50, P95         float64
		Bars, Dots       int
	}
	var got []sum
	for _, c := range charts {
		got = append(got, sum{c.Server, c.Calls, c.Errors, c.ToolErrs, c.P50, c.P95, len(c.ErrorSVG.Bars), len(c.Latency.Dots)})
	}
	want := []sum{
		{"(unknown tool)", 1, 1, 0, 1, 1, 1, 1},
		{"a", 4, 1, 1, 20, 1000, 2, 2},
		{"b", 1, 0, 0, 5, 5, 1, 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("charts (-want +got):\n%s", d)
	}
	a := charts[1]
	// Interval 0: no failures (a sliver), interval 5: both failed (full).
	if b := a.ErrorSVG.Bars[0]; !b.Empty || !strings.Contains(b.Title, "0 of 2") {
		t.Errorf("first bar %+v", b)
	}
	if b := a.ErrorSVG.Bars[1]; b.Empty || b.Y != chartTop || !strings.Contains(b.Title, "2 of 2") {
		t.Errorf("second bar %+v, want the full height", b)
	}
	if a.Latency.YMax != "1 s" {
		t.Errorf("latency scale top %q, want 1 s", a.Latency.YMax)
	}
	// The bars sit in their intervals, in time order, inside the plot.
	if x0, x5 := a.ErrorSVG.Bars[0].X, a.ErrorSVG.Bars[1].X; !(x0 >= chartLeft && x5 > x0 && x5 < chartW) {
		t.Errorf("bar positions %v, %v", x0, x5)
	}
}

func TestQuantileAndScale(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		q    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{3}, 0.95, 3},
		{[]float64{4, 1, 3, 2}, 0.5, 2},
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 100}, 0.95, 19},
	} {
		if got := quantile(tc.xs, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.xs, tc.q, got, tc.want)
		}
	}
	for v, want := range map[float64]float64{0: 1, 0.3: 0.5, 7: 10, 12: 20, 150: 200, 1000: 1000} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
}

func TestRelative(t *testing.T) {
	for d, want := range map[time.Duration]string{
		5 * time.Second:   "5 s ago",
		3 * time.Minute:   "3 min ago",
		5 * time.Hour:     "5 h ago",
		72 * time.Hour:    "3 days ago",
		-10 * time.Minute: "in 10 min",
	} {
		if got := relative(d); got != want {
			t.Errorf("relative(%s) = %q, want %q", d, got, want)
		}
	}
}
