package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// wireEvent is one JSON-RPC line on a hosted stream: out is gateway ->
// server (the server's stdin), otherwise server -> gateway.
type wireEvent struct {
	out bool
	msg message
}

// pipeOpener is a StreamOpener serving every hosted spec with a fresh
// in-process fixture server (the go-sdk server of internal/mcptest) over
// a pair of io.Pipes, and recording every line on the wire in order.
type pipeOpener struct {
	t *testing.T
	// gate is a tool added to each server: it tells entered and blocks
	// until release is closed (or the call is cancelled).
	entered chan struct{}
	release chan struct{}

	mu          sync.Mutex
	wire        []wireEvent
	opened      int
	closed      int
	initialized int
}

func newPipeOpener(t *testing.T) *pipeOpener {
	return &pipeOpener{t: t, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (op *pipeOpener) OpenStream(ctx context.Context, spec switchboard.ServerSpec) (Stream, error) {
	srv := mcptest.NewServer(mcptest.Options{Name: spec.Name})
	srv.AddTool(&mcp.Tool{Name: "gate", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			op.entered <- struct{}{}
			select {
			case <-op.release:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened"}}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	op.mu.Lock()
	op.opened++
	op.mu.Unlock()
	return &pipeStream{op: op, p: mcptest.ServePipe(srv)}, nil
}

func (op *pipeOpener) record(out bool, line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		op.t.Errorf("line on the wire is not JSON-RPC: %q", line)
		return
	}
	op.mu.Lock()
	op.wire = append(op.wire, wireEvent{out: out, msg: m})
	op.mu.Unlock()
}

func (op *pipeOpener) snapshot() (wire []wireEvent, opened, initialized int) {
	op.mu.Lock()
	defer op.mu.Unlock()
	return append([]wireEvent(nil), op.wire...), op.opened, op.initialized
}

// pipeStream is a fixture server's Pipe (or a child's stdio) that records
// the wire.
type pipeStream struct {
	op        *pipeOpener
	p         io.ReadWriteCloser
	in, out   []byte // partial lines read and written so far
	closeOnce sync.Once
}

func (s *pipeStream) Read(p []byte) (int, error) {
	n, err := s.p.Read(p)
	s.in = s.splitLines(false, append(s.in, p[:n]...))
	return n, err
}

// Write records each line before the server can see it, so a response
// is always recorded after its request.
func (s *pipeStream) Write(p []byte) (int, error) {
	s.out = s.splitLines(true, append(s.out, p...))
	return s.p.Write(p)
}

func (s *pipeStream) splitLines(out bool, buf []byte) []byte {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return buf
		}
		if line := bytes.TrimSpace(buf[:i]); len(line) > 0 {
			s.op.record(out, line)
		}
		buf = buf[i+1:]
	}
}

func (s *pipeStream) Close() error {
	s.closeOnce.Do(func() {
		s.op.mu.Lock()
		s.op.closed++
		s.op.mu.Unlock()
	})
	return s.p.Close()
}

func (op *pipeOpener) open() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.opened - op.closed
}

func (s *pipeStream) Stderr() string { return "fixture stderr tail" }

func (s *pipeStream) Initialized() {
	s.op.mu.Lock()
	s.op.initialized++
	s.op.mu.Unlock()
}

func hostedSpec(name string) switchboard.ServerSpec {
	return switchboard.ServerSpec{Name: name, Transport: switchboard.TransportHosted}
}

// waitQueue waits until server's line has n callers waiting.
func waitQueue(t *testing.T, m *Manager, server string, n int) {
	t.Helper()
	m.mu.Lock()
	q := m.byName[server].queue
	m.mu.Unlock()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		_, waiting, changed := q.state()
		if waiting == n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d queued callers on %q (have %d)", n, server, waiting)
		}
	}
}

// checkSerial fails the test if a request went out on the wire while an
// earlier one had neither been answered nor cancelled, and returns the
// tools/call requests in wire order as "tool args".
func checkSerial(t *testing.T, wire []wireEvent) []string {
	t.Helper()
	var open string
	var calls []string
	for _, e := range wire {
		switch {
		case e.out && e.msg.Method != "" && len(e.msg.ID) > 0: // a request
			if open != "" {
				t.Errorf("request %s (%s) written while request %s was in flight", e.msg.ID, e.msg.Method, open)
			}
			open = string(e.msg.ID)
			if e.msg.Method == "tools/call" {
				var p struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				}
				_ = json.Unmarshal(e.msg.Params, &p)
				calls = append(calls, p.Name+" "+string(p.Arguments))
			}
		case e.out && e.msg.Method == "notifications/cancelled":
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			_ = json.Unmarshal(e.msg.Params, &p)
			if string(p.RequestID) == open {
				open = ""
			}
		case !e.out && e.msg.Method == "" && string(e.msg.ID) == open:
			open = ""
		}
	}
	return calls
}

