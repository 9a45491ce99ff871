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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// fixtureBin is the absolute path of this test binary, which serves the
// mcptest fixture on stdio when re-executed with SWITCHBOARD_FIXTURE=stdio.
var fixtureBin string

func TestMain(m *testing.M) {
	mcptest.RunIfChild()
	fixtureBin = os.Args[0]
	if p, err := filepath.Abs(fixtureBin); err == nil {
		fixtureBin = p
	}
	os.Exit(m.Run())
}

// waitTimeout bounds every wait for an asynchronous event. It is a failure
// deadline, never a way to let things settle.
const waitTimeout = 20 * time.Second

// testOptions are Manager options with timings shortened for tests. The
// call and connect timeouts stay long: they are failure bounds, not waits.
func testOptions() Options {
	return Options{
		Version:         "test",
		CallTimeout:     waitTimeout,
		ConnectTimeout:  waitTimeout,
		ListWait:        waitTimeout, // tests of the bound set their own
		StopTimeout:     2 * time.Second,
		BreakerFailures: 3,
		BreakerCooldown: time.Hour,
		ListDebounce:    5 * time.Millisecond,
		ReconnectMin:    5 * time.Millisecond,
		ReconnectMax:    50 * time.Millisecond,
	}
}

type stateEvent struct {
	Server string
	State  switchboard.ServerState
}

// harness is a Manager whose OnState and OnToolsChanged callbacks feed a
// broadcast channel the test waits on.
type harness struct {
	t *testing.T
	m *Manager

	mu          sync.Mutex
	events      []stateEvent
	toolChanges int
	changed     chan struct{} // closed and replaced on every event
	logs        testenv.Buffer
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{t: t, changed: make(chan struct{})}
	userOnState := opts.OnState
	opts.OnState = func(server string, st switchboard.ServerState) {
		h.mu.Lock()
		h.events = append(h.events, stateEvent{server, st})
		h.signalLocked()
		h.mu.Unlock()
		if userOnState != nil {
			userOnState(server, st)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h.m = New(opts)
	h.m.OnToolsChanged(func() {
		h.mu.Lock()
		h.toolChanges++
		h.signalLocked()
		h.mu.Unlock()
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := h.m.Close(ctx); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
		if t.Failed() {
			t.Logf("manager log:\n%s", h.logs.String())
		}
	})
	return h
}

func (h *harness) signalLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// waitFor blocks until cond holds, re-checking it after every state change
// and every catalog change; it fails the test after waitTimeout.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		ch := h.changed
		h.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			h.t.Fatalf("timed out after %s waiting for %s\nstate events: %v\nstatus: %+v", waitTimeout, what, h.eventsSnapshot(), h.m.Status())
		}
	}
}

// waitState waits until the status of server is one of states.
func (h *harness) waitState(server string, states ...switchboard.ServerState) switchboard.ServerStatus {
	h.t.Helper()
	var st switchboard.ServerStatus
	h.waitFor(fmt.Sprintf("server %q in state %v", server, states), func() bool {
		st = h.status(server)
		return slices.Contains(states, st.State)
	})
	return st
}

// waitSettled waits until server has no connection attempt under way.
func (h *harness) waitSettled(server string) switchboard.ServerStatus {
	h.t.Helper()
	var st switchboard.ServerStatus
	h.waitFor(fmt.Sprintf("server %q to finish connecting", server), func() bool {
		st = h.status(server)
		return st.State != switchboard.StateConnecting
	})
	return st
}

// mark returns a position in the event log for sawSince.
func (h *harness) mark() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// sawSince reports whether server was reported in state st after mark.
func (h *harness) sawSince(mark int, server string, st switchboard.ServerState) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.events[mark:] {
		if e.Server == server && e.State == st {
			return true
		}
	}
	return false
}

func (h *harness) eventsSnapshot() []stateEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func (h *harness) statesOf(server string) []switchboard.ServerState {
	var out []switchboard.ServerState
	for _, e := range h.eventsSnapshot() {
		if e.Server == server {
			out = append(out, e.State)
		}
	}
	return out
}

func (h *harness) status(server string) switchboard.ServerStatus {
	h.t.Helper()
	for _, s := range h.m.Status() {
		if s.Name == server {
			return s
		}
	}
	h.t.Fatalf("server %q not in status %+v", server, h.m.Status())
	return switchboard.ServerStatus{}
}

func (h *harness) apply(specs ...switchboard.ServerSpec) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	h.m.Apply(ctx, specs)
}

func (h *harness) tools() *switchboard.Catalog {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	return h.m.Tools(ctx)
}

// call calls a tool with raw JSON arguments (may be empty), bounded by
// waitTimeout.
func (h *harness) call(tool, args string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var raw json.RawMessage
	if args != "" {
		raw = json.RawMessage(args)
	}
	return h.m.Call(ctx, switchboard.CallRequest{Tool: tool, Arguments: raw})
}

// text calls tool and returns its single text content, failing the test on
// any error or an isError result.
func (h *harness) text(tool, args string) string {
	h.t.Helper()
	res, err := h.call(tool, args)
	if err != nil {
		h.t.Fatalf("Call(%q, %s): %v", tool, args, err)
	}
	return resultText(h.t, res)
}

