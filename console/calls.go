package console

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// Chart limits: the charts read the call log through the API, a page of
// 1000 at a time, up to maxChartCalls calls in the window.
const (
	chartPage     = 1000
	maxChartCalls = 20000
	chartBuckets  = 24
)

// windows are the chart windows offered, by their query value.
type window struct {
	Key   string
	Label string
	D     time.Duration
}

var windows = []window{
	{"15m", "15 minutes", 15 * time.Minute},
	{"1h", "1 hour", time.Hour},
	{"6h", "6 hours", 6 * time.Hour},
	{"24h", "24 hours", 24 * time.Hour},
	{"7d", "7 days", 7 * 24 * time.Hour},
}

// callFilter is the Calls page's form: the API's filters plus the
// charts' window.
type callFilter struct {
	Server, Tool, Outcome, Since, Until, Limit, Cursor, Window string
}

type callsData struct {
	Filter    callFilter
	Calls     []apiclient.Call
	Next      template.URL // the next (older) page
	Windows   []window
	Window    string
	Charts    []serverChart
	Truncated bool // the window held more calls than the charts read
	Counted   int
	Servers   []string
}

func (c *Console) callsPage(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Calls", "calls")
	if _, ok := c.project(w, r, v); !ok {
		return
	}
	p := r.PathValue("project")
	v.Title = "Calls · " + p
	q := r.URL.Query()
	f := callFilter{Server: q.Get("server"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Since: q.Get("since"),
		Until: q.Get("until"), Limit: q.Get("limit"), Cursor: q.Get("cursor"), Window: q.Get("window")}
	d := callsData{Filter: f, Windows: windows, Window: "1h"}
	if slices.ContainsFunc(windows, func(x window) bool { return x.Key == f.Window }) {
		d.Window = f.Window
	}
	cq := apiclient.CallQuery{Server: f.Server, Tool: f.Tool, Outcome: f.Outcome, Cursor: f.Cursor, Limit: 50}
	if f.Since != "" {
		cq.Since = rfc3339(f.Since)
	}
	if f.Until != "" {
		cq.Until = rfc3339(f.Until)
	}
	var page apiclient.CallPage
	var rp reply
	if n, err := strconv.Atoi(f.Limit); f.Limit != "" && (err != nil || n < 1 || n > switchboard.MaxToolCallLimit) {
		rp = reply{status: http.StatusBadRequest, msg: fmt.Sprintf("limit must be an integer from 1 to %d", switchboard.MaxToolCallLimit)}
	} else {
		if f.Limit != "" {
			cq.Limit = n
		}
		page, err = c.api(r).Calls(r.Context(), p, cq)
		rp = c.fromAPI(err)
	}
	if rp.status == http.StatusBadRequest {
		// A filter the API refused: show the form again with its message.
		v.Error = rp.message()
	} else if !rp.ok() {
		c.failed(w, r, v, rp)
		return
	}
	d.Calls = page.Calls
	if page.Next != "" {
		nq := r.URL.Query()
		nq.Set("cursor", page.Next)
		d.Next = template.URL("/ui/p/" + url.PathEscape(p) + "/calls?" + nq.Encode())
	}
	// The charts: every call of the window (same server and tool filters).
	var win time.Duration
	for _, x := range windows {
		if x.Key == d.Window {
			win = x.D
		}
	}
	now := c.opts.Now().UTC()
	from := now.Add(-win)
	chq := apiclient.CallQuery{Server: f.Server, Tool: f.Tool, Since: from.Format(time.RFC3339Nano), Until: now.Format(time.RFC3339Nano), Limit: chartPage}
	var all []apiclient.Call
	for len(all) < maxChartCalls {
		pg, err := c.api(r).Calls(r.Context(), p, chq)
		if err != nil {
			if v.Error == "" {
				v.Error = "Charts: " + c.fromAPI(err).message()
			}
			break
		}
		all = append(all, pg.Calls...)
		if pg.Next == "" {
			break
		}
		chq.Cursor = pg.Next
		if len(all) >= maxChartCalls {
			d.Truncated = true
		}
	}
	d.Counted = len(all)
	d.Charts = buildCharts(all, from, now)
	if servers, err := c.api(r).Servers(r.Context(), p); err == nil {
		for _, s := range servers.Servers {
			d.Servers = append(d.Servers, s.Name)
		}
	}
	v.Data = d
	c.render(w, http.StatusOK, "calls", v)
}

// rfc3339 accepts what a datetime-local field sends ("2026-11-24T15:04",
// read as UTC) besides RFC 3339; anything else goes to the API as is,
// which says what is wrong with it.
func rfc3339(s string) string {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return s
}

// ---- charts

// serverChart is one server's calls in the window, summed up and drawn.
type serverChart struct {
	Server   string
	Calls    int
	Errors   int // outcome error (the gateway or the upstream failed)
	ToolErrs int // outcome tool_error (isError results)
	P50, P95 float64
	ErrRate  float64
	Latency  svgChart
	ErrorSVG svgChart
}

// svgChart is the geometry of one inline SVG chart, computed here so
// the template only places it.
type svgChart struct {
	W, H          int
	Left, Bottom  int
	P50, P95      string // polyline points
	Dots          []dot
	Bars          []bar
	YMax, YMid    string
	YMidPos       float64
	Ticks         []tick
	PlotW, PlotH  int
	PlotX, PlotY2 int
}

type dot struct {
	X, Y  float64
	Title string
}

type bar struct {
	X, Y, W, H float64
	Title      string
	Empty      bool
}

type tick struct {
	X      float64
	Label  string
	Anchor string // text-anchor: the end labels stay inside the chart
}

// Chart size, in SVG units (scaled by CSS to the column's width).
const (
	chartW, chartH    = 360, 140
	chartLeft, chartB = 48, 20
	chartTop          = 8
)

// buildCharts buckets calls by server over [from, to).
func buildCharts(calls []apiclient.Call, from, to time.Time) []serverChart {
	byServer := map[string][]apiclient.Call{}
	var names []string
	for _, cl := range calls {
		s := cl.Server
		if s == "" {
			s = "(unknown tool)"
		}
		if _, ok := byServer[s]; !ok {
			names = append(names, s)
		}
		byServer[s] = append(byServer[s], cl)
	}
	slices.Sort(names)
	span := to.Sub(from)
	if span <= 0 {
		span = time.Second
	}
	out := make([]serverChart, 0, len(names))
	for _, name := range names {
		cs := byServer[name]
		sc := serverChart{Server: name, Calls: len(cs)}
		buckets := make([][]apiclient.Call, chartBuckets)
		var all []float64
		for _, cl := range cs {
			i := int(float64(cl.StartedAt.Sub(from)) / float64(span) * chartBuckets)
			i = min(max(i, 0), chartBuckets-1)
			buckets[i] = append(buckets[i], cl)
			all = append(all, cl.DurationMS)
			switch cl.Outcome {
			case "error":
				sc.Errors++
			case "tool_error":
				sc.ToolErrs++
			}
		}
		sc.P50, sc.P95 = quantile(all, 0.5), quantile(all, 0.95)
		if sc.Calls > 0 {
			sc.ErrRate = float64(sc.Errors+sc.ToolErrs) / float64(sc.Calls)
		}
		sc.Latency = latencyChart(buckets, from, span)
		sc.ErrorSVG = errorChart(buckets, from, span)
		out = append(out, sc)
	}
	return out
}

func frame(from time.Time, span time.Duration) svgChart {
	ch := svgChart{W: chartW, H: chartH, Left: chartLeft, Bottom: chartB, PlotX: chartLeft,
		PlotW: chartW - chartLeft - 12, PlotH: chartH - chartB - chartTop, PlotY2: chartH - chartB}
	layout := "15:04"
	if span > 36*time.Hour {
		layout = "01-02"
	}
	for i := 0; i <= 4; i++ {
		t := from.Add(span * time.Duration(i) / 4)
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 4:
			anchor = "end"
		}
		ch.Ticks = append(ch.Ticks, tick{X: float64(ch.PlotX) + float64(ch.PlotW)*float64(i)/4, Label: t.UTC().Format(layout), Anchor: anchor})
	}
	return ch
}