func TestHostedCallsSerializedInArrivalOrder(t *testing.T) {
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = op
	h := newHarness(t, opts)
	h.apply(hostedSpec("box"))
	if _, ok := h.tools().Lookup("gate"); !ok {
		t.Fatalf("gate not listed; status %+v", h.m.Status())
	}
	st := h.status("box")
	if st.State != switchboard.StateReady || st.Transport != switchboard.TransportHosted || st.Stderr != "fixture stderr tail" {
		t.Fatalf("status = %+v, want ready, hosted, with the stream's stderr", st)
	}
	if _, _, initialized := op.snapshot(); initialized != 1 {
		t.Fatalf("Initialized called %d times after the handshake, want 1", initialized)
	}

	type result struct {
		text string
		err  error
	}
	call := func(ctx context.Context, tool, args string, out chan<- result) {
		res, err := h.m.Call(ctx, switchboard.CallRequest{Tool: tool, Arguments: json.RawMessage(args)})
		r := result{err: err}
		if err == nil {
			r.text = resultText(t, res)
		}
		out <- r
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	a, b, c, d := make(chan result, 1), make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go call(ctx, "gate", `{}`, a)
	select {
	case <-op.entered:
	case <-ctx.Done():
		t.Fatal("gate call never reached the server")
	}
	if !h.m.Busy("box") {
		t.Fatal("Busy = false with a call in flight")
	}
	go call(ctx, "echo", `{"text":"b"}`, b)
	waitQueue(t, h.m, "box", 1)
	go call(ctx, "echo", `{"text":"c"}`, c)
	waitQueue(t, h.m, "box", 2)
	// A caller that gives up while queued leaves without writing.
	dctx, dcancel := context.WithCancel(ctx)
	go call(dctx, "echo", `{"text":"d"}`, d)
	waitQueue(t, h.m, "box", 3)
	dcancel()
	if r := <-d; !errors.Is(r.err, switchboard.ErrCanceled) {
		t.Fatalf("queued call whose ctx ended: err = %v, want ErrCanceled", r.err)
	}
	waitQueue(t, h.m, "box", 2)
	// Two more callers, each queued behind the last.
	e := make(chan result, 1)
	go call(ctx, "echo", `{"text":"e"}`, e)
	waitQueue(t, h.m, "box", 3)

	close(op.release)
	for name, ch := range map[string]chan result{"gate": a, "b": b, "c": c, "e": e} {
		r := <-ch
		if r.err != nil {
			t.Fatalf("call %s: %v", name, r.err)
		}
	}
	if h.m.Busy("box") {
		t.Fatal("Busy = true with nothing in flight")
	}
	wire, opened, _ := op.snapshot()
	calls := checkSerial(t, wire)
	want := []string{`gate {}`, `echo {"text":"b"}`, `echo {"text":"c"}`, `echo {"text":"e"}`}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tools/call on the wire in this order:\n%s\nwant arrival order:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	if opened != 1 {
		t.Fatalf("opened %d streams, want 1", opened)
	}
}

func TestHostedCallTimeoutKeepsConnection(t *testing.T) {
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = op
	h := newHarness(t, opts)
	spec := hostedSpec("box")
	// Long enough that the call after it (bounded by the same timeout)
	// never misses it on a loaded machine.
	spec.CallTimeout = time.Second
	h.apply(spec)

	_, err := h.call("slow", `{"ms":60000}`)
	if !errors.Is(err, switchboard.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if msg := switchboard.Message(err); !strings.Contains(msg, `"box"`) || !strings.Contains(msg, "within 1s") {
		t.Fatalf("message %q should name the server and the timeout", msg)
	}
	if got := h.text("echo", `{"text":"after"}`); got != "after" {
		t.Fatalf("next call = %q, want after", got)
	}
	wire, opened, _ := op.snapshot()
	if opened != 1 {
		t.Fatalf("opened %d streams, want the connection kept (1)", opened)
	}
	// The cancellation notice reaches the server before the next request.
	calls := checkSerial(t, wire)
	if len(calls) != 2 {
		t.Fatalf("calls on the wire: %q", calls)
	}
	if st := h.status("box"); st.State != switchboard.StateReady {
		t.Fatalf("state = %s, want ready", st.State)
	}
}

func TestHostedRequestAndConnect(t *testing.T) {
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = op
	h := newHarness(t, opts)
	h.apply(hostedSpec("box"))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	if _, err := h.m.Request(ctx, "box", "ping", nil); !errors.Is(err, switchboard.ErrUnavailable) {
		t.Fatalf("Request before Connect = %v, want ErrUnavailable (Request never connects)", err)
	}
	if _, opened, _ := op.snapshot(); opened != 0 {
		t.Fatalf("Request opened a stream")
	}
	if err := h.m.Connect(ctx, "nope"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Connect(unknown) = %v, want ErrNotFound", err)
	}
	if err := h.m.Connect(ctx, "box"); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if st := h.status("box"); st.State != switchboard.StateReady {
		t.Fatalf("after Connect: state %s", st.State)
	}
	if err := h.m.Connect(ctx, "box"); err != nil {
		t.Fatalf("Connect again: %v", err)
	}
	if res, err := h.m.Request(ctx, "box", "ping", nil); err != nil || string(res) != "{}" {
		t.Fatalf("ping = %s, %v", res, err)
	}
	res, err := h.m.Request(ctx, "box", "tools/call", json.RawMessage("{\"name\":\"echo\",\n\"arguments\":{\"text\":\"raw\"}}"))
	if err != nil {
		t.Fatalf("tools/call through Request: %v", err)
	}
	if got := resultText(t, res); got != "raw" {
		t.Fatalf("Request result = %q", got)
	}
	_, err = h.m.Request(ctx, "box", "no/such/method", json.RawMessage(`{}`))
	var rpc *switchboard.RPCError
	if !errors.As(err, &rpc) || rpc.Code != switchboard.CodeMethodNotFound {
		t.Fatalf("unknown method: err = %v, want the server's -32601", err)
	}
	if _, err := h.m.Request(ctx, "box", "ping", json.RawMessage(`{`)); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("bad params: err = %v, want ErrInvalid", err)
	}
	if _, err := h.m.Request(ctx, "nope", "ping", nil); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("unknown server: err = %v, want ErrNotFound", err)
	}
	if _, opened, _ := op.snapshot(); opened != 1 {
		t.Fatalf("opened %d streams, want 1", opened)
	}
}

