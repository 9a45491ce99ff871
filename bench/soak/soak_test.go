package soak

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/calllog"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/server"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

const (
	callTimeout     = 2 * time.Second // upstreams.Options.CallTimeout
	hungMargin      = 5 * time.Second // a call not answered within callTimeout+hungMargin is hung
	sessions        = 16
	protocolVersion = "2025-06-18"
	settleTimeout   = 20 * time.Second // bound on leak settling after shutdown
	recoverTimeout  = 15 * time.Second // bound on upstreams serving again after the chaos
	shutdownTimeout = 20 * time.Second
)

// prefixes are the toolPrefix of each upstream, in configured order.
var prefixes = []string{"s1_", "s2_", "sse_", "http_"}

// Outcome kinds. Every call must end as one of the expected ones.
const (
	kindOK          = "success"
	kindCancelled   = "cancelled by client"
	kindToolError   = "tool error (isError)"
	kindInvalid     = "rpc -32602 (rpc_error)"
	kindUnavailable = "rpc -32603 unavailable"
	kindTimeout     = "rpc -32603 timeout"
	kindUnknown     = "rpc -32601 unknown tool"
	kindHung        = "HUNG"
	kindUnexpected  = "UNEXPECTED"
)

var kindOrder = []string{kindOK, kindCancelled, kindToolError, kindInvalid, kindUnavailable, kindTimeout, kindUnknown, kindHung, kindUnexpected}

// tally is one worker's record; workers merge theirs at the end.
type tally struct {
	kinds      map[string]int
	byUpstream map[string]map[string]int
	lat        []time.Duration
	examples   []string   // unexpected and hung calls, first few
	slowest    []slowCall // the slowest calls, slowest first
}

type slowCall struct {
	d    time.Duration
	what string
}

// keepSlowest adds c to list, keeping the n slowest calls.
func keepSlowest(list []slowCall, c slowCall, n int) []slowCall {
	i, _ := slices.BinarySearchFunc(list, c.d, func(e slowCall, d time.Duration) int { return cmp.Compare(d, e.d) })
	if i >= n {
		return list
	}
	list = slices.Insert(list, i, c)
	return list[:min(len(list), n)]
}

func newTally() *tally {
	return &tally{kinds: map[string]int{}, byUpstream: map[string]map[string]int{}}
}

func (t *tally) add(prefix, kind, detail string, d time.Duration) {
	t.kinds[kind]++
	if t.byUpstream[prefix] == nil {
		t.byUpstream[prefix] = map[string]int{}
	}
	t.byUpstream[prefix][kind]++
	t.lat = append(t.lat, d)
	if len(t.slowest) < 5 || d > t.slowest[len(t.slowest)-1].d {
		t.slowest = keepSlowest(t.slowest, slowCall{d, detail + " [" + kind + "]"}, 5)
	}
	if (kind == kindUnexpected || kind == kindHung) && len(t.examples) < 10 {
		t.examples = append(t.examples, fmt.Sprintf("%s after %s: %s", kind, d.Round(time.Millisecond), detail))
	}
}

func (t *tally) merge(o *tally) {
	for k, v := range o.kinds {
		t.kinds[k] += v
	}
	for p, m := range o.byUpstream {
		if t.byUpstream[p] == nil {
			t.byUpstream[p] = map[string]int{}
		}
		for k, v := range m {
			t.byUpstream[p][k] += v
		}
	}
	t.lat = append(t.lat, o.lat...)
	t.examples = append(t.examples, o.examples...)
	for _, c := range o.slowest {
		t.slowest = keepSlowest(t.slowest, c, 5)
	}
}

// stateLog counts the upstream state changes reported through OnState
// and how long each upstream spent out of ready once it had been ready.
type stateLog struct {
	mu       sync.Mutex
	n        map[string]map[switchboard.ServerState]int
	lost     map[string]time.Time // when it left ready
	down     map[string]time.Duration
	longest  map[string]time.Duration
	wasReady map[string]bool
}

func newStateLog() *stateLog {
	return &stateLog{n: map[string]map[switchboard.ServerState]int{}, lost: map[string]time.Time{},
		down: map[string]time.Duration{}, longest: map[string]time.Duration{}, wasReady: map[string]bool{}}
}

