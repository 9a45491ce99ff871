package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// The light-client benchmark measures the gateway, not the client: a raw
// HTTP client (keep-alive connections, one per session, no MCP SDK, no
// JSON decoding of answers beyond a substring check) posts tools/call for
// echo against
//
//   - "direct": the mcp-go echo server (mcpgo_test.go) over streamable
//     HTTP, in its own process,
//   - "gateway": a separately built and started gateway process (call log
//     on, as by default) whose upstream is that server on stdio,
//   - "gateway-nolog": the same with MCP_SERVER_CALL_LOG=false,
//   - "floor-http" and "floor-proxy": bare net/http servers, alone and in
//     front of a line-echoing child (floor_test.go),
//   - "baseline": another gateway build, with BENCH_LIGHT_BASELINE,
//
// at BENCH_LIGHT_SESSIONS (default 1,8,64) concurrent sessions for
// BENCH_LIGHT_SECONDS (default 3) each, alternating targets per session
// count in one run. The serving process's CPU comes from /proc, so
// "gateway CPU µs/call" is the gateway's own cost, without the client's or
// the upstream's.

const (
	lightDirect  = "direct"
	lightGateway = "gateway"
	lightNoLog   = "gateway-nolog"
	// lightBaseline is another build of the gateway (BENCH_LIGHT_BASELINE).
	lightBaseline = "baseline"
)

// lightResult is one (target, sessions) cell.
type lightResult struct {
	target     string
	sessions   int
	calls      int
	rate       float64
	lat        latencies
	serverCPU  time.Duration // the process answering HTTP
	upstreamCP time.Duration // the gateway's stdio child (0 for direct)
	elapsed    time.Duration
	durs       []time.Duration // every call's latency
	roundCPU   []float64       // the server's CPU µs per call, round by round
}

// merge adds round o of the same cell to r.
func (r lightResult) merge(o lightResult) lightResult {
	r.calls += o.calls
	r.serverCPU += o.serverCPU
	r.upstreamCP += o.upstreamCP
	r.elapsed += o.elapsed
	r.durs = append(r.durs, o.durs...)
	r.roundCPU = append(r.roundCPU, o.roundCPU...)
	r.rate = float64(r.calls) / r.elapsed.Seconds()
	r.lat = summarize(r.durs)
	return r
}

func (r lightResult) perCall(d time.Duration) float64 {
	if r.calls == 0 {
		return 0
	}
	return us(d) / float64(r.calls)
}

// lightTarget is a server the light client loads.
type lightTarget struct {
	name     string
	url      string
	pid      int    // the serving process
	childPID int    // its upstream, 0: none
	pprof    string // base URL of its MCP_SERVER_PPROF_ADDR, "": none
}

