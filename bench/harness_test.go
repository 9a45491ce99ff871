package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/calllog"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/metrics"
	"github.com/switchboard-mcp/switchboard/server"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// protocolVersion is what every client here negotiates, directly and
// through the gateway, so both paths run the same (session-based)
// protocol. The go-sdk client's default (2026-07-28) would first probe
// server/discover, which the gateway refuses, and then fall back to
// 2025-11-25; against the go-sdk fixture it would instead run the
// stateless 2026 era, so pinning keeps the comparison fair.
const protocolVersion = "2025-06-18"

// fixtureSpec is an upstream spec running this test binary as the fixture
// MCP server on stdio (TestMain calls mcptest.RunIfChild).
func fixtureSpec(name string, extraTools int) (switchboard.ServerSpec, error) {
	exe, err := os.Executable()
	if err != nil {
		return switchboard.ServerSpec{}, err
	}
	env := map[string]string{}
	for _, kv := range mcptest.ChildEnv(mcptest.Options{Name: name, ExtraTools: extraTools}) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return switchboard.ServerSpec{Name: name, Transport: switchboard.TransportStdio, Command: exe, Env: env}, nil
}

// gateway is the switchboard gateway wired in-process as
// cmd/switchboard/run.go does by default (metrics, and the call log on the
// embedded store with its crash spool), listening on 127.0.0.1:0.
type gateway struct {
	URL     string // the /mcp endpoint
	Base    string // http://host:port
	mgr     *upstreams.Manager
	edge    *server.Server
	srv     *http.Server
	calls   *calllog.Writer
	store   *sqlite.Store
	dataDir string
}

// observers fans a call out to the metrics and the call log, as run does.
type observers []server.Observer

func (o observers) ObserveCall(rec switchboard.ToolCallRecord) {
	for _, x := range o {
		x.ObserveCall(rec)
	}
}

func startGateway(specs []switchboard.ServerSpec) (*gateway, error) {
	return startGatewayWith(specs, nil)
}

// startGatewayWith is startGateway with the opener of hosted servers'
// streams (nil: none).
func startGatewayWith(specs []switchboard.ServerSpec, streams upstreams.StreamOpener) (*gateway, error) {
	dataDir, err := os.MkdirTemp("", "switchboard-bench-")
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(context.Background(), dataDir)
	if err != nil {
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	calls := calllog.New(st, calllog.Options{SpoolDir: filepath.Join(dataDir, "calllog")})
	met := metrics.New()
	mgr := upstreams.New(upstreams.Options{Version: "bench", Streams: streams, OnState: func(server string, s switchboard.ServerState) { met.SetState("default", server, s) }})
	edge := server.New(mgr, server.Options{Version: "bench", Project: "default", Observer: observers{calls, met}, Metrics: met.Handler()})
	mgr.OnToolsChanged(edge.ToolsChanged)
	mgr.Apply(context.Background(), specs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = edge.Shutdown(ctx)
		_ = mgr.Close(ctx)
		_ = calls.Close(ctx)
		_ = st.Close()
		_ = os.RemoveAll(dataDir)
		return nil, err
	}
	srv := &http.Server{Handler: edge.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()
	return &gateway{URL: base + "/mcp", Base: base, mgr: mgr, edge: edge, srv: srv, calls: calls, store: st, dataDir: dataDir}, nil
}

// Close shuts the gateway down in run.go's order and stops its children.
func (g *gateway) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_ = g.edge.Shutdown(ctx)
	if err := g.srv.Shutdown(ctx); err != nil {
		_ = g.srv.Close()
	}
	_ = g.mgr.Close(ctx)
	_ = g.calls.Close(ctx)
	_ = g.store.Close()
	_ = os.RemoveAll(g.dataDir)
}

// notReady lists upstreams that are not ready, for error messages.
func (g *gateway) notReady() []string {
	var out []string
	for _, s := range g.mgr.Status() {
		if s.State != switchboard.StateReady {
			out = append(out, fmt.Sprintf("%s: %s %s %s", s.Name, s.State, s.LastError, lastLine(s.Stderr)))
		}
	}
	return out
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// newTransport is the HTTP transport every client here uses: keep-alive
// with enough idle connections per host that concurrent sessions never
// churn TCP connections (http.DefaultTransport keeps only 2 per host).
func newTransport(perHost int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        perHost,
		MaxIdleConnsPerHost: perHost,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

// connectSessions opens n go-sdk client sessions to endpoint over hc.
func connectSessions(ctx context.Context, endpoint string, hc *http.Client, n int) ([]*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-bench", Version: "1"}, nil)
	sessions := make([]*mcp.ClientSession, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}
			sessions[i], errs[i] = client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeSessions(sessions)
		return nil, err
	}
	for _, cs := range sessions {
		if v := cs.InitializeResult().ProtocolVersion; v != protocolVersion {
			closeSessions(sessions)
			return nil, fmt.Errorf("negotiated protocol %q, want %q", v, protocolVersion)
		}
	}
	return sessions, nil
}

func closeSessions(sessions []*mcp.ClientSession) {
	var wg sync.WaitGroup
	for _, cs := range sessions {
		if cs != nil {
			wg.Go(func() { _ = cs.Close() })
		}
	}
	wg.Wait()
}

// echoOnce calls the echo tool and checks the answer.
func echoOnce(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) error {
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return err
	}
	if res.IsError || len(res.Content) != 1 {
		return fmt.Errorf("echo returned an unexpected result: isError=%v content=%d", res.IsError, len(res.Content))
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "hello" {
		return fmt.Errorf("echo returned %#v, want text %q", res.Content[0], "hello")
	}
	return nil
}

func echoParams() *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
}

// stallGuard returns a context cancelled when *progress has not moved for
// d, so a hung call ends a benchmark with an error instead of hanging it.
func stallGuard(parent context.Context, progress *atomic.Int64, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(d / 4)
		defer t.Stop()
		last, since := progress.Load(), time.Now()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				if v := progress.Load(); v != last {
					last, since = v, now
				} else if now.Sub(since) > d {
					cancel(fmt.Errorf("no progress for %s", d))
					return
				}
			}
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(stop); cancel(nil) }) }
}