// progressTokens calls the fixture's progress tool for steps steps with
// the client progress token "tok-1" and returns the token of every
// progress notification the call passed on, in order.
func (h *harness) progressTokens(steps int) []string {
	h.t.Helper()
	var mu sync.Mutex
	var tokens []string
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "progress", Arguments: json.RawMessage(fmt.Sprintf(`{"steps":%d}`, steps)),
		Meta: json.RawMessage(`{"progressToken":"tok-1"}`), OnProgress: func(p json.RawMessage) {
			var n struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			}
			_ = json.Unmarshal(p, &n)
			mu.Lock()
			tokens = append(tokens, string(n.ProgressToken))
			mu.Unlock()
		}})
	if err != nil {
		h.t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(tokens)
}

// pid returns the process id reported by the fixture tool (normally "pid"
// or a prefixed variant).
func (h *harness) pid(tool string) int {
	h.t.Helper()
	s := h.text(tool, "")
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		h.t.Fatalf("%s returned %q, not a pid", tool, s)
	}
	return pid
}

func resultText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		t.Fatalf("result %s: %v", res, err)
	}
	if r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("result is not a single text content: %s", res)
	}
	return r.Content[0].Text
}

// stdioSpec is a spec running the fixture as a child process of name.
func stdioSpec(name string) switchboard.ServerSpec {
	return switchboard.ServerSpec{
		Name:      name,
		Transport: switchboard.TransportStdio,
		Command:   fixtureBin,
		Env: map[string]string{
			mcptest.EnvFixture:     "stdio",
			mcptest.EnvFixtureName: name,
		},
	}
}

// shellScript writes a /bin/sh script into dir and returns a spec running
// it (through sh, so the script file itself is never exec'd while a
// concurrent fork might still hold it open for writing).
func shellScript(t *testing.T, name, body string, env map[string]string) switchboard.ServerSpec {
	t.Helper()
	sh, err := exec.LookPath("sh")
	testenv.Need(t, "stdio", err == nil, "no sh in PATH")
	path := filepath.Join(t.TempDir(), name+".sh")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return switchboard.ServerSpec{Name: name, Transport: switchboard.TransportStdio, Command: sh, Args: []string{path}, Env: env}
}

// processGone reports whether pid no longer exists (or is a zombie that
// only waits for someone else to reap it).
func processGone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	if _, rerr := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(rerr, os.ErrNotExist) {
		return true
	}
	st, ok := procStat(pid)
	return ok && !st.live()
}

// readPid reads a pid a test script wrote to path.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s holds %q, not a pid", path, b)
	}
	return pid
}

// stat is what a test needs from /proc/<pid>/stat.
type stat struct {
	state byte
	pgrp  int
}

// live reports whether the process runs, as opposed to a zombie that only
// waits to be reaped.
func (s stat) live() bool { return s.state != 'Z' && s.state != 'X' }

// procStat reads /proc/<pid>/stat; false if it cannot (gone, no procfs).
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	// After the parenthesised command name (which may hold spaces and
	// parentheses): state, ppid, pgrp.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return stat{}, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], pgrp: pgrp}, true
}

// lines counts the lines of a file (0 if it does not exist).
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// rawFixture is a fixture child spoken to directly over newline-delimited
// JSON-RPC, without any gateway code: the ground truth for what the fixture
// returns byte for byte.
type rawFixture struct {
	t      *testing.T
	stdin  io.WriteCloser
	out    *bufio.Reader
	nextID int
}

func startRawFixture(t *testing.T, name string) *rawFixture {
	t.Helper()
	cmd := exec.Command(fixtureBin)
	cmd.Env = append(os.Environ(), mcptest.ChildEnv(mcptest.Options{Name: name})...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f := &rawFixture{t: t, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill() // quicker than waiting for it to notice EOF
		_ = cmd.Wait()
	})
	f.request("initialize", `{"protocolVersion":"`+ProtocolVersion+`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	f.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return f
}

func (f *rawFixture) send(line string) {
	f.t.Helper()
	if _, err := io.WriteString(f.stdin, line+"\n"); err != nil {
		f.t.Fatal(err)
	}
}

// request sends a request and returns its raw result, skipping
// notifications.
func (f *rawFixture) request(method, params string) json.RawMessage {
	f.t.Helper()
	f.nextID++
	id := strconv.Itoa(f.nextID)
	f.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`)
	for {
		line, err := f.out.ReadBytes('\n')
		if err != nil {
			f.t.Fatalf("reading fixture output: %v", err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			f.t.Fatalf("fixture sent %q: %v", line, err)
		}
		if string(m.ID) != id {
			continue
		}
		if m.Error != nil {
			f.t.Fatalf("%s: error %s", method, m.Error)
		}
		return m.Result
	}
}

// tools returns the fixture's tools/list, raw, in order.
func (f *rawFixture) tools() []rawTool {
	f.t.Helper()
	var page struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(f.request("tools/list", `{}`), &page); err != nil {
		f.t.Fatal(err)
	}
	var out []rawTool
	for _, raw := range page.Tools {
		var n struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, rawTool{name: n.Name, raw: raw})
	}
	return out
}
