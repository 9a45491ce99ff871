package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

func TestMain(m *testing.M) {
	mcptest.RunIfChild()
	runHostileChild()
	code := pgtest.Run(m)
	removeFeatureFixtures()
	os.Exit(code)
}

// gateway is a running `run` on port 0 with a servers file.
type gateway struct {
	url     string
	file    string
	dataDir string
	reload  chan os.Signal
	logs    *testenv.Buffer
	stopped bool
	cancel  context.CancelFunc
	done    chan error
}

// stop shuts the gateway down the way SIGTERM does and checks that run
// returned nil. It is idempotent.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if g.stopped {
		return
	}
	g.stopped = true
	g.cancel()
	select {
	case err := <-g.done:
		if err != nil {
			t.Errorf("run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("gateway did not stop within 30s")
	}
}

// stdioServer is a servers-file entry running the fixture as a child.
func stdioServer(name string, extra ...string) map[string]any {
	env := map[string]string{"SWITCHBOARD_FIXTURE": "stdio", "SWITCHBOARD_FIXTURE_NAME": name}
	s := map[string]any{"command": os.Args[0], "env": env}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i]] = extra[i+1]
	}
	return s
}

func writeServers(t *testing.T, path string, servers [][2]any) {
	t.Helper()
	// Written by hand to keep the order of servers (first wins).
	var b strings.Builder
	b.WriteString(`{"mcpServers": {`)
	for i, s := range servers {
		if i > 0 {
			b.WriteString(",")
		}
		v, _ := json.Marshal(s[1])
		fmt.Fprintf(&b, "%q: %s", s[0], v)
	}
	b.WriteString("}}")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func startGateway(t *testing.T, servers [][2]any, env map[string]string) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{file: filepath.Join(dir, "servers.json"), dataDir: dir, reload: make(chan os.Signal), logs: &testenv.Buffer{}}
	writeServers(t, g.file, servers)
	vars := map[string]string{"MCP_SERVER_PORT": "0", "MCP_SERVER_CONFIG": g.file, "MCP_SERVER_DATA_DIR": dir,
		"MCP_SERVER_LOG_LEVEL": "debug", "MCP_SERVER_SHUTDOWN_TIMEOUT": "10s", "MCP_SERVER_LIST_CHANGED_DEBOUNCE": "1ms",
		// Tests list what they configured: a first list waits for every
		// server (TestSlowServerDoesNotHoldTheFirstList sets its own).
		"MCP_SERVER_LIST_WAIT": "60s",
		"MCP_SERVER_SANDBOX":   "false"} // sandbox_test.go turns it on
	for k, v := range env {
		vars[k] = v
	}
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	opts := runOptions{Reload: g.reload, Listening: func(a string) { addr <- a }}
	done := make(chan error, 1)
	go func() {
		done <- runWith(ctx, opts, nil, func(k string) string { return vars[k] }, io.Discard, g.logs)
	}()
	select {
	case a := <-addr:
		g.url = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("gateway did not start: %v\n%s", err, g.logs.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("gateway did not start in 30s\n%s", g.logs.String())
	}
	g.cancel, g.done = cancel, done
	t.Cleanup(func() {
		g.stop(t)
		if t.Failed() {
			t.Logf("gateway log:\n%s", g.logs.String())
		}
	})
	return g
}

// applyReload sends a reload and waits until run has applied it: the
// second send is only received once the first reload is done.
func (g *gateway) applyReload(t *testing.T, servers [][2]any) {
	t.Helper()
	writeServers(t, g.file, servers)
	g.reload <- os.Interrupt
	g.reload <- os.Interrupt
}

// rawClient speaks JSON-RPC over plain HTTP, the way curl would.
type rawClient struct {
	t       *testing.T
	url     string
	session string
	header  http.Header
	nextID  int
}

type rpcReply struct {
	Status int
	Header http.Header
	Body   []byte // the final JSON-RPC message (SSE unwrapped)
	Events [][]byte
	msg    struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
}

func (r *rpcReply) code() int {
	if r.msg.Error == nil {
		return 0
	}
	return r.msg.Error.Code
}

func newRaw(t *testing.T, url string) *rawClient {
	return &rawClient{t: t, url: url, header: http.Header{}}
}

// post sends body as is and decodes the reply (JSON or SSE).
func (c *rawClient) post(body string) *rpcReply {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	rep := &rpcReply{Status: resp.StatusCode, Header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
				rep.Events = append(rep.Events, []byte(d))
				rep.Body = []byte(d)
			}
		}
	} else {
		rep.Body = bytes.TrimSpace(raw)
	}
	_ = json.Unmarshal(rep.Body, &rep.msg)
	return rep
}

