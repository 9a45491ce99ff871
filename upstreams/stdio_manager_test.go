package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// TestLazyConnect: Apply starts nothing; Tools connects and lists every
// tool exactly as the fixture sends it.
func TestLazyConnect(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))

	if got := h.status("fx").State; got != switchboard.StateIdle {
		t.Fatalf("state after Apply = %q, want idle", got)
	}
	if ev := h.eventsSnapshot(); len(ev) != 0 {
		t.Fatalf("state changes after Apply, want none: %v", ev)
	}
	if n := len(h.m.Catalog().Tools); n != 0 {
		t.Fatalf("catalog after Apply has %d tools, want 0", n)
	}

	cat := h.tools()
	st := h.status("fx")
	if st.State != switchboard.StateReady {
		t.Fatalf("state after Tools = %q (%s), want ready", st.State, st.LastError)
	}
	// OnState is asynchronous: wait for the report of the state we see.
	h.waitFor("ready reported", func() bool { return h.sawSince(0, "fx", switchboard.StateReady) })
	if got := h.statesOf("fx"); !cmp.Equal(got, []switchboard.ServerState{switchboard.StateConnecting, switchboard.StateReady}) {
		t.Errorf("state changes = %v, want [connecting ready]", got)
	}

	want := startRawFixture(t, "fx").tools()
	if len(want) == 0 {
		t.Fatal("fixture lists no tools")
	}
	var wantTools []switchboard.Tool
	for _, rt := range want {
		wantTools = append(wantTools, switchboard.Tool{Name: rt.name, Server: "fx", UpstreamName: rt.name, Raw: rt.raw})
	}
	if diff := cmp.Diff(wantTools, cat.Tools, rawJSONAsString); diff != "" {
		t.Errorf("catalog differs from the fixture's own tools/list (-fixture +catalog):\n%s", diff)
	}
	if st.Tools != len(want) {
		t.Errorf("status tools = %d, want %d", st.Tools, len(want))
	}

	exotic, ok := cat.Lookup("exotic")
	if !ok {
		t.Fatal("exotic not in catalog")
	}
	if !bytes.Contains(exotic.Raw, mcptest.ExoticSchema) {
		t.Errorf("exotic raw does not contain ExoticSchema byte for byte:\n%s", exotic.Raw)
	}
	if !bytes.Contains(exotic.Raw, []byte(`"big":`+mcptest.BigInt)) {
		t.Errorf("exotic raw lost the big integer %s:\n%s", mcptest.BigInt, exotic.Raw)
	}
	if v := cat.Version; v == 0 {
		t.Errorf("catalog version = 0 after tools were listed")
	}
	h.mu.Lock()
	changes := h.toolChanges
	h.mu.Unlock()
	if changes != 1 {
		t.Errorf("OnToolsChanged fired %d times for one connect, want 1", changes)
	}
}

// rawJSONAsString compares json.RawMessage values byte for byte and prints
// them readably.
var rawJSONAsString = cmp.Transformer("raw", func(r json.RawMessage) string { return string(r) })

// TestSharedConnection: concurrent calls share one connection (and the
// first ones share one connect).
func TestSharedConnection(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))

	const n = 20
	pids := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := h.call("pid", "{}")
			if err != nil {
				errs[i] = err
				return
			}
			pids[i], errs[i] = strconv.Atoi(resultTextNoFatal(res))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i, p := range pids {
		if p != pids[0] {
			t.Fatalf("call %d saw pid %d, call 0 saw %d; want one shared process", i, p, pids[0])
		}
	}
	h.waitFor("ready reported", func() bool { return h.sawSince(0, "fx", switchboard.StateReady) })
	if got := h.statesOf("fx"); !cmp.Equal(got, []switchboard.ServerState{switchboard.StateConnecting, switchboard.StateReady}) {
		t.Errorf("state changes = %v, want a single connect", got)
	}
}

