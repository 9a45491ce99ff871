package upstreams

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// maxLine bounds one JSON-RPC message from a stdio child (64 MiB): a child
// that never sends a newline must not make the gateway grow without limit.
const maxLine = 64 << 20

// stdioConn speaks newline-delimited JSON-RPC to a child process. It owns
// the process: its own process group, a clean environment, stderr kept in a
// ring buffer, SIGTERM to the group on close and SIGKILL after stopTimeout.
//
// We run the child ourselves instead of through mcp-go's stdio transport
// because that one inherits the gateway's whole environment unless
// overridden, signals only the direct child (grandchildren of `npx` or
// `uvx` survive), has fixed 2 s + 3 s close timeouts, and offers no signal
// when the child dies.
type stdioConn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *ring
	log    *slog.Logger

	writes chan []byte
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan message
	onNote  func(method string, params json.RawMessage)

	doneCh   chan struct{}
	doneOnce sync.Once
	exited   chan struct{} // closed after Wait returned
	waitErr  error
}

// baseEnv lists the variables a child inherits from the gateway besides
// what its config gives: enough to find programs and a home, nothing that
// could be a secret.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "SYSTEMROOT"}

// childEnv builds a child's environment: basics from the gateway, then the
// spec's env, sorted for reproducibility.
func childEnv(spec map[string]string) []string {
	m := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range spec {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func startStdio(spec switchboard.ServerSpec, stopTimeout time.Duration, onNote func(string, json.RawMessage), log *slog.Logger) (*stdioConn, error) {
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = childEnv(spec.Env)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopTimeout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe rather than StdoutPipe: Wait then leaves the read end
	// alone, so the exit is noticed even while a descendant still holds
	// stdout, and no final message is lost to Wait closing the pipe.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	c := &stdioConn{cmd: cmd, stdin: stdin, stderr: newRing(16 << 10), log: log,
		pending: map[string]chan message{}, onNote: onNote, writes: make(chan []byte, 64),
		doneCh: make(chan struct{}), exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		_ = stdout.Close()
		_ = pw.Close()
		// The message names the command but not its environment.
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: cannot start %q: %v", spec.Name, spec.Command, unwrapExec(err))
	}
	_ = pw.Close()
	go c.run(stdout)
	go c.writeLoop()
	return c, nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (c *stdioConn) markDone() {
	c.doneOnce.Do(func() {
		close(c.doneCh)
		c.mu.Lock()
		for id, ch := range c.pending {
			close(ch)
			delete(c.pending, id)
		}
		c.mu.Unlock()
	})
}

func (c *stdioConn) done() <-chan struct{} { return c.doneCh }

// run reads until stdout ends while another goroutine reaps the child.
// The connection is marked lost once the exit status is known (so status
// can say how the child ended) and the last messages were read; a child
// that closes stdout but keeps running, or exits while a descendant keeps
// stdout open, is marked lost after a second.
func (c *stdioConn) run(stdout *os.File) {
	readDone := make(chan struct{})
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
		select {
		case <-readDone:
		case <-time.After(time.Second):
			_ = stdout.Close() // unblocks the reader
		}
		c.markDone()
	}()
	c.readLoop(stdout)
	close(readDone)
	select {
	case <-c.exited:
	case <-time.After(time.Second):
	}
	c.markDone()
}

func (c *stdioConn) readLoop(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				c.log.Warn("upstream stdout unreadable; dropping connection", "err", err)
			}
			return
		}
	}
}

// readLine reads one newline-terminated line of at most maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLine {
			return nil, fmt.Errorf("message longer than %d bytes", maxLine)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return buf, err
	}
}