func (c *rawClient) call(method string, params any) *rpcReply {
	c.t.Helper()
	c.nextID++
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.nextID, "method": method, "params": params})
	return c.post(string(b))
}

func (c *rawClient) initialize() {
	c.t.Helper()
	rep := c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	if rep.Status != 200 || rep.msg.Result == nil {
		c.t.Fatalf("initialize: %d %s", rep.Status, rep.Body)
	}
	c.session = rep.Header.Get("Mcp-Session-Id")
	if c.session == "" {
		c.t.Fatalf("initialize returned no session id")
	}
	if n := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.Status != http.StatusAccepted {
		c.t.Fatalf("initialized: %d", n.Status)
	}
}

func (c *rawClient) toolText(name string, args any) string {
	c.t.Helper()
	rep := c.call("tools/call", map[string]any{"name": name, "arguments": args})
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(rep.msg.Result, &res); err != nil || len(res.Content) == 0 {
		c.t.Fatalf("tools/call %s: %s", name, rep.Body)
	}
	return res.Content[0].Text
}

// toolObjects returns tools/list's tools as raw objects keyed by name.
func toolObjects(t *testing.T, rep *rpcReply) (names []string, byName map[string]string) {
	t.Helper()
	var res struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(rep.msg.Result, &res); err != nil {
		t.Fatalf("tools/list: %v: %s", err, rep.Body)
	}
	byName = map[string]string{}
	for _, raw := range res.Tools {
		var n struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &n)
		names = append(names, n.Name)
		byName[n.Name] = string(raw)
	}
	return names, byName
}

// direct is a raw session with the fixture itself over streamable HTTP:
// the reference for "unchanged".
func direct(t *testing.T) *rawClient {
	ts := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "direct"}))
	t.Cleanup(ts.Close)
	c := newRaw(t, ts.URL)
	c.initialize()
	return c
}

// upstreamsUnderTest are the three transports, each as one servers
// entry, and streamable HTTP once more in 2026-07-28 (stateless).
func upstreamsUnderTest(t *testing.T) map[string]map[string]any {
	sse := httptest.NewServer(mcptest.SSEHandler(mcptest.Options{Name: "sse"}))
	st := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "st"}))
	st26 := httptest.NewServer(mcptest.StatelessHandler(mcptest.Options{Name: "st26"}))
	t.Cleanup(sse.Close)
	t.Cleanup(st.Close)
	t.Cleanup(st26.Close)
	return map[string]map[string]any{
		"stdio":                      stdioServer("stdio"),
		"sse":                        {"url": sse.URL, "transport": "sse"},
		"streamable-http":            {"url": st.URL, "transport": "streamable-http"},
		"streamable-http 2026-07-28": {"url": st26.URL, "transport": "streamable-http"},
	}
}

func TestToolsAndResultsUnchanged(t *testing.T) {
	ref := direct(t)
	refNames, refTools := toolObjects(t, ref.call("tools/list", nil))
	refExotic := ref.call("tools/call", map[string]any{"name": "exotic", "arguments": map[string]any{"kind": "a", "a": "x1"}})
	if refExotic.msg.Result == nil {
		t.Fatalf("direct exotic: %s", refExotic.Body)
	}
	for name, spec := range upstreamsUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, [][2]any{{"up", spec}}, nil)
			c := newRaw(t, g.url+"/mcp")
			c.initialize()
			names, tools := toolObjects(t, c.call("tools/list", nil))
			if strings.Join(names, ",") != strings.Join(refNames, ",") {
				t.Errorf("tool names differ:\n gateway %v\n direct  %v", names, refNames)
			}
			for n, raw := range refTools {
				if tools[n] != raw {
					t.Errorf("tool %s changed:\n gateway %s\n direct  %s", n, tools[n], raw)
				}
			}
			got := c.call("tools/call", map[string]any{"name": "exotic", "arguments": map[string]any{"kind": "a", "a": "x1"}})
			if string(got.msg.Result) != string(refExotic.msg.Result) {
				t.Errorf("exotic result changed:\n gateway %s\n direct  %s", got.msg.Result, refExotic.msg.Result)
			}
			if !bytes.Contains(got.msg.Result, []byte(mcptest.BigInt)) {
				t.Errorf("big integer lost: %s", got.msg.Result)
			}
		})
	}
}

