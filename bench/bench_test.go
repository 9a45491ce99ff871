package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

const (
	modeDirect     = "direct"         // fixture in this process, over streamable HTTP
	modeDirectProc = "direct-process" // fixture in its own process, over streamable HTTP
	modeGateway    = "gateway-stdio"  // gateway in this process, fixture its stdio child
)

// echoStats is the result of one BenchmarkEcho run.
type echoStats struct {
	sessions int
	calls    int
	elapsed  time.Duration
	rate     float64 // calls/s
	lat      latencies
	selfCPU  time.Duration // this process: client (+ gateway or fixture)
	childCPU time.Duration // the gateway's stdio upstream
}

// BenchmarkEcho measures tools/call throughput and latency of the echo
// tool with BENCH_SESSIONS (default 8) concurrent go-sdk client sessions:
// directly against the fixture over streamable HTTP (served in this
// process, "direct", and from its own process, "direct-process"), and
// through the gateway (in-process, on loopback) with the fixture as its
// stdio child. One op is one tools/call; the gateway line also reports
// gw/direct and gw/direct-proc, its calls/s over the direct ones of the
// same run. cpu-us/call counts this process plus the fixture's process.
//
// "direct" shares this process (and its garbage collector) with the
// client, while the gateway's fixture runs in a process of its own; on a
// small machine that favours the gateway. "direct-process" has the same
// process layout as the gateway case and is the fairer baseline.
func BenchmarkEcho(b *testing.B) {
	sessions := envInt("BENCH_SESSIONS", 8)

	// Servers live for the whole benchmark (the framework calls each
	// sub-benchmark several times while it ramps b.N up); client sessions
	// are opened per call.
	var direct *httptest.Server
	var directProc *fixtureProc
	var gw *gateway
	defer func() {
		if direct != nil {
			direct.Close()
		}
		if directProc != nil {
			directProc.Close()
		}
		if gw != nil {
			gw.Close()
		}
	}()

	b.Run(modeDirect, func(b *testing.B) {
		if direct == nil {
			direct = httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{}))
		}
		benchEcho(b, modeDirect, direct.URL, sessions, 0)
	})
	b.Run(modeDirectProc, func(b *testing.B) {
		if directProc == nil {
			var err error
			if directProc, err = startFixtureProc(); err != nil {
				b.Fatal(err)
			}
		}
		benchEcho(b, modeDirectProc, directProc.URL, sessions, directProc.Pid())
	})
	b.Run(modeGateway, func(b *testing.B) {
		if gw == nil {
			spec, err := fixtureSpec("fixture", 0)
			if err != nil {
				b.Fatal(err)
			}
			if gw, err = startGateway([]switchboard.ServerSpec{spec}); err != nil {
				b.Fatal(err)
			}
		}
		benchEcho(b, modeGateway, gw.URL, sessions, -1)
	})
}