func (s *stateLog) record(server string, st switchboard.ServerState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[server] == nil {
		s.n[server] = map[switchboard.ServerState]int{}
	}
	s.n[server][st]++
	switch {
	case st == switchboard.StateReady:
		if t, ok := s.lost[server]; ok {
			d := time.Since(t)
			s.down[server] += d
			s.longest[server] = max(s.longest[server], d)
			delete(s.lost, server)
		}
		s.wasReady[server] = true
	case s.wasReady[server]:
		if _, ok := s.lost[server]; !ok {
			s.lost[server] = time.Now()
		}
	}
}

func (s *stateLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, name := range []string{"s1", "s2", "sse", "http"} {
		fmt.Fprintf(&b, " %s:", name)
		for _, st := range []switchboard.ServerState{switchboard.StateConnecting, switchboard.StateReady, switchboard.StateFailed, switchboard.StateUnavailable} {
			if n := s.n[name][st]; n > 0 {
				fmt.Fprintf(&b, " %s %d", st, n)
			}
		}
		fmt.Fprintf(&b, " (out of ready %s, longest %s);", s.down[name].Round(time.Millisecond), s.longest[name].Round(time.Millisecond))
	}
	return b.String()
}

func TestSoak(t *testing.T) {
	dur := soakDuration(t)
	if dur <= 0 {
		t.Skip("soak not requested: run with -soak=60s (or SOAK_DURATION=60s)")
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SOAK_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("invalid SOAK_SEED=%q", v)
		}
		seed = s
	}

	// Prime the netpoller (its epoll and wakeup fds live for the rest of
	// the process) so the fd baseline does not count them as leaks.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		_ = ln.Close()
	}
	base := measure()

	// Upstream fixtures: two stdio children of this binary, a legacy SSE
	// server whose connections are dropped, a flaky streamable server.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	stdioSpec := func(name, prefix string) switchboard.ServerSpec {
		env := map[string]string{}
		for _, kv := range mcptest.ChildEnv(mcptest.Options{Name: name}) {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		return switchboard.ServerSpec{Name: name, Transport: switchboard.TransportStdio, Command: exe, Env: env, ToolPrefix: prefix}
	}
	sseGate := &outage{h: mcptest.SSEHandler(mcptest.Options{Name: "sse"})}
	sseTS := httptest.NewServer(sseGate)
	fl := &flaky{h: mcptest.StreamableHandler(mcptest.Options{Name: "http"}), p5xx: 0.05, pStall: 0.02, pForget: 0.002,
		stall: callTimeout + 3*time.Second, stallCancels: os.Getenv("SOAK_STALL_CANCEL") == "1",
		quit: make(chan struct{}), rng: rand.New(rand.NewPCG(seed, 99))}
	httpTS := httptest.NewServer(fl)
	specs := []switchboard.ServerSpec{
		stdioSpec("s1", "s1_"),
		stdioSpec("s2", "s2_"),
		{Name: "sse", Transport: switchboard.TransportSSE, URL: sseTS.URL, ToolPrefix: "sse_"},
		{Name: "http", Transport: switchboard.TransportStreamableHTTP, URL: httpTS.URL, ToolPrefix: "http_"},
	}

	// The gateway, wired as cmd/switchboard/run.go does.
	logs := &tail{max: 256 << 10}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	states := newStateLog()
	// The call log on the embedded store, spool included, as run wires
	// it: every answered tool call must be on record afterwards.
	dataDir := t.TempDir()
	st, err := sqlite.Open(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	callLog := calllog.New(st, calllog.Options{SpoolDir: filepath.Join(dataDir, "calllog"), Logger: logger})
	logged := 0
	mgr := upstreams.New(upstreams.Options{
		Version: "soak", CallTimeout: callTimeout, ConnectTimeout: 5 * time.Second, StopTimeout: time.Second,
		BreakerFailures: 3, BreakerCooldown: 500 * time.Millisecond, ReconnectMin: 20 * time.Millisecond,
		ReconnectMax: 500 * time.Millisecond, Logger: logger, OnState: states.record,
	})
	edge := server.New(mgr, server.Options{Version: "soak", Project: "soak", Heartbeat: time.Second, Logger: logger, Observer: callLog})
	mgr.OnToolsChanged(edge.ToolsChanged)
	mgr.Apply(context.Background(), specs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: edge.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: log.New(logs, "http: ", 0)}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	gwBase := "http://" + ln.Addr().String()

	shutdownDone := false
	shutdown := func() {
		if shutdownDone {
			return
		}
		shutdownDone = true
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = edge.Shutdown(ctx)
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("http shutdown: %v", err)
			_ = srv.Close()
		}
		_ = edge.Shutdown(ctx)
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("upstreams did not stop within %s: %v", shutdownTimeout, err)
		}
		if err := callLog.Close(ctx); err != nil {
			t.Errorf("call log did not flush within %s: %v", shutdownTimeout, err)
		}
		logged = countCalls(t, st)
		_ = st.Close()
		if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		close(fl.quit)
		sseTS.CloseClientConnections()
		sseTS.Close()
		httpTS.CloseClientConnections()
		httpTS.Close()
	}
	defer shutdown()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log tail:\n%s", logs.String())
		}
	}()

	// Client sessions: the official go-sdk client over streamable HTTP.
	clientTr := &http.Transport{MaxIdleConns: 2 * sessions, MaxIdleConnsPerHost: 2 * sessions, IdleConnTimeout: 90 * time.Second}
	defer clientTr.CloseIdleConnections()
	hc := &http.Client{Transport: clientTr}
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-soak", Version: "1"}, nil)
	css := make([]*mcp.ClientSession, sessions)
	closeSessions := func() {
		var wg sync.WaitGroup
		for i, cs := range css {
			if cs != nil {
				wg.Go(func() { _ = cs.Close() })
				css[i] = nil
			}
		}
		wg.Wait()
	}
	defer closeSessions()
	{
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		var wg sync.WaitGroup
		errs := make([]error, sessions)
		for i := range css {
			wg.Go(func() {
				css[i], errs[i] = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: gwBase + "/mcp", HTTPClient: hc},
					&mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			cancel()
			t.Fatalf("connecting %d sessions: %v", sessions, err)
		}
		// Warm up: the first tools/list connects every upstream.
		lt, err := css[0].ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		if missing := missingEchoes(lt); len(missing) > 0 {
			t.Fatalf("tools/list lacks %v; status: %+v", missing, mgr.Status())
		}
	}

	// Chaos, probes and load.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var kills, drops, outages atomic.Int64
	every := func(rng *rand.Rand, fn func()) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second + time.Duration(rng.Int64N(int64(2*time.Second)))):
			}
			fn()
		}
	}
	bg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, 1))
		every(rng, func() {
			if pids := fixtureChildren(); len(pids) > 0 {
				if syscall.Kill(pids[rng.IntN(len(pids))], syscall.SIGKILL) == nil {
					kills.Add(1)
				}
			}
		})
	})
	bg.Go(func() {
		// Drop the SSE server's connections; one time in three it also
		// stays down for a while, so reconnects fail and the breaker opens.
		rng := rand.New(rand.NewPCG(seed, 2))
		every(rng, func() {
			down := rng.IntN(3) == 0
			sseGate.down.Store(down)
			sseTS.CloseClientConnections()
			drops.Add(1)
			if down {
				outages.Add(1)
				select {
				case <-stop:
				case <-time.After(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond)))):
				}
				sseGate.down.Store(false)
			}
		})
	})
	probeTr := &http.Transport{MaxIdleConnsPerHost: 2}
	defer probeTr.CloseIdleConnections()
	var probesOK, probesFailed atomic.Int64
	var probeMax atomic.Int64
	var probeErr atomic.Value
	bg.Go(func() {
		pc := &http.Client{Transport: probeTr, Timeout: 5 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			path := "/healthz"
			if i%10 == 0 {
				path = "/" // status: every upstream's state, under the manager's locks
			}
			begin := time.Now()
			resp, err := pc.Get(gwBase + path)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
				}
			}
			if d := int64(time.Since(begin)); d > probeMax.Load() {
				probeMax.Store(d)
			}
			if err != nil {
				probesFailed.Add(1)
				probeErr.CompareAndSwap(nil, err.Error())
				continue
			}
			probesOK.Add(1)
		}
	})

	total := newTally()
	var workers sync.WaitGroup
	tallies := make([]*tally, sessions)
	begin := time.Now()
	for i, cs := range css {
		tallies[i] = newTally()
		workers.Go(func() { work(cs, rand.New(rand.NewPCG(seed, uint64(100+i))), stop, tallies[i]) })
	}
	time.Sleep(dur)
	close(stop)
	workers.Wait()
	elapsed := time.Since(begin)
	bg.Wait()
	for _, tl := range tallies {
		total.merge(tl)
	}

	// With the chaos over, every upstream must serve again: time to the
	// first good echo, bounded by a hard deadline (a measurement, like the
	// leak settle below; calls to an upstream still reconnecting fail fast).
	recovery := make([]time.Duration, len(prefixes))
	recovered := make([]bool, len(prefixes))
	var rwg sync.WaitGroup
	for i, p := range prefixes {
		rwg.Go(func() {
			begin := time.Now()
			for deadline := begin.Add(recoverTimeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout+hungMargin)
				res, err := css[i].CallTool(ctx, &mcp.CallToolParams{Name: p + "echo", Arguments: map[string]any{"text": "back"}})
				cancel()
				if kind, _ := classify("echo", "back", res, err, false); kind == kindOK {
					recovery[i], recovered[i] = time.Since(begin), true
					return
				}
			}
		})
	}
	rwg.Wait()

	// Clients go away (their idle connections too: http.Server.Shutdown
	// waits up to 5 s for a connection that never sent a request, which the
	// client side dials for calls cancelled meanwhile), the gateway shuts
	// down as run does, then every resource must return to its baseline
	// within a bounded settle time.
	closeSessions()
	clientTr.CloseIdleConnections()
	probeTr.CloseIdleConnections()
	shutBegin := time.Now()
	shutdown()
	shutTook := time.Since(shutBegin)
	after := measure()
	for deadline := time.Now().Add(settleTimeout); !after.within(base) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		after = measure()
	}

	// Report.
	calls := len(total.lat)
	slices.Sort(total.lat)
	q := func(p float64) time.Duration {
		if calls == 0 {
			return 0
		}
		return total.lat[int(p*float64(calls-1)+0.5)]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n==== switchboard soak summary ====\n")
	fmt.Fprintf(&b, "duration     %s (requested %s), %d sessions, call timeout %s, seed %d\n", elapsed.Round(time.Millisecond), dur, sessions, callTimeout, seed)
	fmt.Fprintf(&b, "calls        %d total, %.1f calls/s\n", calls, float64(calls)/elapsed.Seconds())
	fmt.Fprintf(&b, "outcomes    ")
	for _, k := range kindOrder {
		fmt.Fprintf(&b, " %s %d;", k, total.kinds[k])
	}
	b.WriteString("\n")
	for _, p := range append(slices.Clone(prefixes), "list") {
		fmt.Fprintf(&b, "  %-6s    ", p)
		for _, k := range kindOrder {
			if n := total.byUpstream[p][k]; n > 0 {
				fmt.Fprintf(&b, " %s %d;", k, n)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "latency      p50 %s, p99 %s, max %s\n", q(0.50).Round(10*time.Microsecond), q(0.99).Round(10*time.Microsecond), q(1).Round(time.Millisecond))
	late := len(total.lat) - sort.Search(len(total.lat), func(i int) bool { return total.lat[i] > callTimeout+time.Second })
	fmt.Fprintf(&b, "             %d calls took longer than call timeout + 1s; slowest:\n", late)
	for _, c := range total.slowest {
		fmt.Fprintf(&b, "               %s  %s\n", c.d.Round(time.Millisecond), c.what)
	}
	fmt.Fprintf(&b, "chaos        stdio kills %d, sse drops %d (%d with an outage), http 5xx %d, http stalls %d (outlasting the call timeout: %d), http sessions forgotten %d\n",
		kills.Load(), drops.Load(), outages.Load(), fl.fivexx.Load(), fl.stalls.Load(), fl.outlasted.Load(), fl.forgotten.Load())
	fmt.Fprintf(&b, "states      %s\n", states)
	fmt.Fprintf(&b, "recovery    ")
	for i, p := range prefixes {
		if recovered[i] {
			fmt.Fprintf(&b, " %s %s;", p, recovery[i].Round(time.Millisecond))
		} else {
			fmt.Fprintf(&b, " %s NOT within %s;", p, recoverTimeout)
		}
	}
	b.WriteString(" (first good echo after the chaos stopped)\n")
	fmt.Fprintf(&b, "http probes  %d ok, %d failed, slowest %s\n", probesOK.Load(), probesFailed.Load(), time.Duration(probeMax.Load()).Round(time.Millisecond))
	fmt.Fprintf(&b, "shutdown     %s (edge, http server, upstreams and fixtures)\n", shutTook.Round(time.Millisecond))
	answered := 0 // tool calls the gateway answered (not tools/list, not given up by the client)
	for _, p := range prefixes {
		for k, n := range total.byUpstream[p] {
			if k != kindCancelled && k != kindHung && k != kindUnexpected {
				answered += n
			}
		}
	}
	fmt.Fprintf(&b, "call log     %d records stored for %d answered calls (plus recovery probes), %d dropped, %d not spooled\n",
		logged, answered, callLog.Dropped(), callLog.Unspooled())
	leaks := "none"
	if !after.within(base) {
		leaks = "LEAKED"
	}
	fmt.Fprintf(&b, "leaks        goroutines %d -> %d, fds %d -> %d, children %d -> %d: %s\n",
		base.goroutines, after.goroutines, base.fds, after.fds, base.children, after.children, leaks)
	b.WriteString("==================================")
	fmt.Println(b.String())

	// Verdicts.
	if logged < answered || callLog.Dropped() > 0 {
		t.Errorf("the call log holds %d records for %d answered calls (%d dropped)", logged, answered, callLog.Dropped())
	}
	if total.kinds[kindHung] > 0 {
		t.Errorf("%d calls hung (no answer within %s)", total.kinds[kindHung], callTimeout+hungMargin)
	}
	if total.kinds[kindUnexpected] > 0 {
		t.Errorf("%d calls ended in an unexpected way", total.kinds[kindUnexpected])
	}
	for _, e := range total.examples {
		t.Log(e)
	}
	if total.kinds[kindOK] == 0 {
		t.Error("no call succeeded")
	}
	for i, p := range prefixes {
		if !recovered[i] {
			t.Errorf("upstream %s did not serve again within %s after the chaos stopped; status: %+v", p, recoverTimeout, mgr.Status())
		}
	}
	if n := probesFailed.Load(); n > 0 {
		t.Errorf("%d health/status probes failed; first: %v", n, probeErr.Load())
	}
	if probesOK.Load() == 0 {
		t.Error("no health probe succeeded")
	}
	if n := fl.outlasted.Load(); n > 0 {
		t.Errorf("%d stalled upstream requests were not abandoned within %s", n, fl.stall)
	}
	if !after.within(base) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Errorf("resources did not return to baseline within %s: goroutines %d -> %d, fds %d -> %d (%s), children %d -> %d %v\ngoroutines:\n%s",
			settleTimeout, base.goroutines, after.goroutines, base.fds, after.fds, fdList(), base.children, after.children, children(), buf)
	}
}

// work is one session's load loop: random calls until stop.
func work(cs *mcp.ClientSession, rng *rand.Rand, stop <-chan struct{}, tl *tally) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		prefix := prefixes[rng.IntN(len(prefixes))]
		var tool, want string
		var args map[string]any
		switch r := rng.IntN(100); {
		case r < 5:
			tool = "tools/list"
		case r < 40:
			tool, want = "echo", "soak-"+strconv.Itoa(rng.IntN(1e9))
			args = map[string]any{"text": want}
		case r < 45:
			tool = "cancel" // slow, cancelled by the client midway
		case r < 60:
			tool = "tool_error"
		case r < 75:
			tool = "rpc_error"
		default:
			tool, args = "slow", map[string]any{"ms": rng.IntN(50)}
		}
		// Deliberately not derived from stop: calls in flight finish.
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout+hungMargin)
		begin := time.Now()
		var kind, detail string
		switch tool {
		case "cancel":
			cctx, ccancel := context.WithTimeout(ctx, time.Duration(5+rng.IntN(50))*time.Millisecond)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: prefix + "slow", Arguments: map[string]any{"ms": 300}})
			clientGaveUp := cctx.Err() != nil
			ccancel()
			switch {
			case err != nil && clientGaveUp && ctx.Err() == nil:
				kind, detail = kindCancelled, prefix+"slow (cancelled)"
			default:
				// An answer can beat the cancellation (the go-sdk client
				// may still be sending the request when its ctx ends).
				kind, detail = classify("slow", "", res, err, ctx.Err() != nil)
				detail = prefix + "slow (cancelled): " + detail
			}
		case "tools/list":
			prefix = "list"
			res, err := cs.ListTools(ctx, nil)
			kind, detail = kindOK, "tools/list"
			switch {
			case ctx.Err() != nil:
				kind, detail = kindHung, fmt.Sprintf("tools/list: %v", err)
			case err != nil:
				kind, detail = kindUnexpected, fmt.Sprintf("tools/list: %v", err)
			default:
				if m := missingEchoes(res); len(m) > 0 {
					kind, detail = kindUnexpected, fmt.Sprintf("tools/list lacks %v", m)
				}
			}
		default:
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: prefix + tool, Arguments: args})
			kind, detail = classify(tool, want, res, err, ctx.Err() != nil)
			detail = prefix + tool + ": " + detail
		}
		d := time.Since(begin)
		cancel()
		tl.add(prefix, kind, detail, d)
	}
}

