package sandbox_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

type fixture struct {
	t   *testing.T
	e   *engine.Engine
	svc *sandbox.Service
	img string
}

func newFixture(t *testing.T, mod func(*sandbox.Options)) *fixture {
	t.Helper()
	e := enginetest.New(t)
	img := sandboxtest.Image(t, e)
	opts := sandbox.Options{Engine: e, ImagePython: img, ImageNode: img, DefaultTimeout: 20 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	svc := sandbox.New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := svc.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &fixture{t: t, e: e, svc: svc, img: img}
}

// result is a decoded execution result.
type result struct {
	SessionID       string `json:"session_id"`
	SessionCreated  bool   `json:"session_created"`
	Template        string `json:"template"`
	Flavor          string `json:"flavor"`
	WorkspaceID     string `json:"workspace_id"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	ExitCode        *int   `json:"exit_code"`
	ExecutionTimeMS int64  `json:"execution_time_ms"`
	TimedOut        bool   `json:"timed_out"`
	Success         bool   `json:"success"`
}

// call runs tool in project with args; it returns the decoded
// structuredContent or the *RPCError.
func (f *fixture) call(project, tool string, args any) (json.RawMessage, *switchboard.RPCError) {
	f.t.Helper()
	return f.callCtx(context.Background(), project, "agent-1", tool, args, nil)
}

func (f *fixture) callCtx(ctx context.Context, project, agent, tool string, args any, progress func(json.RawMessage)) (json.RawMessage, *switchboard.RPCError) {
	f.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		f.t.Fatal(err)
	}
	req := switchboard.CallRequest{Project: project, Session: agent, Tool: tool, Arguments: raw}
	if progress != nil {
		req.Meta = json.RawMessage(`{"progressToken":"p1"}`)
		req.OnProgress = progress
	}
	res, err := f.svc.Tools(project).CallTool(ctx, req)
	if err != nil {
		var re *switchboard.RPCError
		if !errors.As(err, &re) {
			return nil, &switchboard.RPCError{Message: err.Error()} // code 0: not an RPC error
		}
		return nil, re
	}
	var tr struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(res, &tr); err != nil {
		f.t.Fatalf("%s: result %s: %v", tool, res, err)
	}
	if tr.IsError || len(tr.Content) != 1 || tr.Content[0].Type != "text" {
		f.t.Fatalf("%s: unexpected result shape %s", tool, res)
	}
	var a, b any
	_ = json.Unmarshal([]byte(tr.Content[0].Text), &a)
	_ = json.Unmarshal(tr.Structured, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		f.t.Fatalf("%s: text content and structuredContent differ:\n%s\n%s", tool, tr.Content[0].Text, tr.Structured)
	}
	return tr.Structured, nil
}

// gvisor reports whether session id runs under gVisor (its kernel says
// 4.4.0, whatever the host's).
func (f *fixture) gvisor(id string) bool {
	f.t.Helper()
	r := f.exec("p", "execute_command", map[string]any{"command": "uname -r", "session_id": id})
	return r.Stdout == "4.4.0\n"
}

func (f *fixture) exec(project, tool string, args map[string]any) result {
	f.t.Helper()
	raw, rerr := f.call(project, tool, args)
	if rerr != nil {
		f.t.Fatalf("%s %v: %d %s", tool, args, rerr.Code, rerr.Message)
	}
	var r result
	if err := json.Unmarshal(raw, &r); err != nil {
		f.t.Fatal(err)
	}
	return r
}

func wantCode(t *testing.T, rerr *switchboard.RPCError, code int, contains string) {
	t.Helper()
	if rerr == nil {
		t.Fatalf("want error %d, got a result", code)
	}
	if rerr.Code != code {
		t.Fatalf("want code %d, got %d: %s", code, rerr.Code, rerr.Message)
	}
	if contains != "" && !strings.Contains(rerr.Message, contains) {
		t.Fatalf("message %q does not mention %q", rerr.Message, contains)
	}
}

func exitCode(r result) int {
	if r.ExitCode == nil {
		return -1000
	}
	return *r.ExitCode
}

func TestToolsAndSessions(t *testing.T) {
	f := newFixture(t, nil)

	// A new session: python by default.
	r := f.exec("p1", "execute_code", map[string]any{"code": "import sys; print('hi'); print('err', file=sys.stderr); open('/workspace/a.txt','w').write('A')"})
	if !r.SessionCreated || r.SessionID == "" || r.Stdout != "hi\n" || r.Stderr != "err\n" || exitCode(r) != 0 || !r.Success || r.TimedOut ||
		r.StdoutBytes != 3 || r.Template != "python" || r.Flavor != "small" {
		t.Fatalf("first call: %+v", r)
	}
	sid := r.SessionID

	// Reuse: same container, files kept; node in the same session.
	r = f.exec("p1", "execute_code", map[string]any{"code": "console.log(require('fs').readFileSync('/workspace/a.txt','utf8'))", "template": "node", "session_id": sid})
	if r.SessionCreated || r.SessionID != sid || r.Stdout != "A\n" || r.Template != "node" {
		t.Fatalf("node in the session: %+v", r)
	}

	// execute_command: a shell line, then argv without a shell.
	r = f.exec("p1", "execute_command", map[string]any{"command": "echo $((1+2)) | tr 3 x; exit 3", "session_id": sid})
	if r.Stdout != "x\n" || exitCode(r) != 3 || r.Success {
		t.Fatalf("shell line: %+v", r)
	}
	r = f.exec("p1", "execute_command", map[string]any{"command": "echo", "args": []string{"$HOME", "a b"}, "session_id": sid})
	if r.Stdout != "$HOME a b\n" {
		t.Fatalf("argv: %+v", r)
	}
	// working_dir (relative to /workspace), stdin and env.
	f.exec("p1", "execute_command", map[string]any{"command": "mkdir -p sub", "session_id": sid})
	r = f.exec("p1", "execute_command", map[string]any{"command": "pwd; cat; echo $GREETING", "working_dir": "sub", "stdin": "from stdin\n", "env": map[string]string{"GREETING": "hello"}, "session_id": sid})
	if r.Stdout != "/workspace/sub\nfrom stdin\nhello\n" {
		t.Fatalf("working_dir/stdin/env: %+v", r)
	}
	r = f.exec("p1", "execute_code", map[string]any{"code": "import sys; print(sys.stdin.read().upper())", "stdin": "abc", "session_id": sid})
	if r.Stdout != "ABC\n" {
		t.Fatalf("code with stdin: %+v", r)
	}
	// execute_code's env and timeout.
	r = f.exec("p1", "execute_code", map[string]any{"code": "import os; print(os.environ['GREETING'])", "env": map[string]string{"GREETING": "py"}, "session_id": sid})
	if r.Stdout != "py\n" {
		t.Fatalf("code with env: %+v", r)
	}
	r = f.exec("p1", "execute_code", map[string]any{"code": "while True: pass", "timeout": 1, "session_id": sid})
	if !r.TimedOut || r.ExitCode != nil || r.Success {
		t.Fatalf("code with timeout: %+v", r)
	}
	// A missing working_dir is the program's failure, not the gateway's.
	r = f.exec("p1", "execute_command", map[string]any{"command": "true", "working_dir": "/nope", "session_id": sid})
	if exitCode(r) != 126 {
		t.Fatalf("missing working_dir: %+v", r)
	}

	// execute_command's template picks a new session's image and is
	// reported; an existing session's template cannot change.
	nr := f.exec("p1", "execute_command", map[string]any{"command": "node -e 'console.log(1+1)'", "template": "node"})
	if nr.Template != "node" || nr.Stdout != "2\n" || !nr.SessionCreated {
		t.Fatalf("execute_command with template node: %+v", nr)
	}
	_, rerr := f.call("p1", "execute_command", map[string]any{"command": "true", "template": "python", "session_id": nr.SessionID})
	wantCode(t, rerr, -32602, "template")
	if _, rerr := f.call("p1", "stop_session", map[string]any{"session_id": nr.SessionID}); rerr != nil {
		t.Fatal(rerr)
	}

	// get_sessions lists it with the agent session; other projects see nothing.
	raw, rerr := f.call("p1", "get_sessions", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	var gs struct {
		Sessions []switchboard.SandboxSession `json:"sessions"`
	}
	_ = json.Unmarshal(raw, &gs)
	if len(gs.Sessions) != 1 || gs.Sessions[0].SessionID != sid || gs.Sessions[0].AgentSessionID != "agent-1" || gs.Sessions[0].WorkspaceID == "" || gs.Sessions[0].Flavor != "small" {
		t.Fatalf("get_sessions: %s", raw)
	}
	raw, _ = f.call("p1", "get_sessions", map[string]any{"session_id": sid})
	_ = json.Unmarshal(raw, &gs)
	if len(gs.Sessions) != 1 {
		t.Fatalf("get_sessions one: %s", raw)
	}
	raw, _ = f.call("p2", "get_sessions", map[string]any{})
	if string(raw) != `{"sessions":[]}` {
		t.Fatalf("p2 sees %s", raw)
	}

	// Another project's session is "not found", as an unknown one is.
	_, rerr = f.call("p2", "execute_code", map[string]any{"code": "print(1)", "session_id": sid})
	wantCode(t, rerr, -32602, "session not found")
	_, rerr = f.call("p1", "execute_command", map[string]any{"command": "true", "session_id": "sb-unknown"})
	wantCode(t, rerr, -32602, "session not found")
	_, rerr = f.call("p2", "stop_session", map[string]any{"session_id": sid})
	wantCode(t, rerr, -32602, "session not found")
	_, rerr = f.call("p2", "get_volume_path", map[string]any{"session_id": sid})
	wantCode(t, rerr, -32602, "session not found")

	// get_volume_path names the workspace volume.
	raw, rerr = f.call("p1", "get_volume_path", map[string]any{"session_id": sid})
	if rerr != nil || !strings.Contains(string(raw), `"container_path":"/workspace"`) || !strings.Contains(string(raw), gs.Sessions[0].Volume) {
		t.Fatalf("get_volume_path: %s %v", raw, rerr)
	}

	// stop_session: gone afterwards, the workspace kept.
	raw, rerr = f.call("p1", "stop_session", map[string]any{"session_id": sid})
	if rerr != nil || !strings.Contains(string(raw), `"stopped":true`) || !strings.Contains(string(raw), `"workspace_retained":true`) {
		t.Fatalf("stop_session: %s %v", raw, rerr)
	}
	_, rerr = f.call("p1", "execute_command", map[string]any{"command": "true", "session_id": sid})
	wantCode(t, rerr, -32602, "session not found")
	vols, err := f.e.ListVolumes(context.Background(), map[string]string{engine.LabelKind: sandbox.KindWorkspace})
	// Two workspaces: this session's and the node session's, both kept.
	if err != nil || len(vols) != 2 || !slices.ContainsFunc(vols, func(v engine.Volume) bool { return v.Name == gs.Sessions[0].Volume }) {
		t.Fatalf("workspace volume after stop: %v %v", vols, err)
	}
	if st, _ := f.e.List(context.Background(), map[string]string{engine.LabelKind: sandbox.KindSession}); len(st) != 0 {
		t.Fatalf("containers left after stop: %v", st)
	}
}

func TestInvalidArguments(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.MaxTimeout = time.Minute })
	cases := []struct {
		name, tool string
		args       any
		code       int
		contains   string
	}{
		{"missing code", "execute_code", map[string]any{}, -32602, "code is required"},
		{"empty code", "execute_code", map[string]any{"code": ""}, -32602, "code is required"},
		{"code not a string", "execute_code", map[string]any{"code": 5}, -32602, "code"},
		{"unknown template", "execute_code", map[string]any{"code": "1", "template": "ruby"}, -32602, "template"},
		{"unknown flavor", "execute_code", map[string]any{"code": "1", "flavor": "huge"}, -32602, "flavor"},
		{"negative timeout", "execute_code", map[string]any{"code": "1", "timeout": -1}, -32602, "timeout"},
		{"zero timeout", "execute_command", map[string]any{"command": "true", "timeout": 0}, -32602, "timeout"},
		{"timeout not a number", "execute_command", map[string]any{"command": "true", "timeout": "5"}, -32602, "timeout"},
		{"timeout above the cap", "execute_command", map[string]any{"command": "true", "timeout": 3600}, -32602, "MCP_SERVER_SANDBOX_MAX_TIMEOUT"},
		{"unknown argument", "execute_command", map[string]any{"command": "true", "timeout_seconds": 3}, -32602, "timeout_seconds"},
		{"missing command", "execute_command", map[string]any{"args": []string{"x"}}, -32602, "command is required"},
		{"args not strings", "execute_command", map[string]any{"command": "echo", "args": []int{1}}, -32602, "args"},
		{"bad env name", "execute_command", map[string]any{"command": "true", "env": map[string]string{"A-B": "1"}}, -32602, "env"},
		{"arguments not an object", "execute_command", []int{1}, -32602, "object"},
		{"code too large", "execute_code", map[string]any{"code": strings.Repeat("#", 200<<10)}, -32600, "limit"},
		{"unknown session", "execute_code", map[string]any{"code": "1", "session_id": "nope"}, -32602, "session not found"},
		{"empty session", "execute_code", map[string]any{"code": "1", "session_id": ""}, -32602, "session_id"},
		{"stop without session", "stop_session", map[string]any{}, -32602, "session_id is required"},
		{"get_sessions unknown", "get_sessions", map[string]any{"session_id": "nope"}, -32602, "session not found"},
		{"get_volume_path extra", "get_volume_path", map[string]any{"path": "/"}, -32602, "path"},
		{"unknown tool", "nope", map[string]any{}, -32602, "unknown tool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, rerr := f.call("p", tc.tool, tc.args)
			wantCode(t, rerr, tc.code, tc.contains)
		})
	}
	// Nothing was created by any of them.
	if st, _ := f.e.List(context.Background(), nil); len(st) != 0 {
		t.Fatalf("containers left: %v", st)
	}
}

func TestSessionCapAndFlavor(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.MaxSessions = 2 })
	// Under gVisor there is no cgroup file inside: the flavor's memory is
	// each program's address-space limit.
	a := f.exec("p", "execute_command", map[string]any{"command": "nproc; cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max 2>/dev/null || echo $(( $(ulimit -v) * 1024 ))", "flavor": "medium"})
	if a.Flavor != "medium" || !strings.Contains(a.Stdout, "2147483648") {
		t.Fatalf("medium flavor: %+v", a)
	}
	f.exec("p", "execute_command", map[string]any{"command": "true"})
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "true"})
	wantCode(t, rerr, -32600, "MCP_SERVER_SANDBOX_MAX_SESSIONS")
	// The cap is per project.
	f.exec("q", "execute_command", map[string]any{"command": "true"})
	// A session's flavor cannot change.
	_, rerr = f.call("p", "execute_command", map[string]any{"command": "true", "session_id": a.SessionID, "flavor": "large"})
	wantCode(t, rerr, -32602, "flavor")
	// Stopping one makes room.
	if _, rerr := f.call("p", "stop_session", map[string]any{"session_id": a.SessionID}); rerr != nil {
		t.Fatal(rerr)
	}
	f.exec("p", "execute_command", map[string]any{"command": "true"})
}

func TestIdleExpiry(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) {
		o.SessionTimeout = 300 * time.Millisecond
		o.SweepInterval = 50 * time.Millisecond
	})
	r := f.exec("p", "execute_command", map[string]any{"command": "echo x > f"})
	deadline := time.Now().Add(30 * time.Second)
	for len(f.svc.Sessions("p")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("session did not expire")
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "true", "session_id": r.SessionID})
	wantCode(t, rerr, -32602, "session not found")
	if st, _ := f.e.List(context.Background(), map[string]string{engine.LabelKind: sandbox.KindSession}); len(st) != 0 {
		t.Fatalf("container left after expiry: %v", st)
	}
}

func TestConfigurationErrors(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.ImageNode = "switchboard-sandbox:does-not-exist" })
	_, rerr := f.call("p", "execute_code", map[string]any{"code": "1", "template": "node"})
	wantCode(t, rerr, -32603, "MCP_SERVER_SANDBOX_IMAGE_NODE")
	if !strings.Contains(rerr.Message, "switchboard sandbox build-image") {
		t.Fatalf("message does not name the command: %s", rerr.Message)
	}
	if vols, _ := f.e.ListVolumes(context.Background(), nil); len(vols) != 0 {
		t.Fatalf("volume left after a failed start: %v", vols)
	}

	e, err := engine.New(engine.Options{Host: "unix:///nonexistent/docker.sock", Instance: "test-nope"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	svc := sandbox.New(sandbox.Options{Engine: e, ImagePython: f.img, ImageNode: f.img})
	defer svc.Close(context.Background())
	_, err = svc.Tools("p").CallTool(context.Background(), switchboard.CallRequest{Tool: "execute_code", Arguments: json.RawMessage(`{"code":"1"}`)})
	var re *switchboard.RPCError
	if !errors.As(err, &re) || re.Code != -32603 || !strings.Contains(re.Message, "DOCKER_HOST") || strings.Contains(re.Message, "/nonexistent") {
		t.Fatalf("no engine: %v", err)
	}
	st := svc.Status(context.Background())
	if !strings.Contains(st.Engine, "DOCKER_HOST") {
		t.Fatalf("status: %+v", st)
	}
}

func TestOutputCapAndProgress(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.OutputLimit = 4096 })
	var mu sync.Mutex
	var chunks []string
	raw, rerr := f.callCtx(context.Background(), "p", "a", "execute_command", map[string]any{"command": "head -c 100000 /dev/zero | tr '\\0' x; echo é >&2"}, func(p json.RawMessage) {
		var n struct {
			Token   string `json:"progressToken"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(p, &n)
		mu.Lock()
		chunks = append(chunks, n.Message)
		mu.Unlock()
	})
	if rerr != nil {
		t.Fatal(rerr)
	}
	var r result
	_ = json.Unmarshal(raw, &r)
	if len(r.Stdout) != 4096 || !r.StdoutTruncated || r.StdoutBytes != 100000 || r.StderrTruncated || r.Stderr != "é\n" {
		t.Fatalf("caps: len %d %+v", len(r.Stdout), struct {
			T bool
			B int64
			E string
		}{r.StdoutTruncated, r.StdoutBytes, r.Stderr})
	}
	mu.Lock()
	defer mu.Unlock()
	if total := len(strings.Join(chunks, "")); total != 100000+len("é\n") {
		t.Fatalf("progress carried %d bytes", total)
	}
}