// benchEcho runs b.N echo calls over n sessions to endpoint. fixturePID
// is the fixture's process when it is not this one, -1 to find it with the
// fixture's pid tool (the gateway's stdio child), 0 for this process; its
// CPU time is counted with this process's.
func benchEcho(b *testing.B, mode, endpoint string, n int, fixturePID int) {
	ctx := context.Background()
	tr := newTransport(4*n + 4)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sessions, err := connectSessions(cctx, endpoint, hc, n)
	if err != nil {
		b.Fatalf("connect %d sessions to %s: %v", n, endpoint, err)
	}
	defer closeSessions(sessions)

	// Warm up: the first call through the gateway starts the upstream.
	var wg sync.WaitGroup
	warm := make([]error, n)
	for i, cs := range sessions {
		wg.Go(func() {
			p := echoParams()
			for range 20 {
				if warm[i] = echoOnce(cctx, cs, p); warm[i] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range warm {
		if err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}

	childPID := max(fixturePID, 0)
	if fixturePID < 0 {
		res, err := sessions[0].CallTool(cctx, &mcp.CallToolParams{Name: "pid", Arguments: map[string]any{}})
		if err != nil || len(res.Content) != 1 {
			b.Fatalf("pid tool: %v", err)
		}
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			childPID, _ = strconv.Atoi(tc.Text)
		}
		if childPID <= 0 {
			b.Fatalf("pid tool returned %#v", res.Content[0])
		}
	}

	var next atomic.Int64
	var failed atomic.Bool
	var firstErr error
	var errOnce sync.Once
	durs := make([][]time.Duration, n)
	rctx, stop := stallGuard(ctx, &next, 30*time.Second)
	defer stop()

	var childCPU0 time.Duration
	if childPID > 0 {
		if childCPU0, err = procCPU(childPID); err != nil {
			b.Fatalf("fixture CPU: %v", err)
		}
	}
	selfCPU0 := selfCPU()
	b.ResetTimer()
	start := time.Now()
	for i, cs := range sessions {
		wg.Go(func() {
			p := echoParams()
			d := make([]time.Duration, 0, b.N/n+1)
			for !failed.Load() && next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				err := echoOnce(rctx, cs, p)
				d = append(d, time.Since(t0))
				if err != nil {
					if cause := context.Cause(rctx); cause != nil {
						err = fmt.Errorf("%w (%v)", err, cause)
					}
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
				}
			}
			durs[i] = d
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	s := echoStats{sessions: n, calls: b.N, elapsed: elapsed, rate: float64(b.N) / elapsed.Seconds(), selfCPU: selfCPU() - selfCPU0}
	if childPID > 0 {
		c, err := procCPU(childPID)
		if err != nil {
			b.Fatalf("fixture CPU: %v", err)
		}
		s.childCPU = c - childCPU0
	}
	if firstErr != nil {
		b.Fatalf("%s: tools/call echo: %v", mode, firstErr)
	}

	var all []time.Duration
	for _, d := range durs {
		all = append(all, d...)
	}
	s.lat = summarize(all)
	cpuPerCall := (s.selfCPU + s.childCPU) / time.Duration(b.N)
	b.ReportMetric(s.rate, "calls/s")
	b.ReportMetric(us(s.lat.p50), "p50-us")
	b.ReportMetric(us(s.lat.p99), "p99-us")
	b.ReportMetric(us(cpuPerCall), "cpu-us/call")
	summary.setEcho(mode, s)
	cpu := fmt.Sprintf("CPU/call %.0f µs", us(cpuPerCall))
	switch {
	case mode == modeGateway:
		cpu += fmt.Sprintf(" = client+gateway %.0f + fixture %.0f", us(s.selfCPU/time.Duration(b.N)), us(s.childCPU/time.Duration(b.N)))
	case childPID > 0:
		cpu += fmt.Sprintf(" = client %.0f + fixture %.0f", us(s.selfCPU/time.Duration(b.N)), us(s.childCPU/time.Duration(b.N)))
	default:
		cpu += " (client + fixture, one process)"
	}
	block := fmt.Sprintf("echo %-13s %d sessions: %6.0f calls/s  p50 %6.0f µs  p99 %6.0f µs  max %6.0f µs  %s  (%d calls in %s)",
		mode, n, s.rate, us(s.lat.p50), us(s.lat.p99), us(s.lat.max), cpu, s.calls, elapsed.Round(time.Millisecond))
	if mode == modeGateway {
		if d, ok := summary.getEcho(modeDirect); ok && d.rate > 0 {
			b.ReportMetric(s.rate/d.rate, "gw/direct")
		}
		if d, ok := summary.getEcho(modeDirectProc); ok && d.rate > 0 {
			b.ReportMetric(s.rate/d.rate, "gw/direct-proc")
		}
	}
	summary.set("echo/"+mode, block)
}

// BenchmarkToolsList measures tools/list through the gateway with
// BENCH_UPSTREAMS (default 50) stdio fixture upstreams, each with
// BENCH_UPSTREAM_TOOLS (default 20) extra tools besides the fixture's 13
// standard ones (those collide across servers: the first server keeps
// them, the rest are shadowed). Requests are raw JSON-RPC POSTs, one at a
// time over one keep-alive connection; one op is one tools/list, response
// read in full.
func BenchmarkToolsList(b *testing.B) {
	nUp := envInt("BENCH_UPSTREAMS", 50)
	nTools := envInt("BENCH_UPSTREAM_TOOLS", 20)
	specs := make([]switchboard.ServerSpec, nUp)
	for i := range specs {
		var err error
		if specs[i], err = fixtureSpec(fmt.Sprintf("up%02d", i), nTools); err != nil {
			b.Fatal(err)
		}
	}
	setupStart := time.Now()
	gw, err := startGateway(specs)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()

	tr := newTransport(2)
	defer tr.CloseIdleConnections()
	c := &rawClient{hc: &http.Client{Transport: tr, Timeout: 90 * time.Second}, url: gw.URL}
	ctx := context.Background()
	var buf bytes.Buffer
	sid, err := c.openSession(ctx, &buf)
	if err != nil {
		b.Fatal(err)
	}
	// The first tools/list starts every upstream and waits for them.
	names, size, err := c.toolNames(ctx, sid)
	if err != nil {
		b.Fatal(err)
	}
	if bad := gw.notReady(); len(bad) > 0 {
		b.Fatalf("%d of %d upstreams not ready after the first tools/list:\n%s", len(bad), nUp, strings.Join(bad, "\n"))
	}
	tools := distinct(names)
	if tools != len(names) {
		b.Fatalf("tools/list returned %d tools but only %d distinct names", len(names), tools)
	}
	setup := time.Since(setupStart)

	b.Run(fmt.Sprintf("upstreams=%d/tools=%d", nUp, tools), func(b *testing.B) {
		durs := make([]time.Duration, 0, b.N)
		var out bytes.Buffer
		var done atomic.Int64
		rctx, stop := stallGuard(ctx, &done, 30*time.Second)
		defer stop()
		b.SetBytes(int64(size))
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			_, status, err := c.post(rctx, sid, toolsListBody, &out)
			durs = append(durs, time.Since(t0))
			if err != nil || status != http.StatusOK || out.Len() != size {
				b.Fatalf("tools/list: status %d, %d bytes (want %d), err %v", status, out.Len(), size, err)
			}
			done.Add(1)
		}
		elapsed := time.Since(start)
		b.StopTimer()
		l := summarize(durs)
		b.ReportMetric(us(l.p50), "p50-us")
		b.ReportMetric(us(l.p99), "p99-us")
		b.ReportMetric(float64(tools), "tools")
		summary.set("toolslist", fmt.Sprintf(
			"tools/list %d upstreams, %d tools (%d KiB): p50 %.1f µs  p99 %.1f µs  max %.1f µs  %.0f req/s  (target p50 < 1 ms: %s; %d requests; gateway + upstream start %s)",
			nUp, tools, size>>10, us(l.p50), us(l.p99), us(l.max), float64(b.N)/elapsed.Seconds(),
			verdict(l.p50 < time.Millisecond), b.N, setup.Round(time.Millisecond)))
	})
}

// BenchmarkIdleMemory builds cmd/switchboard, runs it as a separate
// process and reads its VmRSS idle and with BENCH_MEMORY_SESSIONS
// (default 1000) idle sessions open, on one fresh process per -count. The
// timed loop then samples the RSS with the sessions open, once a
// millisecond for the bench time; sessions-MiB is the mean of the samples
// (one op is one sample, so ns/op says nothing about the gateway).
func BenchmarkIdleMemory(b *testing.B) {
	n := envInt("BENCH_MEMORY_SESSIONS", 1000)
	bin, err := buildGateway(b.TempDir())
	if err != nil {
		b.Skip(err) // no toolchain: nothing to measure
	}
	b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p, r, err := measureIdleMemory(ctx, bin, b.TempDir(), n, 750*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		defer p.stop()
		var sum, samples int64
		for b.Loop() {
			kib, _, err := p.rss()
			if err != nil {
				b.Fatal(err)
			}
			sum += kib
			samples++
			time.Sleep(time.Millisecond)
		}
		if samples > 0 {
			r.sessKiB = sum / samples
		}
		idle, withSess := mib(r.idleKiB), mib(r.sessKiB)
		delta := withSess - idle
		b.ReportMetric(idle, "idle-MiB")
		b.ReportMetric(withSess, "sessions-MiB")
		b.ReportMetric(delta, "delta-MiB")
		b.ReportMetric(delta*1024/float64(n), "KiB/session")
		summary.set("memory", formatMemory(n, int(samples), r))
	})
}

func formatMemory(n, samples int, r memResult) string {
	idle, withSess := mib(r.idleKiB), mib(r.sessKiB)
	delta := withSess - idle
	return fmt.Sprintf("gateway RSS idle %.1f MiB (target < 40 MB: %s); with %d idle sessions %.1f MiB, +%.1f MiB = %.1f KiB/session (target < +50 MB: %s)\n"+
		"  (with sessions: mean of %d samples; peak RSS %.1f MiB; %d sessions opened in %s by 8 clients)",
		idle, verdict(idle < 40*1e6/(1<<20)), n, withSess, delta, delta*1024/float64(n), verdict(delta < 50*1e6/(1<<20)),
		max(samples, 1), mib(r.peakKiB), n, r.openTime.Round(time.Millisecond))
}

// TestIdleMemory runs the memory measurement once as a test; it is skipped
// unless BENCH_MEMORY=1.
func TestIdleMemory(t *testing.T) {
	if os.Getenv("BENCH_MEMORY") != "1" {
		t.Skip("set BENCH_MEMORY=1 to measure the gateway's idle RSS")
	}
	n := envInt("BENCH_MEMORY_SESSIONS", 1000)
	bin, err := buildGateway(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, r, err := measureIdleMemory(ctx, bin, t.TempDir(), n, 750*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	p.stop()
	block := formatMemory(n, 1, r)
	t.Log(block)
	summary.set("memory", block)
}

// TestHarness checks, quickly, that the benchmark harness still works
// against the current gateway: go-sdk sessions direct and through the
// gateway, echo calls, and a raw tools/list with two upstreams.
func TestHarness(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	direct := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{}))
	defer direct.Close()
	directProc, err := startFixtureProc()
	if err != nil {
		t.Fatal(err)
	}
	defer directProc.Close()
	if _, err := procCPU(directProc.Pid()); err != nil {
		t.Fatal(err)
	}
	var specs []switchboard.ServerSpec
	for i, extra := range []int{0, 3} {
		spec, err := fixtureSpec(fmt.Sprintf("up%d", i), extra)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	gw, err := startGateway(specs)
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()

	tr := newTransport(8)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	for _, url := range []string{direct.URL, directProc.URL, gw.URL} {
		sessions, err := connectSessions(ctx, url, hc, 2)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		for _, cs := range sessions {
			if err := echoOnce(ctx, cs, echoParams()); err != nil {
				t.Fatalf("%s: %v", url, err)
			}
		}
		closeSessions(sessions)
	}

	c := &rawClient{hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}, url: gw.URL}
	var buf bytes.Buffer
	sid, err := c.openSession(ctx, &buf)
	if err != nil {
		t.Fatal(err)
	}
	names, _, err := c.toolNames(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	// 13 standard fixture tools (the second server's are shadowed) + 3.
	if got := distinct(names); got != len(names) || got != 16 {
		t.Errorf("tools/list: %d names, %d distinct, want 16: %v", len(names), got, names)
	}
	if _, ok := gw.mgr.Catalog().Lookup("up1_t0002"); !ok {
		t.Errorf("catalog lacks up1_t0002")
	}
}