func (c *stdioConn) dispatch(line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		c.log.Debug("upstream sent a line that is not JSON-RPC; ignored", "err", err)
		return
	}
	switch {
	case m.Method != "" && len(m.ID) > 0:
		// A request from the server. We offer no client capabilities, so
		// only ping gets an answer beyond "method not found".
		resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		if m.Method == "ping" {
			resp["result"] = struct{}{}
		} else {
			resp["error"] = rpcErrorWire{Code: switchboard.CodeMethodNotFound, Message: "switchboard does not offer " + m.Method}
		}
		// Never block the reader on a full queue.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.write(ctx, resp)
		cancel()
	case m.Method != "":
		if c.onNote != nil {
			c.onNote(m.Method, m.Params)
		}
	case len(m.ID) > 0:
		c.mu.Lock()
		ch, ok := c.pending[string(m.ID)]
		delete(c.pending, string(m.ID))
		c.mu.Unlock()
		if ok {
			ch <- m
		}
	}
}

// write queues one message for the writer goroutine, giving up when ctx
// ends: a child that stops reading stdin fills the pipe, and a call must
// still return at its deadline rather than block in write(2).
func (c *stdioConn) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.writeRaw(ctx, b)
}

// writeRaw queues one compact JSON message (it must hold no newline).
func (c *stdioConn) writeRaw(ctx context.Context, b []byte) error {
	b = append(b, '\n')
	select {
	case c.writes <- b:
		return nil
	case <-c.doneCh:
		return errConnLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLoop is the only writer of stdin. It ends when stdin is closed or
// the connection is lost.
func (c *stdioConn) writeLoop() {
	for {
		select {
		case b := <-c.writes:
			if _, err := c.stdin.Write(b); err != nil {
				c.markDone()
				return
			}
		case <-c.doneCh:
			return
		}
	}
}

func (c *stdioConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := strconv.FormatInt(c.nextID.Add(1), 10)
	ch := make(chan message, 1)
	c.mu.Lock()
	select {
	case <-c.doneCh:
		c.mu.Unlock()
		return nil, errConnLost
	default:
	}
	c.pending[id] = ch
	c.mu.Unlock()
	line := make([]byte, 0, 64+len(method))
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"method":`...)
	line = append(line, mustJSON(method)...)
	if params != nil {
		raw, ok := params.(json.RawMessage)
		if !ok {
			b, err := json.Marshal(params)
			if err != nil {
				c.forget(id)
				return nil, err
			}
			raw = b
		}
		line = append(line, `,"params":`...)
		line = append(line, raw...)
	}
	line = append(line, '}')
	if err := c.writeRaw(ctx, line); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errConnLost
		}
		return resultOf(m)
	case <-ctx.Done():
		c.forget(id)
		// Tell the server to stop working on it; best effort, in the
		// background so a child that stopped reading cannot delay the
		// caller past its deadline.
		reason := cancelReason(ctx)
		go func() {
			nctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = c.notify(nctx, "notifications/cancelled", map[string]any{"requestId": json.RawMessage(id), "reason": reason})
		}()
		return nil, ctx.Err()
	}
}

func cancelReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out in gateway"
	}
	return "cancelled by client"
}

func resultOf(m message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, &switchboard.RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
	}
	if m.Result == nil {
		return json.RawMessage(`{}`), nil
	}
	return m.Result, nil
}

func (c *stdioConn) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *stdioConn) notify(ctx context.Context, method string, params any) error {
	n := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		n["params"] = params
	}
	return c.write(ctx, n)
}

// close ends the child: stdin closed, SIGTERM to its process group, and
// SIGKILL to the group if it is still there after the stop timeout. It
// returns once the child has been reaped.
func (c *stdioConn) close() error {
	// Closing stdin also unblocks a writeLoop stuck on a full pipe.
	_ = c.stdin.Close()
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(c.cmd.WaitDelay):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
	// Grandchildren that ignored SIGTERM must not outlive the gateway.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	c.markDone()
	return nil
}

// exitStatus describes how the child ended, for status and logs.
func (c *stdioConn) exitStatus() string {
	select {
	case <-c.exited:
		if c.waitErr == nil {
			return "exited with status 0"
		}
		return c.waitErr.Error()
	default:
		return ""
	}
}

// ring keeps the last n bytes written to it.
type ring struct {
	mu  sync.Mutex
	buf []byte
	n   int
}

func newRing(n int) *ring { return &ring{n: n} }

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.n {
		r.buf = append(r.buf[:0], r.buf[len(r.buf)-r.n:]...)
	}
	return len(p), nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}
