package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// buildGateway builds ./cmd/switchboard into dir and returns the binary.
func buildGateway(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build the gateway: %w", err)
	}
	bin := filepath.Join(dir, "switchboard")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/switchboard-mcp/switchboard/cmd/switchboard")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/switchboard: %v\n%s", err, out)
	}
	return bin, nil
}

// envHTTPChild makes this test binary serve the fixture over streamable
// HTTP on 127.0.0.1:0 (see runIfHTTPChild).
const envHTTPChild = "SWITCHBOARD_BENCH_FIXTURE_HTTP"

// runIfHTTPChild serves the fixture over streamable HTTP when this binary
// was started by startFixtureProc: it prints the address on stdout, serves
// until stdin reaches EOF, then exits.
func runIfHTTPChild() {
	if os.Getenv(envHTTPChild) != "1" {
		return
	}
	serveChild("bench fixture", mcptest.StreamableHandler(mcptest.Options{}))
}

// serveChild is the life of a child server (startChildServer): it serves
// h on 127.0.0.1:0, prints the address on stdout, and exits when stdin
// ends, which is how the benchmark stops it.
func serveChild(name string, h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go func() { _ = http.Serve(ln, h) }()
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// fixtureProc is the fixture served over HTTP by a child process.
type fixtureProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	URL    string
	exited chan struct{}
}

func startFixtureProc() (*fixtureProc, error) {
	return startChildServer(envHTTPChild + "=1")
}

// startChildServer starts this binary with mode (an environment entry
// that makes it serve something: runIfHTTPChild, runIfFloorChild) and
// waits for the address it prints.
func startChildServer(mode string) (*fixtureProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &fixtureProc{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case a := <-addr:
		if a == "" {
			p.Close()
			return nil, errors.New("fixture process printed no address")
		}
		p.URL = "http://" + a
		return p, nil
	case <-time.After(30 * time.Second):
		p.Close()
		return nil, errors.New("fixture process printed no address within 30s")
	}
}

func (p *fixtureProc) Pid() int { return p.cmd.Process.Pid }

// Pid is the gateway process's id.
func (p *gatewayProc) Pid() int { return p.cmd.Process.Pid }

// Close ends the child (stdin EOF, then SIGKILL after 10s).
func (p *fixtureProc) Close() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// gatewayProc is a gateway running as its own process, so its RSS is its
// own and nothing else's.
type gatewayProc struct {
	cmd    *exec.Cmd
	Base   string // http://127.0.0.1:PORT
	URL    string // Base + /mcp
	Pprof  string // http://ADDR of MCP_SERVER_PPROF_ADDR when set, "" otherwise
	stderr *tail
	exited chan struct{}
}

var (
	listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)
	// The profile listener is logged before the main one (run.go).
	pprofRE = regexp.MustCompile(`msg="serving runtime profiles" addr=(\S+)`)
)

// startGatewayProc starts bin with MCP_SERVER_PORT=0 and no servers file
// (the built-in demo server, connected lazily, so it never starts here) and
// waits for its `msg=listening addr=...` log line.
func startGatewayProc(bin, dataDir string, extraEnv ...string) (*gatewayProc, error) {
	cmd := exec.Command(bin)
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MCP_") || strings.HasPrefix(kv, "SWITCHBOARD_") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "MCP_SERVER_HOST=127.0.0.1", "MCP_SERVER_PORT=0", "MCP_SERVER_DATA_DIR="+dataDir,
		"MCP_SERVER_LOG_LEVEL=info", "MCP_SERVER_LOG_FORMAT=text", "MCP_SERVER_SHUTDOWN_TIMEOUT=5s")
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &gatewayProc{cmd: cmd, stderr: &tail{max: 16 << 10}, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Text()
			p.stderr.add(line)
			if !found {
				if m := pprofRE.FindStringSubmatch(line); m != nil {
					p.Pprof = "http://" + m[1] // read after addr is received
				}
				if m := listeningRE.FindStringSubmatch(line); m != nil {
					found = true
					addr <- m[1]
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr) // keep draining after a scanner error
	}()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case a := <-addr:
		p.Base = "http://" + a
		p.URL = p.Base + "/mcp"
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("gateway exited before listening: %v\n%s", cmd.ProcessState, p.stderr)
	case <-time.After(30 * time.Second):
		p.stop()
		return nil, fmt.Errorf("gateway did not log a listening line within 30s\n%s", p.stderr)
	}
}