// TestErrorCodes pins every JSON-RPC code and HTTP status the endpoint
// promises, through a raw HTTP client.
func TestErrorCodes(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}, {"broken", map[string]any{"command": "x", "env": map[string]string{"K": "${SWITCHBOARD_SURELY_UNSET}"}}}},
		map[string]string{"MCP_SERVER_MAX_BODY_BYTES": "4096"})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	big := strings.Repeat("a", 5000)
	tests := []struct {
		name     string
		body     string
		status   int
		code     int
		dataHas  string
		noSessID bool
	}{
		{name: "unknown tool", body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool"}}`, status: 200, code: -32601},
		{name: "arguments not an object", body: `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":[1,2]}}`, status: 200, code: -32602},
		{name: "name missing", body: `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`, status: 200, code: -32602},
		{name: "upstream JSON-RPC error forwarded", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"rpc_error","arguments":{}}}`, status: 200, code: -32602, dataHas: `"field":"x"`},
		{name: "malformed JSON", body: `{"jsonrpc":"2.0","id":5,"method":`, status: 400, code: -32700},
		{name: "batch", body: `[{"jsonrpc":"2.0","id":6,"method":"ping"}]`, status: 400, code: -32600},
		{name: "wrong jsonrpc version", body: `{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, status: 400, code: -32600},
		{name: "oversized body", body: `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + big + `"}}}`, status: 413, code: -32600},
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":9,"method":"no/such"}`, status: 200, code: -32601},
		{name: "no session: a plain JSON-RPC POST is answered statelessly", body: `{"jsonrpc":"2.0","id":10,"method":"tools/list"}`, status: 200, code: 0, noSessID: true},
		{name: "no session: a method that needs one", body: `{"jsonrpc":"2.0","id":11,"method":"resources/subscribe","params":{"uri":"x:y"}}`, status: 200, code: -32601, noSessID: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := *c
			cc.t = t
			if tt.noSessID {
				cc.session = ""
			}
			rep := cc.post(tt.body)
			if rep.Status != tt.status || rep.code() != tt.code {
				t.Fatalf("got HTTP %d code %d, want HTTP %d code %d: %s", rep.Status, rep.code(), tt.status, tt.code, rep.Body)
			}
			if tt.dataHas != "" && !bytes.Contains(rep.msg.Error.Data, []byte(tt.dataHas)) {
				t.Errorf("error data %s lacks %s", rep.msg.Error.Data, tt.dataHas)
			}
		})
	}
	t.Run("tool error is a result", func(t *testing.T) {
		rep := c.call("tools/call", map[string]any{"name": "tool_error", "arguments": map[string]any{}})
		if rep.code() != 0 || !bytes.Contains(rep.msg.Result, []byte(`"isError":true`)) {
			t.Fatalf("got %s", rep.Body)
		}
	})
	t.Run("crashed upstream is internal error, then restarted", func(t *testing.T) {
		pid := c.toolText("pid", map[string]any{})
		rep := c.call("tools/call", map[string]any{"name": "crash", "arguments": map[string]any{}})
		if rep.code() != -32603 {
			t.Fatalf("crash: got %s, want -32603", rep.Body)
		}
		if again := c.toolText("pid", map[string]any{}); again == pid {
			t.Fatalf("pid %s after crash equals pid before: not restarted", again)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		cc := *c
		cc.t = t
		cc.session = "sb-00000000000000000000000000000000"
		if rep := cc.call("tools/list", nil); rep.Status != 404 {
			t.Fatalf("got %d, want 404", rep.Status)
		}
	})
	t.Run("foreign origin", func(t *testing.T) {
		cc := *c
		cc.t = t
		cc.header = http.Header{"Origin": {"https://evil.example"}}
		if rep := cc.call("tools/list", nil); rep.Status != 403 {
			t.Fatalf("got %d, want 403", rep.Status)
		}
		cc.header = http.Header{"Origin": {"http://localhost:3000"}}
		if rep := cc.call("tools/list", nil); rep.Status != 200 {
			t.Fatalf("loopback origin: got %d, want 200", rep.Status)
		}
	})
	t.Run("status reports the misconfigured server", func(t *testing.T) {
		resp, err := http.Get(g.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st struct {
			Upstreams []struct {
				Name, State, LastError string
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, u := range st.Upstreams {
			if u.Name == "broken" {
				found = true
				if u.State != "invalid" || !strings.Contains(u.LastError, "SWITCHBOARD_SURELY_UNSET") {
					t.Errorf("broken: %+v", u)
				}
			}
		}
		if !found {
			t.Errorf("broken server missing from status: %+v", st)
		}
	})
	t.Run("session ended by DELETE", func(t *testing.T) {
		cc := newRaw(t, g.url+"/mcp")
		cc.initialize()
		req, _ := http.NewRequest(http.MethodDelete, cc.url, nil)
		req.Header.Set("Mcp-Session-Id", cc.session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rep := cc.call("tools/list", nil); rep.Status != 404 {
			t.Fatalf("after DELETE: got %d, want 404", rep.Status)
		}
		if rep := cc.call("ping", nil); rep.Status != 404 {
			t.Fatalf("ping after DELETE: got %d, want 404", rep.Status)
		}
	})
}

func TestCollisionsAndPrefix(t *testing.T) {
	g := startGateway(t, [][2]any{
		{"a", stdioServer("a")},
		{"b", stdioServer("b")},
		{"c", stdioServer("c", "toolPrefix", "c_")},
	}, nil)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	names, _ := toolObjects(t, c.call("tools/list", nil))
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	if count["echo"] != 1 || count["c_echo"] != 1 {
		t.Fatalf("tools: %v", names)
	}
	aPid, cPid := c.toolText("pid", map[string]any{}), c.toolText("c_pid", map[string]any{})
	if aPid == cPid {
		t.Fatalf("c_pid reached the same process as pid")
	}
	resp, err := http.Get(g.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Tools     int
		Upstreams []struct {
			Name     string
			Shadowed []string
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	// One definition of a tool count: what tools/list returns.
	if st.Tools != len(names) {
		t.Errorf("status counts %d tools, tools/list returns %d", st.Tools, len(names))
	}
	// The console's Overview too (issue 20, item 5), for the project and
	// on the page of all projects.
	for _, path := range []string{"/ui/p/default/", "/ui/"} {
		page := httpText(t, g.url+path)
		if want := "<dt>Tools</dt><dd>" + strconv.Itoa(len(names)) + "</dd>"; !strings.Contains(page, want) {
			t.Errorf("the Overview (%s) lacks %s, what tools/list returns", path, want)
		}
	}
	for _, u := range st.Upstreams {
		switch u.Name {
		case "b":
			if len(u.Shadowed) == 0 {
				t.Errorf("b shadows nothing in status: %+v", u)
			}
		case "a", "c":
			if len(u.Shadowed) != 0 {
				t.Errorf("%s shadowed: %v", u.Name, u.Shadowed)
			}
		}
	}
}

// httpText is the body of a GET of url, which must answer 200.
func httpText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}

func TestReloadKeepsSessionsAndUnchangedServers(t *testing.T) {
	a := stdioServer("a")
	g := startGateway(t, [][2]any{{"a", a}}, nil)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	pid := c.toolText("pid", map[string]any{})

	g.applyReload(t, [][2]any{{"a", a}, {"b", stdioServer("b", "toolPrefix", "b_")}})
	if got := c.toolText("pid", map[string]any{}); got != pid {
		t.Errorf("unchanged server restarted: pid %s -> %s", pid, got)
	}
	names, _ := toolObjects(t, c.call("tools/list", nil))
	if !strings.Contains(strings.Join(names, ","), "b_echo") {
		t.Errorf("new server's tools missing after reload: %v", names)
	}
	bPid := c.toolText("b_pid", map[string]any{})

	g.applyReload(t, [][2]any{{"b", stdioServer("b", "toolPrefix", "b_")}})
	if rep := c.call("tools/call", map[string]any{"name": "pid", "arguments": map[string]any{}}); rep.code() != -32601 {
		t.Errorf("removed server's tool still callable: %s", rep.Body)
	}
	if got := c.toolText("b_pid", map[string]any{}); got != bPid {
		t.Errorf("b restarted by an unrelated reload: %s -> %s", bPid, got)
	}
	if !processGone(pid) {
		t.Errorf("removed server's process %s still exists", pid)
	}

	// A servers file that no longer parses keeps the current servers,
	// untouched, and the log says why.
	if err := os.WriteFile(g.file, []byte(`{"mcpServers": {"b": `), 0o600); err != nil {
		t.Fatal(err)
	}
	g.reload <- os.Interrupt
	g.reload <- os.Interrupt // received once the first reload is done
	if got := c.toolText("b_pid", map[string]any{}); got != bPid {
		t.Errorf("a broken servers file restarted b: %s -> %s", bPid, got)
	}
	if !strings.Contains(g.logs.String(), "reload failed; keeping the current servers") {
		t.Errorf("no log line explains the failed reload")
	}
}

// openLegacySSE opens a legacy HTTP+SSE stream and returns a function that
// yields its next event (name, data) whose data holds want, skipping the
// others (list_changed is broadcast when the lazily started upstream lists
// its tools, progress comes and goes).
func openLegacySSE(t *testing.T, url string) func(want string) [2]string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	events := make(chan [2]string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				ev = e
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				events <- [2]string{ev, d}
			}
		}
	}()
	return func(want string) [2]string {
		t.Helper()
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("SSE stream ended before an event with %s", want)
				}
				if strings.Contains(e[1], want) {
					return e
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("no SSE event with %s in 20s", want)
			}
		}
	}
}

// postLegacy sends one message to a legacy session's endpoint; the answer
// comes down the stream.
func postLegacy(t *testing.T, endpoint, body string) {
	t.Helper()
	r, err := http.Post(endpoint, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: %d", body, r.StatusCode)
	}
}

func TestLegacySSEClient(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	next := openLegacySSE(t, g.url+"/sse")
	ep := next("sessionId=")
	if ep[0] != "endpoint" || !strings.HasPrefix(ep[1], "/message?sessionId=") {
		t.Fatalf("endpoint event %v", ep)
	}
	post := func(body string) { postLegacy(t, g.url+ep[1], body) }
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
	if e := next(`"id":1`); !strings.Contains(e[1], `"protocolVersion"`) {
		t.Fatalf("initialize reply %v", e)
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	if e := next(`"id":2`); !strings.Contains(e[1], `"hi"`) {
		t.Fatalf("echo reply %v", e)
	}
	post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`)
	if e := next(`"id":3`); !strings.Contains(e[1], `"code":-32601`) {
		t.Fatalf("unknown tool reply %v", e)
	}
	r, err := http.Post(g.url+"/message?sessionId=nope", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusNotFound {
		t.Errorf("unknown legacy session: %d, want 404", r.StatusCode)
	}
}

// TestShutdownDrainsInFlightCalls: calls running when the gateway is told
// to stop finish and reach their clients, over streamable HTTP (go-sdk)
// and over the legacy SSE stream, before run returns.
func TestShutdownDrainsInFlightCalls(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	started := make(chan struct{}, 4)
	cs := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { started <- struct{}{} },
	})
	const ms = 1500
	p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": ms}}
	p.SetProgressToken("drain")
	sdkDone := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(ctx, p)
		if err != nil {
			sdkDone <- err.Error()
			return
		}
		sdkDone <- res.Content[0].(*mcp.TextContent).Text
	}()

	next := openLegacySSE(t, g.url+"/sse")
	endpoint := g.url + next("sessionId=")[1]
	postLegacy(t, endpoint, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
	next(`"id":1`)
	postLegacy(t, endpoint, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500},"_meta":{"progressToken":"legacy"}}}`)

	select { // both handlers run upstream
	case <-started:
	case <-ctx.Done():
		t.Fatal("streamable call never started")
	}
	next(`"started"`)

	stopped := make(chan struct{})
	go func() { g.stop(t); close(stopped) }()
	if e := next(`"id":2`); !strings.Contains(e[1], "slept 1500ms") {
		t.Errorf("legacy call during shutdown: %s, want its result", e[1])
	}
	if got := <-sdkDone; got != "slept 1500ms" {
		t.Errorf("streamable call during shutdown: %s, want its result", got)
	}
	<-stopped
}

// TestMetrics scrapes /metrics after real calls.
func TestMetrics(t *testing.T) {
	// "dead" refuses connections: one failure opens its breaker.
	servers := [][2]any{{"up", stdioServer("up")}, {"dead", map[string]any{"url": "http://127.0.0.1:1/mcp", "toolPrefix": "dead_"}}}
	g := startGateway(t, servers, map[string]string{"MCP_SERVER_BREAKER_FAILURES": "1"})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	c.toolText("echo", map[string]any{"text": "x"})
	c.call("tools/call", map[string]any{"name": "tool_error", "arguments": map[string]any{}})
	c.call("tools/call", map[string]any{"name": "rpc_error", "arguments": map[string]any{}})
	c.call("tools/call", map[string]any{"name": "no such tool ' DROP", "arguments": map[string]any{}})
	scrape := func() string {
		resp, err := http.Get(g.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	var body string
	eventually(t, opTimeout, func() (bool, string) {
		body = scrape()
		return strings.Contains(body, `switchboard_upstream_breaker_open{project="default",server="dead"} 1`), "the breaker of dead never opened"
	})
	for _, want := range []string{
		`switchboard_upstream_state{project="default",server="dead",state="unavailable"} 1`,
		`switchboard_upstream_state{project="default",server="dead",state="ready"} 0`,
		`switchboard_tool_calls_total{outcome="ok",project="default",server="up",tool="echo"} 1`,
		`switchboard_tool_calls_total{outcome="tool_error",project="default",server="up",tool="tool_error"} 1`,
		`switchboard_tool_calls_total{outcome="error",project="default",server="up",tool="rpc_error"} 1`,
		`switchboard_tool_calls_total{outcome="error",project="default",server="",tool="(unknown)"} 1`,
		`switchboard_tool_call_errors_total{code="-32602",project="default",server="up"} 1`,
		`switchboard_tool_call_errors_total{code="-32601",project="default",server=""} 1`,
		`switchboard_tool_call_duration_seconds_count{project="default",server="up",tool="echo"} 1`,
		`switchboard_upstream_state{project="default",server="up",state="ready"} 1`,
		`switchboard_upstream_breaker_open{project="default",server="up"} 0`,
		`switchboard_upstream_connects_total{project="default",server="up"} 1`,
		`switchboard_sessions 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(string(body), "DROP") {
		t.Errorf("client-supplied tool name became a label")
	}

	// A removed server's state and breaker series go with it.
	g.applyReload(t, servers[:1])
	body = scrape()
	for _, gone := range []string{`switchboard_upstream_state{project="default",server="dead"`, `switchboard_upstream_breaker_open{project="default",server="dead"}`} {
		if strings.Contains(body, gone) {
			t.Errorf("after dead was removed, metrics still have %s...", gone)
		}
	}
	if !strings.Contains(body, `switchboard_upstream_state{project="default",server="up",state="ready"} 1`) {
		t.Errorf("the server that stayed lost its state series")
	}
}

// TestStatusAndIdleSessions: GET / and a plain GET /mcp answer the status
// document (version, uptime, each upstream's state and tool count),
// /healthz and /readyz answer 200, and a session idle past
// MCP_SERVER_SESSION_IDLE_TIMEOUT is ended (later requests on it: 404).
func TestStatusAndIdleSessions(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{"MCP_SERVER_SESSION_IDLE_TIMEOUT": "3s"})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	c.toolText("echo", map[string]any{"text": "x"})

	type status struct {
		Name, Version, Uptime string
		Sessions              int
		Upstreams             []struct {
			Name, State string
			Tools       int
		}
	}
	get := func(path, accept string) (int, status) {
		req, _ := http.NewRequest(http.MethodGet, g.url+path, nil)
		req.Header.Set("Accept", accept)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st status
		_ = json.NewDecoder(resp.Body).Decode(&st)
		return resp.StatusCode, st
	}
	for _, path := range []string{"/", "/mcp"} {
		code, st := get(path, "application/json")
		if code != 200 || st.Name != "switchboard" || st.Version == "" || st.Uptime == "" || st.Sessions != 1 ||
			len(st.Upstreams) != 1 || st.Upstreams[0].Name != "up" || st.Upstreams[0].State != "ready" || st.Upstreams[0].Tools < 5 {
			t.Errorf("GET %s: %d %+v", path, code, st)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(path, "*/*"); code != 200 {
			t.Errorf("GET %s: %d", path, code)
		}
	}

	// The sweeper ends the session on its own schedule: watch the count.
	eventually(t, opTimeout, func() (bool, string) {
		_, st := get("/", "application/json")
		return st.Sessions == 0, "the idle session is still open"
	})
	if rep := c.call("tools/list", map[string]any{}); rep.Status != http.StatusNotFound {
		t.Errorf("request on an expired session: %d, want 404", rep.Status)
	}
}