// bucketX is the centre of bucket i.
func (ch svgChart) bucketX(i int) float64 {
	return float64(ch.PlotX) + (float64(i)+0.5)*float64(ch.PlotW)/chartBuckets
}

func (ch svgChart) y(v, maxV float64) float64 {
	return float64(chartTop) + float64(ch.PlotH)*(1-v/maxV)
}

func latencyChart(buckets [][]apiclient.Call, from time.Time, span time.Duration) svgChart {
	ch := frame(from, span)
	p50 := make([]float64, len(buckets))
	p95 := make([]float64, len(buckets))
	top := 0.0
	for i, b := range buckets {
		if len(b) == 0 {
			continue
		}
		ds := make([]float64, len(b))
		for j, cl := range b {
			ds[j] = cl.DurationMS
		}
		p50[i], p95[i] = quantile(ds, 0.5), quantile(ds, 0.95)
		top = max(top, p95[i])
	}
	top = niceCeil(top)
	ch.YMax, ch.YMid, ch.YMidPos = msLabel(top), msLabel(top/2), ch.y(top/2, top)
	var l50, l95 []string
	for i, b := range buckets {
		if len(b) == 0 {
			continue
		}
		x := ch.bucketX(i)
		l50 = append(l50, fmt.Sprintf("%.1f,%.1f", x, ch.y(p50[i], top)))
		l95 = append(l95, fmt.Sprintf("%.1f,%.1f", x, ch.y(p95[i], top)))
		ch.Dots = append(ch.Dots, dot{X: x, Y: ch.y(p50[i], top), Title: fmt.Sprintf("%s: %d calls, p50 %s, p95 %s",
			from.Add(span*time.Duration(i)/chartBuckets).UTC().Format("15:04"), len(b), msLabel(p50[i]), msLabel(p95[i]))})
	}
	ch.P50, ch.P95 = strings.Join(l50, " "), strings.Join(l95, " ")
	return ch
}