// classify names the outcome of one tools/call of tool (without prefix).
func classify(tool, want string, res *mcp.CallToolResult, err error, expired bool) (kind, detail string) {
	if expired {
		return kindHung, fmt.Sprint(err)
	}
	if err != nil {
		var we *jsonrpc.Error
		if errors.As(err, &we) {
			switch {
			case we.Code == switchboard.CodeInternalError && strings.Contains(we.Message, "did not answer within"):
				return kindTimeout, we.Message
			case we.Code == switchboard.CodeInternalError:
				return kindUnavailable, we.Message
			case we.Code == switchboard.CodeInvalidParams && tool == "rpc_error" && we.Message == "bad argument x":
				return kindInvalid, we.Message
			case we.Code == switchboard.CodeMethodNotFound:
				return kindUnknown, we.Message
			}
		}
		return kindUnexpected, fmt.Sprintf("error %T: %v", err, err)
	}
	text := ""
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	switch {
	case tool == "echo" && !res.IsError && text == want,
		tool == "slow" && !res.IsError && strings.HasPrefix(text, "slept "):
		return kindOK, ""
	case tool == "tool_error" && res.IsError && text == "it failed":
		return kindToolError, ""
	}
	return kindUnexpected, fmt.Sprintf("result isError=%v content=%d text=%q", res.IsError, len(res.Content), text)
}

// missingEchoes lists the upstreams whose echo tool a tools/list lacks: a
// crashed or reconnecting upstream keeps its tools listed.
func missingEchoes(res *mcp.ListToolsResult) []string {
	var missing []string
	for _, p := range prefixes {
		if !slices.ContainsFunc(res.Tools, func(t *mcp.Tool) bool { return t.Name == p+"echo" }) {
			missing = append(missing, p+"echo")
		}
	}
	return missing
}

// fdList describes this process's open fds, for a leak report.
func fdList() string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+target)
	}
	return strings.Join(out, " ")
}

// countCalls counts every tool-call record in st, page by page.
func countCalls(t *testing.T, st switchboard.ToolCallStore) int {
	n := 0
	f := switchboard.ToolCallFilter{Limit: switchboard.MaxToolCallLimit}
	for {
		page, err := st.ListToolCalls(context.Background(), f)
		if err != nil {
			t.Errorf("reading the call log: %v", err)
			return n
		}
		n += len(page.Calls)
		if page.Next == "" {
			return n
		}
		f.Cursor = page.Next
	}
}