// latencies summarizes per-request durations.
type latencies struct {
	n             int
	p50, p99, max time.Duration
	mean          time.Duration
}

func summarize(d []time.Duration) latencies {
	if len(d) == 0 {
		return latencies{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1)+0.5)] }
	return latencies{n: len(d), p50: q(0.50), p99: q(0.99), max: d[len(d)-1], mean: sum / time.Duration(len(d))}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// selfCPU is the CPU time (user + system) this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the CPU time (user + system) process pid has used so far,
// from /proc/<pid>/stat (clock ticks of 10 ms; USER_HZ is 100 on Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %.100s", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat: %.100s", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// rawClient speaks streamable-HTTP JSON-RPC with plain POSTs.
type rawClient struct {
	hc  *http.Client
	url string
}

// post sends one message and reads the whole response into out.
func (c *rawClient) post(ctx context.Context, sid string, body []byte, out *bytes.Buffer) (http.Header, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	out.Reset()
	if _, err := out.ReadFrom(resp.Body); err != nil {
		return nil, 0, err
	}
	return resp.Header, resp.StatusCode, nil
}

var (
	initializeBody  = []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion + `","capabilities":{},"clientInfo":{"name":"switchboard-bench","version":"1"}}}`)
	initializedBody = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	toolsListBody   = []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
)

// openSession runs initialize + notifications/initialized and returns the
// session id. No GET stream is opened: the session stays idle.
func (c *rawClient) openSession(ctx context.Context, buf *bytes.Buffer) (string, error) {
	h, status, err := c.post(ctx, "", initializeBody, buf)
	if err != nil {
		return "", fmt.Errorf("initialize: %w", err)
	}
	sid := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sid == "" || !bytes.Contains(buf.Bytes(), []byte(`"protocolVersion"`)) {
		return "", fmt.Errorf("initialize: status %d, session %q, body %.300s", status, sid, buf.String())
	}
	if _, status, err = c.post(ctx, sid, initializedBody, buf); err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	if status != http.StatusAccepted && status != http.StatusOK {
		return "", fmt.Errorf("notifications/initialized: status %d, body %.300s", status, buf.String())
	}
	return sid, nil
}

// toolsList sends tools/list and returns the tool names it answered.
func (c *rawClient) toolNames(ctx context.Context, sid string) ([]string, int, error) {
	var buf bytes.Buffer
	_, status, err := c.post(ctx, sid, toolsListBody, &buf)
	if err != nil {
		return nil, 0, err
	}
	if status != http.StatusOK {
		return nil, 0, fmt.Errorf("tools/list: status %d, body %.300s", status, buf.String())
	}
	var resp struct {
		Result *struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(buf.Bytes(), &resp); err != nil || resp.Result == nil {
		return nil, 0, fmt.Errorf("tools/list: unexpected answer (%v): %.300s", err, buf.String())
	}
	names := make([]string, 0, len(resp.Result.Tools))
	for _, t := range resp.Result.Tools {
		names = append(names, t.Name)
	}
	return names, buf.Len(), nil
}

func distinct(names []string) int {
	seen := make(map[string]struct{}, len(names))
	for _, n := range names {
		seen[n] = struct{}{}
	}
	return len(seen)
}