// lightSessions parses BENCH_LIGHT_SESSIONS.
func lightSessions() []int {
	v := strings.TrimSpace(os.Getenv("BENCH_LIGHT_SESSIONS"))
	if v == "" {
		return []int{1, 8, 64}
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: ignoring invalid BENCH_LIGHT_SESSIONS=%q; using 1,8,64\n", v)
			return []int{1, 8, 64}
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkLight runs the whole light-client matrix once (it ignores b.N:
// each cell runs for BENCH_LIGHT_SECONDS) and prints one table. Run it
// with -benchtime 1x.
func BenchmarkLight(b *testing.B) {
	if b.N > 1 {
		b.Skip("the light-client matrix runs once per benchmark call; use -benchtime 1x")
	}
	seconds := envInt("BENCH_LIGHT_SECONDS", 3)
	dur := time.Duration(seconds) * time.Second
	dir := b.TempDir()
	bin, err := buildGateway(dir)
	if err != nil {
		b.Skip(err)
	}
	servers, err := writeMCPGoServers(dir)
	if err != nil {
		b.Fatal(err)
	}
	direct, err := startChildServer(envMCPGoChild + "=http")
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	floorHTTP, err := startChildServer(envFloorChild + "=http")
	if err != nil {
		b.Fatal(err)
	}
	defer floorHTTP.Close()
	floorProxy, err := startChildServer(envFloorChild + "=proxy")
	if err != nil {
		b.Fatal(err)
	}
	defer floorProxy.Close()
	// BENCH_LIGHT_PROFILE=dir writes a CPU profile of each gateway target
	// per session count during its first round: dir/gateway-8.pprof,
	// dir/gateway-nolog-8.pprof, dir/baseline-8.pprof, for go tool pprof
	// (-diff_base shows what the call log adds).
	profDir := os.Getenv("BENCH_LIGHT_PROFILE")
	onEnv := []string{"MCP_SERVER_CONFIG=" + servers}
	if profDir != "" {
		onEnv = append(onEnv, "MCP_SERVER_PPROF_ADDR=127.0.0.1:0")
	}
	gwOn, err := startGatewayProc(bin, filepath.Join(dir, "on"), onEnv...)
	if err != nil {
		b.Fatal(err)
	}
	if profDir != "" && gwOn.Pprof == "" {
		b.Fatal("BENCH_LIGHT_PROFILE: the gateway logged no profile listener")
	}
	defer gwOn.stop()
	gwOff, err := startGatewayProc(bin, filepath.Join(dir, "off"), append(onEnv, "MCP_SERVER_CALL_LOG=false")...)
	if err != nil {
		b.Fatal(err)
	}
	defer gwOff.stop()

	// BENCH_LIGHT_BASELINE=path/to/switchboard adds that build as one
	// more target ("baseline", call log on), for a before/after in one run.
	var baseline *gatewayProc
	if bin := os.Getenv("BENCH_LIGHT_BASELINE"); bin != "" {
		if baseline, err = startGatewayProc(bin, filepath.Join(dir, "baseline"), onEnv...); err != nil {
			b.Fatal(err)
		}
		defer baseline.stop()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	targets := []*lightTarget{
		{name: lightDirect, url: direct.URL, pid: direct.Pid()},
		{name: lightGateway, url: gwOn.URL, pid: gwOn.Pid(), pprof: gwOn.Pprof},
		{name: lightNoLog, url: gwOff.URL, pid: gwOff.Pid(), pprof: gwOff.Pprof},
		{name: lightFloorHTTP, url: floorHTTP.URL, pid: floorHTTP.Pid()},
		{name: lightFloorProxy, url: floorProxy.URL, pid: floorProxy.Pid()},
	}
	if baseline != nil {
		targets = append(targets, &lightTarget{name: lightBaseline, url: baseline.URL, pid: baseline.Pid(), pprof: baseline.Pprof})
	}
	// BENCH_LIGHT_TARGETS=gateway,gateway-nolog,baseline runs only those
	// (default all): a comparison of gateway builds need not spend its
	// time on the direct server and the floors.
	if v := strings.TrimSpace(os.Getenv("BENCH_LIGHT_TARGETS")); v != "" {
		want := strings.Split(v, ",")
		targets = slices.DeleteFunc(targets, func(t *lightTarget) bool { return !slices.Contains(want, t.name) })
		if len(targets) == 0 {
			b.Fatalf("BENCH_LIGHT_TARGETS=%q names none of the targets", v)
		}
	}
	// BENCH_LIGHT_ROUNDS (default 1) runs the cycle of targets that many
	// times per session count and adds the rounds up: this machine's
	// speed drifts within a minute, and alternating short rounds spreads
	// the drift over every target alike.
	rounds := envInt("BENCH_LIGHT_ROUNDS", 1)
	var results []lightResult
	for _, n := range lightSessions() {
		cells := make([]lightResult, len(targets))
		for round := range rounds {
			for i, t := range targets {
				prof := ""
				if t.pprof != "" && round == 0 {
					prof = filepath.Join(profDir, fmt.Sprintf("%s-%d.pprof", t.name, n))
				}
				r, err := runLight(ctx, t, n, dur, prof)
				if err != nil {
					b.Fatalf("%s, %d sessions: %v", t.name, n, err)
				}
				if round == 0 {
					cells[i] = r
				} else {
					cells[i] = cells[i].merge(r)
				}
			}
		}
		for _, r := range cells {
			results = append(results, r)
			b.ReportMetric(r.rate, fmt.Sprintf("%s-%d-calls/s", r.target, n))
		}
	}
	summary.set("light", formatLight(results, time.Duration(rounds)*dur))
}

// lightCallBody is the tools/call request the light client posts.
var lightCallBody = []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`)

var pidRE = regexp.MustCompile(`"text":\s*"(\d+)"`)

// runLight opens n sessions on t, warms them up and runs echo calls on
// all of them for d.
func runLight(ctx context.Context, t *lightTarget, n int, d time.Duration, profile string) (lightResult, error) {
	tr := newTransport(n + 4)
	defer tr.CloseIdleConnections()
	c := &rawClient{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: t.url}
	sids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var buf bytes.Buffer
			if sids[i], errs[i] = c.openSession(ctx, &buf); errs[i] != nil {
				return
			}
			for range 20 { // warm-up; the first gateway call starts the upstream
				if errs[i] = lightCall(ctx, c, sids[i], lightCallBody, &buf); errs[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return lightResult{}, err
	}
	if t.childPID == 0 && (t.name == lightGateway || t.name == lightNoLog || t.name == lightBaseline) {
		var buf bytes.Buffer
		body := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pid","arguments":{}}}`)
		if _, _, err := c.post(ctx, sids[0], body, &buf); err != nil {
			return lightResult{}, err
		}
		m := pidRE.FindSubmatch(buf.Bytes())
		if m == nil {
			return lightResult{}, fmt.Errorf("pid tool answered %.300s", buf.String())
		}
		t.childPID, _ = strconv.Atoi(string(m[1]))
	}

	cpu0, err := procCPU(t.pid)
	if err != nil {
		return lightResult{}, err
	}
	var child0 time.Duration
	if t.childPID > 0 {
		if child0, err = procCPU(t.childPID); err != nil {
			return lightResult{}, err
		}
	}
	var profiled chan error
	if profile != "" {
		profiled = make(chan error, 1)
		go func() { profiled <- fetchProfile(ctx, t.pprof, d, profile) }()
	}
	durs := make([][]time.Duration, n)
	start := time.Now()
	deadline := start.Add(d)
	for i := range n {
		wg.Go(func() {
			var buf bytes.Buffer
			lat := make([]time.Duration, 0, 4096)
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if errs[i] = lightCall(ctx, c, sids[i], lightCallBody, &buf); errs[i] != nil {
					break
				}
				lat = append(lat, time.Since(t0))
			}
			durs[i] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if profiled != nil {
		errs = append(errs, <-profiled)
	}
	if err := errors.Join(errs...); err != nil {
		return lightResult{}, err
	}
	cpu1, err := procCPU(t.pid)
	if err != nil {
		return lightResult{}, err
	}
	r := lightResult{target: t.name, sessions: n, serverCPU: cpu1 - cpu0}
	if t.childPID > 0 {
		child1, err := procCPU(t.childPID)
		if err != nil {
			return lightResult{}, err
		}
		r.upstreamCP = child1 - child0
	}
	var all []time.Duration
	for _, l := range durs {
		all = append(all, l...)
	}
	r.calls, r.durs, r.elapsed = len(all), all, elapsed
	r.roundCPU = []float64{r.perCall(r.serverCPU)}
	r.rate = float64(r.calls) / elapsed.Seconds()
	r.lat = summarize(all)
	return r, nil
}

// fetchProfile writes the CPU profile of the next d of the process
// serving pprof at base to path.
func fetchProfile(ctx context.Context, base string, d time.Duration, path string) error {
	secs := max(1, int(d/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// lightCall posts one echo call and checks the answer without decoding it.
func lightCall(ctx context.Context, c *rawClient, sid string, body []byte, buf *bytes.Buffer) error {
	_, status, err := c.post(ctx, sid, body, buf)
	if err != nil {
		return err
	}
	b := buf.Bytes()
	if status != http.StatusOK || !bytes.Contains(b, []byte(`"hello"`)) || bytes.Contains(b, []byte(`"isError":true`)) {
		return fmt.Errorf("echo: status %d, body %.300s", status, b)
	}
	return nil
}

func formatLight(rs []lightResult, d time.Duration) string {
	var w strings.Builder
	fmt.Fprintf(&w, "light client (raw HTTP, keep-alive, %s per cell; CPU from /proc of the serving process):\n", d)
	fmt.Fprintf(&w, "  %-14s %8s %10s %9s %9s %16s %14s\n", "target", "sessions", "calls/s", "p50 µs", "p99 µs", "server-CPU µs/call", "upstream µs/call")
	byKey := map[string]lightResult{}
	for _, r := range rs {
		byKey[r.target+"/"+strconv.Itoa(r.sessions)] = r
		fmt.Fprintf(&w, "  %-14s %8d %10.0f %9.0f %9.0f %16.1f %14.1f\n", r.target, r.sessions, r.rate, us(r.lat.p50), us(r.lat.p99),
			r.perCall(r.serverCPU), r.perCall(r.upstreamCP))
	}
	for _, n := range lightSessions() {
		k := "/" + strconv.Itoa(n)
		d, g, off := byKey[lightDirect+k], byKey[lightGateway+k], byKey[lightNoLog+k]
		if d.rate == 0 || g.rate == 0 {
			continue
		}
		fmt.Fprintf(&w, "  %d sessions: gateway/direct calls/s %.2f", n, g.rate/d.rate)
		if n == 8 {
			fmt.Fprintf(&w, " (target >= 0.75: %s)", verdict(g.rate/d.rate >= 0.75))
		}
		if off.rate > 0 {
			cost := 1 - g.rate/off.rate
			fmt.Fprintf(&w, "; call log cost %.0f%% of calls/s (target < 10%%: %s)", 100*cost, verdict(cost < 0.10))
		}
		p99 := float64(g.lat.p99) / float64(d.lat.p99)
		fmt.Fprintf(&w, "; p99 gateway/direct %.2f", p99)
		if n == 64 {
			fmt.Fprintf(&w, " (target <= 2: %s)", verdict(p99 <= 2))
		}
		cpu := g.perCall(g.serverCPU)
		// The 60 µs CPU target of issue 11 was withdrawn (issue 26): it is
		// below the floors printed beside it.
		fmt.Fprintf(&w, "; gateway CPU %.1f µs/call with the call log on", cpu)
		if fh, fp := byKey[lightFloorHTTP+k], byKey[lightFloorProxy+k]; fh.calls > 0 && fp.calls > 0 {
			fmt.Fprintf(&w, ", floors here: net/http alone %.1f, a bare stdio proxy %.1f", fh.perCall(fh.serverCPU), fp.perCall(fp.serverCPU))
		}
		w.WriteString("\n")
	}
	w.WriteString(logCost(byKey))
	return strings.TrimRight(w.String(), "\n")
}

// logCost says, per session count, what the call log costs in gateway
// CPU per call round by round (call log on minus off in the same round,
// which alternate, so both saw the same machine), and the same for the
// baseline build when there is one; with the server CPU range of every
// gateway target over the rounds.
func logCost(byKey map[string]lightResult) string {
	var w strings.Builder
	for _, n := range lightSessions() {
		k := "/" + strconv.Itoa(n)
		off := byKey[lightNoLog+k]
		if len(off.roundCPU) == 0 {
			continue
		}
		for _, name := range []string{lightGateway, lightBaseline} {
			on := byKey[name+k]
			if len(on.roundCPU) != len(off.roundCPU) {
				continue
			}
			diff := make([]float64, len(on.roundCPU))
			for i := range diff {
				diff[i] = on.roundCPU[i] - off.roundCPU[i]
			}
			fmt.Fprintf(&w, "  %d sessions, %s: call log cost %s µs/call (on %s, off %s; median, range over %d rounds; target < 20)\n",
				n, name, spread(diff), spread(on.roundCPU), spread(off.roundCPU), len(diff))
		}
	}
	return w.String()
}

// spread is the median of v and its range.
func spread(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.1f [%.1f–%.1f]", m, s[0], s[len(s)-1])
}

// discardWriter is a ResponseWriter that keeps only the status and the
// byte count, for the in-process hot path.
type discardWriter struct {
	h      http.Header
	status int
	n      int
	tail   []byte
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Flush()              {}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	w.tail = append(w.tail[:0], p[max(0, len(p)-64):]...)
	return len(p), nil
}

// BenchmarkHotPath runs one echo tools/call per op through an in-process
// gateway's HTTP handler (call log on, stdio upstream), with no network
// and no client in between: -benchmem's allocs/op is the gateway's
// allocations per call (plus the few of building the request here).
func BenchmarkHotPath(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	spec := switchboard.ServerSpec{Name: "echo", Transport: switchboard.TransportStdio, Command: exe,
		Env: map[string]string{envMCPGoChild: "stdio"}}
	gw, err := startGateway([]switchboard.ServerSpec{spec})
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	ctx := context.Background()
	tr := newTransport(2)
	defer tr.CloseIdleConnections()
	c := &rawClient{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: gw.URL}
	var buf bytes.Buffer
	sid, err := c.openSession(ctx, &buf)
	if err != nil {
		b.Fatal(err)
	}
	if err := lightCall(ctx, c, sid, lightCallBody, &buf); err != nil {
		b.Fatal(err)
	}
	h := gw.edge.Handler()
	hdr := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Session-Id":       {sid},
		"Mcp-Protocol-Version": {protocolVersion},
	}
	rd := bytes.NewReader(nil)
	w := &discardWriter{h: http.Header{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	call := func() {
		rd.Reset(lightCallBody)
		r := *req
		r.Header = hdr
		r.Body = io.NopCloser(rd)
		r.ContentLength = int64(len(lightCallBody))
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, &r)
		if w.status != http.StatusOK || !bytes.Contains(w.tail, []byte("hello")) {
			b.Fatalf("echo through the handler: status %d, %d bytes, tail %q", w.status, w.n, w.tail)
		}
	}
	for range 100 {
		call()
	}
	if os.Getenv("BENCH_HOTPATH_PARALLEL") != "" {
		// For profiling under concurrency (8 goroutines on 2 cores): every
		// goroutine posts on the same session.
		b.SetParallelism(4)
		var ids atomic.Int64
		cpu0 := selfCPU()
		defer func() { b.ReportMetric(us(selfCPU()-cpu0)/float64(b.N), "cpu-µs/call") }()
		b.RunParallel(func(pb *testing.PB) {
			rd := bytes.NewReader(nil)
			w := &discardWriter{h: http.Header{}}
			var body []byte
			for pb.Next() {
				body = fmt.Appendf(body[:0], `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, ids.Add(1))
				rd.Reset(body)
				r := *req
				r.Header = hdr.Clone()
				r.Body = io.NopCloser(rd)
				r.ContentLength = int64(len(lightCallBody))
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, &r)
				if w.status != http.StatusOK || !bytes.Contains(w.tail, []byte("hello")) {
					b.Errorf("status %d tail %q", w.status, w.tail)
					return
				}
			}
		})
		return
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	cpu0 := selfCPU()
	b.ResetTimer()
	for b.Loop() {
		call()
	}
	b.StopTimer()
	// This process is the gateway without its network: the upstream is a
	// child process, and the client is the loop above.
	b.ReportMetric(us(selfCPU()-cpu0)/float64(b.N), "cpu-µs/call")
	runtime.ReadMemStats(&m1)
	summary.set("hotpath", fmt.Sprintf("hot path in-process (handler, call log on, stdio upstream): %.0f allocs/call, %.0f B/call, %.1f µs/call wall (%d calls)",
		float64(m1.Mallocs-m0.Mallocs)/float64(b.N), float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N),
		float64(b.Elapsed().Microseconds())/float64(b.N), b.N))
}