func TestHostedWithoutOpener(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(hostedSpec("box"))
	_, err := h.call("echo", `{"text":"x"}`)
	if !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound (no tools)", err)
	}
	st := h.waitSettled("box")
	if !strings.Contains(st.LastError, "hosted servers are not available") {
		t.Fatalf("status = %+v", st)
	}
}

// brokenOpener fails to open, with a domain error or a raw one.
type brokenOpener struct{ err error }

func (b brokenOpener) OpenStream(context.Context, switchboard.ServerSpec) (Stream, error) {
	return nil, b.err
}

func TestHostedOpenErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"domain error passes": {switchboard.Errorf(switchboard.ErrResourceLimit, "server %q: too many hosted servers running", "box"), "too many hosted servers running"},
		"other errors hidden": {fmt.Errorf("dial unix /var/run/docker.sock: refused"), `server "box": cannot open its stream: internal error`},
	} {
		t.Run(name, func(t *testing.T) {
			opts := testOptions()
			opts.Streams = brokenOpener{tc.err}
			h := newHarness(t, opts)
			h.apply(hostedSpec("box"))
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			err := h.m.Connect(ctx, "box")
			if err == nil || !strings.Contains(switchboard.Message(err), tc.want) {
				t.Fatalf("Connect = %v, want it to say %q", err, tc.want)
			}
			if strings.Contains(h.status("box").LastError, "/var/run") {
				t.Fatalf("status leaks a host path: %+v", h.status("box"))
			}
		})
	}
}

func TestHostedStreamLostReconnects(t *testing.T) {
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = op
	h := newHarness(t, opts)
	h.apply(hostedSpec("box"))
	if got := h.text("echo", `{"text":"one"}`); got != "one" {
		t.Fatalf("echo = %q", got)
	}
	h.m.mu.Lock()
	c := h.m.byName["box"].conn.(*streamConn)
	h.m.mu.Unlock()
	_ = c.st.Close() // the container went away
	h.waitState("box", switchboard.StateFailed)
	if got := h.text("echo", `{"text":"two"}`); got != "two" {
		t.Fatalf("echo after reconnect = %q", got)
	}
	if _, opened, initialized := op.snapshot(); opened != 2 || initialized != 2 {
		t.Fatalf("opened %d, initialized %d; want 2 and 2", opened, initialized)
	}
}

func TestFIFOHandsOverInOrder(t *testing.T) {
	q := newFIFO()
	ctx := context.Background()
	if err := q.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	const n = 8
	for i := range n {
		wg.Go(func() {
			if err := q.acquire(ctx); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			q.release()
		})
		// Wait until caller i is in line before starting the next.
		for {
			_, waiting, changed := q.state()
			if waiting == i+1 {
				break
			}
			<-changed
		}
	}
	// A waiter whose ctx is already over leaves at once, holding nothing.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := q.acquire(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire with ended ctx = %v", err)
	}
	q.release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("handed over in order %v, want 0..%d", order, n-1)
		}
	}
	if held, waiting, _ := q.state(); held || waiting != 0 {
		t.Fatalf("after all: held %v, waiting %d", held, waiting)
	}
}

