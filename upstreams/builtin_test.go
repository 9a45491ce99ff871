package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// fakeBuiltin is a working in-process server: "echo" (which collides with
// the fixture's), "whoami" (returns the request it got), "fail" (a
// JSON-RPC error) and "broken" (a plain error).
type fakeBuiltin struct {
	tools []json.RawMessage
	mu    sync.Mutex
	got   []switchboard.CallRequest
}

func newFakeBuiltin() *fakeBuiltin {
	return &fakeBuiltin{tools: []json.RawMessage{
		json.RawMessage(`{"name":"echo","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"whoami","inputSchema":{"type":"object"},"x-big":9007199254740993}`),
		json.RawMessage(`{"name":"fail","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"broken","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"inputSchema":{"type":"object"}}`), // no name: skipped
	}}
}

func (b *fakeBuiltin) Tools() []json.RawMessage { return b.tools }

func (b *fakeBuiltin) CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	b.mu.Lock()
	b.got = append(b.got, req)
	b.mu.Unlock()
	switch req.Tool {
	case "fail":
		return nil, &switchboard.RPCError{Code: -32001, Message: "sandbox says no", Data: json.RawMessage(`{"why":"quota"}`)}
	case "broken":
		return nil, errors.New("docker: /var/lib/secret path exploded")
	}
	if req.OnProgress != nil {
		req.OnProgress(json.RawMessage(`{"progressToken":"client-tok","progress":1}`))
	}
	text, _ := json.Marshal(req.Project + "/" + req.Session + "/" + req.Tool + "/" + string(req.Arguments))
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`), nil
}

func TestBuiltinRankedAfterConfiguredServers(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("fix"))
	b := newFakeBuiltin()
	changes := h.toolChangesNow()
	h.m.SetBuiltin("sandbox", b)
	h.waitFor("list_changed after SetBuiltin", func() bool { return h.toolChangesNow() > changes })

	cat := h.tools()
	if tool, _ := cat.Lookup("echo"); tool.Server != "fix" {
		t.Fatalf("echo owned by %q, want the configured server", tool.Server)
	}
	who, ok := cat.Lookup("whoami")
	if !ok || who.Server != "sandbox" || string(who.Raw) != string(b.tools[1]) {
		t.Fatalf("whoami = %+v, want the builtin's raw object", who)
	}
	// Builtins come after every configured server's tools.
	last := cat.Tools[len(cat.Tools)-3:]
	if names := []string{last[0].Name, last[1].Name, last[2].Name}; !slices.Equal(names, []string{"whoami", "fail", "broken"}) {
		t.Fatalf("last tools %v, want the builtin's", names)
	}
	st := h.status("sandbox")
	if st.State != switchboard.StateReady || st.Transport != switchboard.TransportBuiltin || st.Tools != 4 || !slices.Equal(st.Shadowed, []string{"echo"}) {
		t.Fatalf("builtin status = %+v", st)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var progress []string
	res, err := h.m.Call(ctx, switchboard.CallRequest{Project: "p1", Session: "sess-1", Tool: "whoami",
		Arguments: json.RawMessage(`{"a":1}`), Meta: json.RawMessage(`{"progressToken":"client-tok"}`),
		OnProgress: func(p json.RawMessage) { progress = append(progress, string(p)) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); got != `p1/sess-1/whoami/{"a":1}` {
		t.Fatalf("builtin saw %q", got)
	}
	if len(progress) != 1 {
		t.Fatalf("progress = %v", progress)
	}

	_, err = h.m.Call(ctx, switchboard.CallRequest{Tool: "fail"})
	var rpc *switchboard.RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32001 || string(rpc.Data) != `{"why":"quota"}` {
		t.Fatalf("fail: err = %v, want the builtin's RPCError unchanged", err)
	}
	_, err = h.m.Call(ctx, switchboard.CallRequest{Tool: "broken"})
	if !errors.Is(err, switchboard.ErrUnavailable) || switchboard.Message(err) != `server "sandbox": internal error` {
		t.Fatalf("broken: err = %v (%q), want ErrUnavailable without the cause", err, switchboard.Message(err))
	}

	// Request and Connect work on builtins too.
	if err := h.m.Connect(ctx, "sandbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.Request(ctx, "sandbox", "ping", nil); err != nil {
		t.Fatal(err)
	}
	if res, err := h.m.Request(ctx, "sandbox", "tools/call", json.RawMessage(`{"name":"whoami","arguments":{}}`)); err != nil || resultText(t, res) != "//whoami/{}" {
		t.Fatalf("Request tools/call = %s, %v", res, err)
	}

	changes = h.toolChangesNow()
	h.m.SetBuiltin("sandbox", nil)
	h.waitFor("list_changed after removing the builtin", func() bool { return h.toolChangesNow() > changes })
	if _, ok := h.m.Catalog().Lookup("whoami"); ok {
		t.Fatal("whoami still listed after SetBuiltin(nil)")
	}
	for _, s := range h.m.Status() {
		if s.Name == "sandbox" {
			t.Fatalf("removed builtin still in status: %+v", s)
		}
	}
}

func TestBuiltinHiddenByConfiguredServerOfSameName(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(stdioSpec("sandbox"))
	h.m.SetBuiltin("sandbox", newFakeBuiltin())
	cat := h.tools()
	if _, ok := cat.Lookup("whoami"); ok {
		t.Fatal("a builtin hidden by a configured server of the same name still offers tools")
	}
	if got := h.text("echo", `{"text":"x"}`); got != "x" {
		t.Fatalf("echo = %q, want the configured server's", got)
	}
	var builtin switchboard.ServerStatus
	for _, s := range h.m.Status() {
		if s.Transport == switchboard.TransportBuiltin {
			builtin = s
		}
	}
	if builtin.LastError == "" || len(builtin.Shadowed) != 4 {
		t.Fatalf("hidden builtin's status = %+v", builtin)
	}
}

func (h *harness) toolChangesNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.toolChanges
}