func TestStatus(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.ImageNode = "switchboard-sandbox:does-not-exist"; o.WarmPool = 1 })
	r := f.exec("p", "execute_command", map[string]any{"command": "true"})
	f.waitWarm("p", 1)
	st := f.svc.Status(context.Background())
	if st.Engine != "reachable" || st.Sessions != 1 || st.Warm != 1 || !strings.HasPrefix(st.Images["python"], "present") ||
		!strings.Contains(st.Images["node"], "MCP_SERVER_SANDBOX_IMAGE_NODE") || st.Runtime != cmp.Or(enginetest.TestRuntime(), "runc") {
		t.Fatalf("status: %+v", st)
	}
	// What each container runs under, as the engine says: the session's
	// in get_sessions, the session's and the warm one's in the status.
	cs, err := f.e.List(context.Background(), map[string]string{engine.LabelProject: "p", engine.LabelKind: sandbox.KindSession})
	if err != nil || len(cs) != 2 {
		t.Fatalf("containers: %+v, %v; want the session's and a warm one", cs, err)
	}
	for _, c := range cs {
		if c.Runtime == "" || c.Runtime != cs[0].Runtime {
			t.Fatalf("containers run under %q and %q", cs[0].Runtime, c.Runtime)
		}
	}
	raw, rerr := f.call("p", "get_sessions", map[string]any{})
	if rerr != nil {
		t.Fatal(rerr)
	}
	var gs struct {
		Sessions []switchboard.SandboxSession `json:"sessions"`
	}
	if err := json.Unmarshal(raw, &gs); err != nil || len(gs.Sessions) != 1 || gs.Sessions[0].SessionID != r.SessionID || gs.Sessions[0].Runtime != cs[0].Runtime {
		t.Fatalf("get_sessions: %s; want session %s under %s", raw, r.SessionID, cs[0].Runtime)
	}
	if want := map[string]int{cs[0].Runtime: 2}; !maps.Equal(want, st.SessionRuntimes) {
		t.Errorf("status session_runtimes %v, want %v", st.SessionRuntimes, want)
	}
}