// Removing a hosted server closes its stream; Close closes the rest and
// leaves no goroutine behind (builtins included).
func TestHostedAndBuiltinClose(t *testing.T) {
	baseline := runtime.NumGoroutine()
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = op
	h := newHarness(t, opts)
	h.apply(prefixed(hostedSpec("a"), "a_"), prefixed(hostedSpec("b"), "b_"))
	h.m.SetBuiltin("sandbox", newFakeBuiltin())
	for _, tool := range []string{"a_echo", "b_echo", "whoami"} {
		if _, err := h.call(tool, `{"text":"x"}`); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	if n := op.open(); n != 2 {
		t.Fatalf("%d streams open, want 2", n)
	}
	h.apply(prefixed(hostedSpec("b"), "b_"))
	if n := op.open(); n != 1 {
		t.Fatalf("after removing a: %d streams open, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := h.m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := op.open(); n != 0 {
		t.Fatalf("after Close: %d streams open", n)
	}
	pollUntil(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= baseline })
	if _, err := h.call("whoami", `{}`); err == nil {
		t.Fatal("builtin call after Close succeeded")
	}
	h.m.SetBuiltin("late", newFakeBuiltin()) // after Close: nothing happens
	if len(h.m.Status()) != 0 {
		t.Fatalf("status after Close: %+v", h.m.Status())
	}
}

// childStdio is the stdio of a real mcptest child process, as a Stream
// that is not ours to manage as a stdio server (the way a container's
// attach stream is not).
type childStdio struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   io.ReadCloser
}

func startChildStdio(t *testing.T) *childStdio {
	t.Helper()
	cmd := exec.Command(fixtureBin)
	cmd.Env = append(os.Environ(), mcptest.ChildEnv(mcptest.Options{Name: "child"})...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &childStdio{cmd: cmd, stdin: stdin, out: out}
}

func (c *childStdio) Read(p []byte) (int, error)  { return c.out.Read(p) }
func (c *childStdio) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close ends the child: EOF on its stdin makes it exit.
func (c *childStdio) Close() error {
	_ = c.stdin.Close()
	return c.cmd.Wait()
}

// childOpener serves hosted specs with real child processes.
type childOpener struct{ op *pipeOpener }

func (o childOpener) OpenStream(context.Context, switchboard.ServerSpec) (Stream, error) {
	o.op.mu.Lock()
	o.op.opened++
	o.op.mu.Unlock()
	return &pipeStream{op: o.op, p: startChildStdio(o.op.t)}, nil
}

// Concurrent calls to a hosted server that is a real child process never
// overlap on the wire, whatever the order the goroutines run in.
func TestHostedChildConcurrentCallsNeverOverlap(t *testing.T) {
	op := newPipeOpener(t)
	opts := testOptions()
	opts.Streams = childOpener{op}
	h := newHarness(t, opts)
	h.apply(hostedSpec("child"))
	h.tools()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf("call %d", i)
			res, err := h.call("echo", fmt.Sprintf(`{"text":%q}`, want))
			if err != nil || !strings.Contains(string(res), want) {
				t.Errorf("echo %d = %s, %v", i, res, err)
			}
		})
	}
	wg.Wait()
	wire, opened, _ := op.snapshot()
	if calls := checkSerial(t, wire); len(calls) != n || opened != 1 {
		t.Fatalf("%d calls on the wire over %d streams, want %d over 1", len(calls), opened, n)
	}
}

// Under callers that give up at any moment (before, while or just as the
// lock is handed to them) the line never has two holders, never loses the
// lock and ends empty.
func TestFIFOExclusiveUnderCancellation(t *testing.T) {
	q := newFIFO()
	var inside atomic.Int32
	var wg sync.WaitGroup
	for i := range 300 {
		ctx, cancel := context.WithCancel(context.Background())
		if i%3 == 0 {
			wg.Go(cancel) // races with the hand-over
		}
		wg.Go(func() {
			defer cancel()
			if q.acquire(ctx) != nil {
				return
			}
			if n := inside.Add(1); n != 1 {
				t.Errorf("%d holders at once", n)
			}
			runtime.Gosched()
			inside.Add(-1)
			q.release()
		})
	}
	wg.Wait()
	if held, waiting, _ := q.state(); held || waiting != 0 {
		t.Fatalf("after all: held %v, waiting %d", held, waiting)
	}
}