func resultTextNoFatal(res json.RawMessage) string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(res, &r) != nil || len(r.Content) != 1 {
		return string(res)
	}
	return r.Content[0].Text
}

// TestCallResults: results, JSON-RPC errors and tool errors travel raw.
func TestCallResults(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))

	t.Run("exotic result is byte for byte", func(t *testing.T) {
		res, err := h.call("exotic", `{"id":"a"}`)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(res), mcptest.BigInt); n != 2 {
			t.Errorf("result holds %s %d times, want 2 (structuredContent and _meta):\n%s", mcptest.BigInt, n, res)
		}
		want := startRawFixture(t, "fx").request("tools/call", `{"name":"exotic","arguments":{"id":"a"}}`)
		if diff := cmp.Diff(string(want), string(res)); diff != "" {
			t.Errorf("result differs from the fixture's own (-fixture +gateway):\n%s", diff)
		}
	})

	t.Run("JSON-RPC error is an RPCError unchanged", func(t *testing.T) {
		_, err := h.call("rpc_error", "{}")
		var rpc *switchboard.RPCError
		if !errors.As(err, &rpc) {
			t.Fatalf("err = %v (%T), want *switchboard.RPCError", err, err)
		}
		want := &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: "bad argument x", Data: json.RawMessage(`{"field":"x"}`)}
		if diff := cmp.Diff(want, rpc, rawJSONAsString); diff != "" {
			t.Errorf("RPCError (-want +got):\n%s", diff)
		}
	})

	t.Run("tool error is a result", func(t *testing.T) {
		res, err := h.call("tool_error", "{}")
		if err != nil {
			t.Fatalf("err = %v, want a result with isError", err)
		}
		var r struct {
			IsError bool `json:"isError"`
		}
		if err := json.Unmarshal(res, &r); err != nil || !r.IsError {
			t.Errorf("result %s: want isError true", res)
		}
	})

	t.Run("unknown tool is ErrNotFound", func(t *testing.T) {
		_, err := h.call("no_such_tool", "{}")
		if !errors.Is(err, switchboard.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})

	t.Run("malformed meta is ErrInvalid", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		_, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`), Meta: json.RawMessage(`[1]`)})
		if !errors.Is(err, switchboard.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	})

	t.Run("caller cancellation is ErrCanceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		started := make(chan struct{})
		var once sync.Once
		errc := make(chan error, 1)
		go func() {
			_, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "slow", Arguments: json.RawMessage(`{"ms":60000}`), Meta: json.RawMessage(`{"progressToken":"c"}`), OnProgress: func(json.RawMessage) { once.Do(func() { close(started) }) }})
			errc <- err
		}()
		select {
		case <-started:
		case <-time.After(waitTimeout):
			t.Fatal("slow never reported that it started")
		}
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, switchboard.ErrCanceled) {
				t.Fatalf("err = %v, want ErrCanceled", err)
			}
		case <-time.After(waitTimeout):
			t.Fatal("cancelled call did not return")
		}
	})
}

// TestCallTimeout: a per-server CallTimeout ends a slow call with
// ErrTimeout, forwards the cancellation and keeps the upstream.
func TestCallTimeout(t *testing.T) {
	h := newHarness(t, testOptions())
	spec := stdioSpec("fx")
	spec.CallTimeout = 500 * time.Millisecond
	h.apply(spec)

	pid := h.pid("pid")
	started := make(chan struct{}, 1)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	begin := time.Now()
	_, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "slow", Arguments: json.RawMessage(`{"ms":60000}`), Meta: json.RawMessage(`{"progressToken":1}`), OnProgress: func(json.RawMessage) {
		select {
		case started <- struct{}{}:
		default:
		}
	}})
	if !errors.Is(err, switchboard.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("timed-out call took %s; the per-server 500ms timeout did not apply", d)
	}
	select {
	case <-started:
	default:
		t.Fatal("slow handler never started, so the cancellation test is meaningless")
	}
	if got := h.pid("pid"); got != pid {
		t.Errorf("pid after timeout = %d, want %d (upstream must not be restarted)", got, pid)
	}
	if got := h.text("cancelled_count", `{"atLeast":1}`); got != "1" {
		t.Errorf("cancelled_count = %s, want 1 (cancellation forwarded)", got)
	}
	if st := h.status("fx"); st.State != switchboard.StateReady {
		t.Errorf("state after timeout = %q, want ready", st.State)
	}
}

// TestCrash: a crashed child fails the call in flight, shows as failed
// with its exit status, keeps its tools and restarts on next use. A few
// rounds, because noticing the exit races with reaping the child.
func TestCrash(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))
	pid := h.pid("pid")
	before := h.m.Catalog()

	for round := range 5 {
		_, err := h.call("crash", "{}")
		if !errors.Is(err, switchboard.ErrUnavailable) {
			t.Fatalf("round %d: crash: err = %v, want ErrUnavailable", round, err)
		}
		st := h.waitState("fx", switchboard.StateFailed)
		if !strings.Contains(st.LastError, "exit status 3") {
			t.Errorf("round %d: LastError = %q, want it to mention the exit (exit status 3)", round, st.LastError)
		}
		if !processGone(pid) {
			t.Errorf("round %d: crashed child %d still exists", round, pid)
		}
		after := h.m.Catalog()
		if diff := cmp.Diff(before.Tools, after.Tools, rawJSONAsString); diff != "" {
			t.Errorf("round %d: catalog changed after crash (-before +after):\n%s", round, diff)
		}
		if after.Version != before.Version {
			t.Errorf("round %d: catalog version changed from %d to %d", round, before.Version, after.Version)
		}

		np := h.pid("pid")
		if np == pid {
			t.Fatalf("round %d: pid after restart = %d, same as the crashed one", round, np)
		}
		pid = np
		if st := h.status("fx"); st.State != switchboard.StateReady || st.LastError != "" {
			t.Errorf("round %d: status after restart = %+v, want ready without error", round, st)
		}
	}
}

// TestCleanEnvironment: a child sees PATH and its spec's env, never the
// gateway's other variables.
func TestCleanEnvironment(t *testing.T) {
	t.Setenv("SWITCHBOARD_SECRET_TEST", "x")
	h := newHarness(t, testOptions())
	spec := stdioSpec("fx")
	spec.Env["SPEC_VAR"] = "from spec"
	h.apply(spec)

	env := strings.Split(h.text("env", "{}"), "\n")
	for _, kv := range env {
		if strings.HasPrefix(kv, "SWITCHBOARD_SECRET_TEST=") {
			t.Errorf("child inherited the gateway's secret: %q", kv)
		}
	}
	for _, want := range []string{"SPEC_VAR=from spec", "SWITCHBOARD_FIXTURE=stdio", "SWITCHBOARD_FIXTURE_NAME=fx", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(env, want) {
			t.Errorf("child env lacks %q; got %q", want, env)
		}
	}
}

// TestBreaker: connect failures open the circuit breaker.
func TestBreaker(t *testing.T) {
	t.Run("open breaker stops spawning", func(t *testing.T) {
		counter := filepath.Join(t.TempDir(), "count")
		spec := shellScript(t, "bad", `echo run >> "$COUNTER"; exit 1`+"\n", map[string]string{"COUNTER": counter})
		h := newHarness(t, testOptions())
		h.apply(spec)

		h.tools() // first round waits for the connect
		if st := h.waitSettled("bad"); st.State != switchboard.StateFailed {
			t.Fatalf("after 1 failure: state %q, want failed", st.State)
		}
		for round := 2; round <= 3; round++ {
			h.tools() // retried in the background
			h.waitSettled("bad")
			if got := lines(t, counter); got != round {
				t.Fatalf("after round %d the script ran %d times", round, got)
			}
		}
		st := h.status("bad")
		if st.State != switchboard.StateUnavailable {
			t.Fatalf("after 3 failures: state %q, want unavailable", st.State)
		}
		if st.LastError == "" {
			t.Error("unavailable server has no LastError")
		}

		h.tools()
		h.waitSettled("bad")
		if got := lines(t, counter); got != 3 {
			t.Fatalf("open breaker: the script ran again (%d runs)", got)
		}
		if st := h.status("bad"); st.State != switchboard.StateUnavailable {
			t.Errorf("state = %q, want unavailable", st.State)
		}
		_, err := h.call("echo", "{}")
		if !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("call of a never-listed tool: err = %v, want ErrNotFound", err)
		}
		h.waitSettled("bad")
		if got := lines(t, counter); got != 3 {
			t.Fatalf("open breaker: the script ran again (%d runs)", got)
		}
	})

	t.Run("half-open breaker lets a recovered server in", func(t *testing.T) {
		dir := t.TempDir()
		counter, flag := filepath.Join(dir, "count"), filepath.Join(dir, "flag")
		spec := shellScript(t, "flaky", `if [ -e "$FLAG" ]; then exec "$BIN"; fi
echo run >> "$COUNTER"
exit 1
`, map[string]string{
			"COUNTER": counter, "FLAG": flag, "BIN": fixtureBin,
			mcptest.EnvFixture: "stdio", mcptest.EnvFixtureName: "flaky",
		})
		opts := testOptions()
		opts.BreakerCooldown = time.Nanosecond
		h := newHarness(t, opts)
		h.apply(spec)

		for round := 1; round <= 3; round++ {
			h.tools()
			h.waitSettled("flaky")
			if got := lines(t, counter); got != round {
				t.Fatalf("after round %d the script ran %d times", round, got)
			}
		}
		if _, ok := h.m.Catalog().Lookup("echo"); ok {
			t.Fatal("failing server contributed tools")
		}
		if err := os.WriteFile(flag, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		h.tools()
		h.waitState("flaky", switchboard.StateReady)
		tool, ok := h.tools().Lookup("echo")
		if !ok || tool.Server != "flaky" {
			t.Fatalf("echo after recovery = %+v, %v; want it from flaky", tool, ok)
		}
		if got := h.text("echo", `{"text":"back"}`); got != "back" {
			t.Errorf("echo = %q", got)
		}
		if got := lines(t, counter); got != 3 {
			t.Errorf("script ran %d times, want 3", got)
		}
	})
}

// TestCollisions: the first configured server owns a name; later ones are
// shadowed; a prefix avoids the collision.
func TestCollisions(t *testing.T) {
	h := newHarness(t, testOptions())
	c := stdioSpec("c")
	c.ToolPrefix = "c_"
	h.apply(stdioSpec("a"), stdioSpec("b"), c)

	cat := h.tools()
	fixture := startRawFixture(t, "a").tools()
	var names, prefixed []string
	for _, rt := range fixture {
		names = append(names, rt.name)
		prefixed = append(prefixed, "c_"+rt.name)
	}

	var got []string
	for _, tl := range cat.Tools {
		got = append(got, tl.Name)
	}
	if diff := cmp.Diff(append(slices.Clone(names), prefixed...), got); diff != "" {
		t.Errorf("catalog names (-want +got):\n%s", diff)
	}
	for _, n := range names {
		if tl, _ := cat.Lookup(n); tl.Server != "a" {
			t.Errorf("%s owned by %q, want a", n, tl.Server)
		}
	}
	if diff := cmp.Diff(names, h.status("b").Shadowed); diff != "" {
		t.Errorf("b shadowed (-want +got):\n%s", diff)
	}
	if sh := h.status("a").Shadowed; len(sh) != 0 {
		t.Errorf("a shadowed = %v, want none", sh)
	}
	if sh := h.status("c").Shadowed; len(sh) != 0 {
		t.Errorf("c shadowed = %v, want none", sh)
	}

	// Prefixed tools: renamed, everything else unchanged.
	for _, rt := range fixture {
		tl, ok := cat.Lookup("c_" + rt.name)
		if !ok {
			continue // reported above
		}
		if tl.Server != "c" || tl.UpstreamName != rt.name {
			t.Errorf("c_%s = server %q upstream name %q", rt.name, tl.Server, tl.UpstreamName)
		}
		var want, have map[string]json.RawMessage
		if err := json.Unmarshal(rt.raw, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(tl.Raw, &have); err != nil {
			t.Fatalf("c_%s raw %s: %v", rt.name, tl.Raw, err)
		}
		want["name"] = json.RawMessage(strconv.Quote("c_" + rt.name))
		if diff := cmp.Diff(want, have, rawJSONAsString); diff != "" {
			t.Errorf("c_%s raw (-want +got):\n%s", rt.name, diff)
		}
	}
	if ex, _ := cat.Lookup("c_exotic"); !bytes.Contains(ex.Raw, mcptest.ExoticSchema) {
		t.Errorf("c_exotic lost its raw schema: %s", ex.Raw)
	}

	pa, pc := h.pid("pid"), h.pid("c_pid")
	if pa == pc {
		t.Errorf("pid and c_pid both answered by process %d; c_pid must reach c", pa)
	}
	if got := h.text("c_echo", `{"text":"via c"}`); got != "via c" {
		t.Errorf("c_echo = %q", got)
	}
}

// TestListChanged: an upstream's list_changed re-lists its tools.
func TestListChanged(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))
	h.tools()
	v0 := h.m.Catalog().Version

	if got := h.text("add_tool", `{"name":"newtool"}`); got != "added" {
		t.Fatalf("add_tool = %q", got)
	}
	h.waitFor("newtool in the catalog", func() bool {
		_, ok := h.m.Catalog().Lookup("newtool")
		return ok
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if tl, ok := h.m.Lookup(ctx, "newtool"); !ok || tl.Server != "fx" {
		t.Fatalf("Lookup(newtool) = %+v, %v", tl, ok)
	}
	if v := h.m.Catalog().Version; v <= v0 {
		t.Errorf("catalog version %d did not grow from %d", v, v0)
	}
	if got := h.text("newtool", `{"text":"hi"}`); got != "hi" {
		t.Errorf("newtool = %q", got)
	}

	if got := h.text("remove_tool", `{"name":"newtool"}`); got != "removed" {
		t.Fatalf("remove_tool = %q", got)
	}
	h.waitFor("newtool gone from the catalog", func() bool {
		_, ok := h.m.Catalog().Lookup("newtool")
		return !ok
	})
	if _, ok := h.m.Lookup(ctx, "newtool"); ok {
		t.Error("Lookup still finds newtool")
	}
	if _, err := h.call("newtool", `{"text":"hi"}`); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("calling a removed tool: err = %v, want ErrNotFound", err)
	}
}

// TestProgress: progress notifications reach the caller with its own token.
func TestProgress(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fx"))
	h.tools()

	type note struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      float64         `json:"progress"`
		Total         float64         `json:"total"`
	}
	run := func(token string) ([]note, error) {
		var mu sync.Mutex
		var got []note
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		res, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "progress", Arguments: json.RawMessage(`{"steps":3}`), Meta: json.RawMessage(`{"progressToken":` + token + `}`), OnProgress: func(p json.RawMessage) {
			var n note
			if err := json.Unmarshal(p, &n); err != nil {
				t.Errorf("progress params %s: %v", p, err)
			}
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		}})
		if err != nil {
			return nil, err
		}
		if txt := resultTextNoFatal(res); txt != "done" {
			t.Errorf("progress result = %s", res)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got), nil
	}
	want := func(token string) []note {
		return []note{
			{json.RawMessage(token), 1, 3},
			{json.RawMessage(token), 2, 3},
			{json.RawMessage(token), 3, 3},
		}
	}

	got, err := run(`"tok-1"`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want(`"tok-1"`), got, rawJSONAsString); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}

	// Two clients using the same token on the shared upstream each get
	// exactly their own notifications; numeric tokens stay numeric.
	var wg sync.WaitGroup
	results := make([][]note, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = run(`7`) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("concurrent progress call %d: %v", i, errs[i])
		}
		if diff := cmp.Diff(want(`7`), results[i], rawJSONAsString); diff != "" {
			t.Errorf("concurrent progress call %d (-want +got):\n%s", i, diff)
		}
	}
}

// TestInvalidSpec: a spec that could not be built is listed but never
// started.
func TestInvalidSpec(t *testing.T) {
	h := newHarness(t, testOptions())
	bad := stdioSpec("bad")
	bad.Err = switchboard.Errorf(switchboard.ErrConfig, "env var FOO is not set")
	h.apply(bad, stdioSpec("good"))

	st := h.status("bad")
	if st.State != switchboard.StateInvalid || st.LastError != "env var FOO is not set" {
		t.Errorf("status = %+v, want invalid with the spec's error", st)
	}
	cat := h.tools()
	if tl, ok := cat.Lookup("echo"); !ok || tl.Server != "good" {
		t.Errorf("echo = %+v, %v; want it from good", tl, ok)
	}
	if st := h.status("bad"); st.State != switchboard.StateInvalid {
		t.Errorf("invalid server changed state to %q", st.State)
	}
}

// TestStderrTail: what a child writes to stderr shows in status, the last
// part of it when there is more than the ring holds.
func TestStderrTail(t *testing.T) {
	t.Run("running child", func(t *testing.T) {
		spec := shellScript(t, "chatty", `echo "chatty: starting up" >&2
exec "$BIN"
`, map[string]string{"BIN": fixtureBin, mcptest.EnvFixture: "stdio"})
		h := newHarness(t, testOptions())
		h.apply(spec)
		h.tools()
		h.waitState("chatty", switchboard.StateReady)
		// The child's stderr is copied by a goroutine of its own, which no
		// event reports on.
		pollUntil(t, "stderr in status", func() bool {
			return strings.Contains(h.status("chatty").Stderr, "chatty: starting up\n")
		})
	})

	t.Run("failed child, tail only", func(t *testing.T) {
		spec := shellScript(t, "dying", `i=0
while [ $i -lt 500 ]; do echo "filler line $i: the quick brown fox jumps over the lazy dog" >&2; i=$((i+1)); done
echo "fatal: last words" >&2
exit 1
`, nil)
		h := newHarness(t, testOptions())
		h.apply(spec)
		h.tools()
		st := h.waitSettled("dying")
		if st.State != switchboard.StateFailed {
			t.Fatalf("state = %q, want failed", st.State)
		}
		// The child was reaped before the failure was recorded, and
		// reaping waits for its stderr: the tail is complete.
		if !strings.HasSuffix(st.Stderr, "fatal: last words\n") {
			t.Errorf("stderr tail does not end with the last line:\n...%s", st.Stderr[max(0, len(st.Stderr)-200):])
		}
		if strings.Contains(st.Stderr, "filler line 0:") {
			t.Error("stderr holds the first line of about 30 KiB; want only the tail")
		}
		if n := len(st.Stderr); n == 0 || n > 16<<10 {
			t.Errorf("stderr tail is %d bytes, want 1..%d", n, 16<<10)
		}
	})
}

// TestCollisionLoggedOnce: a collision is logged when it appears, not at
// every re-apply (each store sync re-applies the same servers).
func TestCollisionLoggedOnce(t *testing.T) {
	h := newHarness(t, testOptions())
	a, b := stdioSpec("a"), stdioSpec("b")
	h.apply(a, b)
	h.tools()
	count := func() int { return strings.Count(h.logs.String(), "tool name collision") }
	first := count()
	if first == 0 {
		t.Fatal("the collision was never logged")
	}
	for range 3 {
		h.apply(a, b)
	}
	if got := count(); got != first {
		t.Errorf("collision lines grew from %d to %d on unchanged re-applies", first, got)
	}
}