func errorChart(buckets [][]apiclient.Call, from time.Time, span time.Duration) svgChart {
	ch := frame(from, span)
	ch.YMax, ch.YMid, ch.YMidPos = "100%", "50%", ch.y(0.5, 1)
	w := float64(ch.PlotW)/chartBuckets - 2
	for i, b := range buckets {
		if len(b) == 0 {
			continue
		}
		bad := 0
		for _, cl := range b {
			if cl.Outcome != "ok" {
				bad++
			}
		}
		rate := float64(bad) / float64(len(b))
		y := ch.y(rate, 1)
		br := bar{X: ch.bucketX(i) - w/2, Y: y, W: w, H: float64(ch.PlotY2) - y,
			Title: fmt.Sprintf("%s: %d of %d calls failed", from.Add(span*time.Duration(i)/chartBuckets).UTC().Format("15:04"), bad, len(b))}
		if bad == 0 {
			// A sliver marks "calls, none failed" apart from "no calls".
			br.Y, br.H, br.Empty = float64(ch.PlotY2)-2, 2, true
		}
		ch.Bars = append(ch.Bars, br)
	}
	return ch
}

// quantile is the q-quantile of xs (nearest rank); 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// niceCeil rounds a chart's top up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func msLabel(v float64) string {
	switch {
	case v >= 1000:
		return strconv.FormatFloat(v/1000, 'g', 3, 64) + " s"
	case v >= 1:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'g', 2, 64) + " ms"
	}
}