// stop sends SIGTERM to the gateway's process group, SIGKILL after 10s.
func (p *gatewayProc) stop() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // any demo child left behind
}

// rss reads VmRSS and VmHWM (peak) of the gateway process, in KiB.
func (p *gatewayProc) rss() (rssKiB, hwmKiB int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	field := func(name string) (int64, error) {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
				return strconv.ParseInt(v, 10, 64)
			}
		}
		return 0, fmt.Errorf("no %s in /proc/%d/status", name, p.cmd.Process.Pid)
	}
	if rssKiB, err = field("VmRSS"); err != nil {
		return 0, 0, err
	}
	hwmKiB, err = field("VmHWM")
	return rssKiB, hwmKiB, err
}

// status reads the gateway's GET / status document.
func (p *gatewayProc) status(ctx context.Context, hc *http.Client) (sessions int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Base+"/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var st struct {
		Sessions *int `json:"sessions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, err
	}
	if st.Sessions == nil {
		return 0, errors.New("status has no sessions count")
	}
	return *st.Sessions, nil
}

// tail keeps the last max bytes of a process's log lines.
type tail struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.WriteString(line)
	t.buf.WriteByte('\n')
	if t.buf.Len() > 2*t.max {
		b := t.buf.Bytes()
		keep := append([]byte(nil), b[len(b)-t.max:]...)
		t.buf.Reset()
		t.buf.Write(keep)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// memResult is one idle-memory measurement.
type memResult struct {
	sessions             int
	idleKiB, sessKiB     int64
	idlePeakKiB, peakKiB int64
	openTime             time.Duration
}

// measureIdleMemory starts the gateway process, reads its RSS idle, opens
// n idle sessions (initialize + notifications/initialized, no GET stream),
// closes the client connections and reads its RSS again. It returns the
// gateway still running, with the sessions open; the caller stops it.
func measureIdleMemory(ctx context.Context, bin, dataDir string, n int, settle time.Duration) (_ *gatewayProc, _ memResult, err error) {
	p, err := startGatewayProc(bin, dataDir)
	if err != nil {
		return nil, memResult{}, err
	}
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	r, err := openIdleSessions(ctx, p, n, settle)
	return p, r, err
}

func openIdleSessions(ctx context.Context, p *gatewayProc, n int, settle time.Duration) (r memResult, err error) {
	r.sessions = n
	time.Sleep(settle)
	if r.idleKiB, r.idlePeakKiB, err = p.rss(); err != nil {
		return r, err
	}

	const workers = 8
	tr := newTransport(workers)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	c := &rawClient{hc: hc, url: p.URL}
	start := time.Now()
	jobs := make(chan struct{})
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var buf bytes.Buffer
			for range jobs {
				if _, err := c.openSession(ctx, &buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
feed:
	for range n {
		select {
		case jobs <- struct{}{}:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return r, fmt.Errorf("opening sessions: %w\n%s", err, p.stderr)
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return r, fmt.Errorf("opening sessions: %w\n%s", err, p.stderr)
	default:
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.openTime = time.Since(start)
	got, err := p.status(ctx, hc)
	if err != nil {
		return r, fmt.Errorf("status: %w", err)
	}
	if got != n {
		return r, fmt.Errorf("gateway reports %d sessions, want %d", got, n)
	}
	// Only the sessions stay; their TCP connections go, as for clients
	// that come back later.
	tr.CloseIdleConnections()
	time.Sleep(settle)
	if r.sessKiB, r.peakKiB, err = p.rss(); err != nil {
		return r, err
	}
	return r, nil
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
