package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

// connectRevision opens a go-sdk client on endpoint with token: pv "" is
// the SDK's default (2026-07-28, stateless), anything else pins that
// revision.
func connectRevision(t *testing.T, endpoint, token, pv string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, _ := connectRevisionBearer(t, endpoint, token, pv, opts)
	return cs
}

// openMCPSession is openMCP pinned to 2025-11-25, for tests about
// sessions (the SDK's default, 2026-07-28, has none).
func openMCPSession(t *testing.T, endpoint, token string) (*mcp.ClientSession, *bearer) {
	t.Helper()
	return connectRevisionBearer(t, endpoint, token, "2025-11-25", nil)
}

func connectRevisionBearer(t *testing.T, endpoint, token, pv string, opts *mcp.ClientOptions) (*mcp.ClientSession, *bearer) {
	t.Helper()
	b := &bearer{}
	b.set(token)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	var so *mcp.ClientSessionOptions
	if pv != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: pv}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: b},
		MaxRetries: -1}, so)
	if err != nil {
		t.Fatalf("connect %s (%q): %v (HTTP %d)", endpoint, pv, err, b.lastStatus())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, b
}

// revisionBytes removes what may differ between client revisions from a
// marshalled result (the list in docs/endpoints.md): resultType, and on tools/list
// the cache hints ttlMs and cacheScope (the go-sdk client marshals them
// as zero values for a 2025 result).
func revisionBytes(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		delete(m, k)
	}
	return m
}

// TestStatelessAndSessionClients: the official go-sdk client in its
// default mode (2026-07-28, stateless) and pinned to 2025-11-25, on the
// default endpoint and on a project's, lists and calls the same tools
// with the same results (but for resultType), error codes, progress,
// cancellation and tool-list changes; the call log records stateless
// calls with no session; the client's protocol _meta never reaches the
// upstream.
func TestStatelessAndSessionClients(t *testing.T) {
	t.Parallel()
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}, {"short", stdioServer("short", "toolPrefix", "short_", "callTimeout", "300ms")}},
		map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	admin.createProject("proj")
	admin.createServer("proj", "up", fixture("up", nil))
	tok := admin.createToken("proj", "stateless client").Token
	endpoints := []struct{ name, project, url, token string }{
		{"default", "default", g.url + "/mcp", adminToken},
		{"project", "proj", g.url + "/projects/proj/mcp", tok},
	}
	for _, ep := range endpoints {
		t.Run(ep.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			results := map[string][]map[string]any{}
			for _, rev := range []string{"", "2025-11-25"} {
				progress := make(chan *mcp.ProgressNotificationParams, 16)
				changed := make(chan struct{}, 4)
				cs := connectRevision(t, ep.url, ep.token, rev, &mcp.ClientOptions{
					ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params },
					ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
				})
				want, wantSession := "2026-07-28", false
				if rev != "" {
					want, wantSession = rev, true
				}
				if got := cs.InitializeResult().ProtocolVersion; got != want {
					t.Fatalf("negotiated %q, want %q", got, want)
				}
				if (cs.ID() != "") != wantSession {
					t.Errorf("%s: session id %q", want, cs.ID())
				}
				lt, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("%s: tools/list: %v", want, err)
				}
				results[rev] = append(results[rev], revisionBytes(t, lt))
				for _, call := range []mcp.CallToolParams{
					{Name: "echo", Arguments: map[string]any{"text": "héllo"}},
					{Name: "exotic", Arguments: map[string]any{"id": "x1"}},
					{Name: "tool_error", Arguments: map[string]any{}},
					{Name: "meta", Arguments: map[string]any{}, Meta: mcp.Meta{"user/key": "kept"}},
				} {
					res, err := cs.CallTool(ctx, &call)
					if err != nil {
						t.Fatalf("%s: %s: %v", want, call.Name, err)
					}
					results[rev] = append(results[rev], revisionBytes(t, res))
					if call.Name == "meta" {
						got := text(t, res)
						if strings.Contains(got, "io.modelcontextprotocol/") || !strings.Contains(got, `"user/key":"kept"`) {
							t.Errorf("%s: the upstream got _meta %s; want the user key and no protocol keys", want, got)
						}
					}
				}

				for _, tc := range []struct {
					tool string
					args any
					code int64
				}{
					{"rpc_error", map[string]any{}, -32602},
					{"no_such_tool", map[string]any{}, -32601},
					{"echo", "arguments that are not an object", -32602},
				} {
					_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
					var je *jsonrpc.Error
					if !errors.As(err, &je) || je.Code != tc.code {
						t.Errorf("%s: %s: err %v, want JSON-RPC code %d", want, tc.tool, err, tc.code)
					}
					if tc.tool == "rpc_error" && je != nil && string(je.Data) != `{"field":"x"}` {
						t.Errorf("%s: rpc_error data %s", want, je.Data)
					}
				}
				if ep.name == "default" {
					_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "short_slow", Arguments: map[string]any{"ms": 10000}})
					var je *jsonrpc.Error
					if !errors.As(err, &je) || je.Code != -32603 {
						t.Errorf("%s: timeout: err %v, want -32603", want, err)
					}
				}

				// Progress, with the client's own token.
				p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
				p.SetProgressToken("tok-" + want)
				if res, err := cs.CallTool(ctx, p); err != nil || text(t, res) != "done" {
					t.Fatalf("%s: progress: %v %v", want, res, err)
				}
				for i := 1; i <= 3; i++ {
					select {
					case n := <-progress:
						if n.ProgressToken != "tok-"+want || n.Progress != float64(i) {
							t.Errorf("%s: progress %d: %+v", want, i, n)
						}
					case <-ctx.Done():
						t.Fatalf("%s: progress %d never arrived", want, i)
					}
				}

				// Cancellation reaches the upstream.
				before := cancelledCount(ctx, t, cs, 0)
				cctx, ccancel := context.WithCancel(ctx)
				sp := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 60000}}
				sp.SetProgressToken("slow-" + want)
				errc := make(chan error, 1)
				go func() {
					_, err := cs.CallTool(cctx, sp)
					errc <- err
				}()
				select {
				case <-progress: // "started"
				case <-ctx.Done():
					t.Fatalf("%s: slow never started", want)
				}
				ccancel()
				if err := <-errc; err == nil {
					t.Fatalf("%s: cancelled call succeeded", want)
				}
				cancelledCount(ctx, t, cs, before+1)

				// Tool-list changes: subscriptions/listen for 2026, the
				// session for 2025.
				name := "fresh" + strconv.Itoa(len(want))
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_tool", Arguments: map[string]any{"name": name}}); err != nil {
					t.Fatal(err)
				}
				waitTool(ctx, t, cs, changed, name, true)
				if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "remove_tool", Arguments: map[string]any{"name": name}}); err != nil {
					t.Fatal(err)
				}
				waitTool(ctx, t, cs, changed, name, false)
			}
			if d := cmp.Diff(results["2025-11-25"], results[""]); d != "" {
				t.Errorf("results differ between 2025-11-25 and 2026-07-28 (-2025 +2026):\n%s", d)
			}
			// Stateless calls are logged with no session, 2025 ones with theirs.
			calls := admin.waitCalls(ep.project, "?tool=echo", 2)
			var sessions []bool
			for _, c := range calls {
				sessions = append(sessions, c.Session != "")
			}
			if !(len(calls) == 2 && sessions[0] != sessions[1]) {
				t.Errorf("echo calls in the log: %+v; want one with a session and one without", calls)
			}
		})
	}
}

// cancelledCount asks the fixture how many slow calls it saw cancelled,
// waiting until at least atLeast.
func cancelledCount(ctx context.Context, t *testing.T, cs *mcp.ClientSession, atLeast int) int {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cancelled_count", Arguments: map[string]any{"atLeast": atLeast}})
	if err != nil {
		t.Fatalf("cancelled_count: %v", err)
	}
	n, _ := strconv.Atoi(text(t, res))
	return n
}

// waitTool waits for list_changed notifications until the list has name
// (present) or has not.
func waitTool(ctx context.Context, t *testing.T, cs *mcp.ClientSession, changed <-chan struct{}, name string, present bool) {
	t.Helper()
	for {
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no list_changed with tool %s", name)
		}
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tl := range lt.Tools {
			found = found || tl.Name == name
		}
		if found == present {
			return
		}
	}
}

// TestLegacySSENeverSpeaks2026: on /sse the go-sdk client's default mode
// falls back to a session revision, because server/discover is -32601
// from the gateway's own table; tools work.
func TestLegacySSENeverSpeaks2026(t *testing.T) {
	t.Parallel()
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: g.url + "/sse"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v >= "2026" {
		t.Errorf("/sse negotiated %s", v)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "old"}})
	if err != nil || text(t, res) != "old" {
		t.Fatalf("echo over /sse: %v %v", res, err)
	}

	// Raw: discover and other unserved methods get our -32601.
	next := openLegacySSE(t, g.url+"/sse")
	ep := next("sessionId=")
	postLegacy(t, g.url+ep[1], `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if e := next(`"id":1`); strings.Contains(e[1], "2026-07-28") {
		t.Errorf("initialize on /sse answered %s", e[1])
	}
	for i, method := range []string{"server/discover", "subscriptions/listen", "sampling/createMessage"} {
		id := strconv.Itoa(10 + i)
		postLegacy(t, g.url+ep[1], `{"jsonrpc":"2.0","id":`+id+`,"method":"`+method+`","params":{}}`)
		e := next(`"id":` + id)
		if !strings.Contains(e[1], `"code":-32601`) || strings.Contains(e[1], "2026-07-28") || !strings.Contains(e[1], "is not served") {
			t.Errorf("%s on /sse: %s", method, e[1])
		}
	}
}

// TestStatelessWire: the transport rules of 2026-07-28 with a plain HTTP
// client: headers, version negotiation, unserved methods and verbs.
func TestStatelessWire(t *testing.T) {
	t.Parallel()
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	send := func(hdr map[string]string, body string) *rpcReply {
		t.Helper()
		c := newRaw(t, g.url+"/mcp")
		for k, v := range hdr {
			c.header.Set(k, v)
		}
		return c.post(body)
	}
	std := func(method, name string) map[string]string {
		h := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method}
		if name != "" {
			h["Mcp-Name"] = name
		}
		return h
	}
	rep := send(std("server/discover", ""), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`)
	var disc struct {
		SupportedVersions []string `json:"supportedVersions"`
		ResultType        string   `json:"resultType"`
		Capabilities      struct {
			Tools struct{ ListChanged bool } `json:"tools"`
		} `json:"capabilities"`
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(rep.msg.Result, &disc); err != nil || rep.Status != 200 {
		t.Fatalf("discover: %d %s", rep.Status, rep.Body)
	}
	if disc.SupportedVersions[0] != "2026-07-28" || disc.ResultType != "complete" || !disc.Capabilities.Tools.ListChanged || disc.Meta["io.modelcontextprotocol/serverInfo"] == nil {
		t.Errorf("discover result %s", rep.msg.Result)
	}
	rep = send(std("tools/call", "echo"), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},`+meta+`}}`)
	if rep.Status != 200 || !strings.HasSuffix(string(rep.msg.Result), `,"resultType":"complete"}`) || rep.Header.Get("Mcp-Session-Id") != "" {
		t.Errorf("stateless tools/call: %d %s", rep.Status, rep.Body)
	}
	rep = send(std("tools/list", ""), `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta+`}}`)
	if rep.Status != 200 || !strings.Contains(string(rep.msg.Result), `"resultType":"complete","ttlMs":0,"cacheScope":"private"`) {
		t.Errorf("stateless tools/list: %d %.300s", rep.Status, rep.Body)
	}

	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		body   string
		status int
		code   int
	}{
		{"no Mcp-Method", map[string]string{"Mcp-Protocol-Version": "2026-07-28"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, 400, -32020},
		{"Mcp-Method differs", std("tools/call", "echo"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, 400, -32020},
		{"Mcp-Name differs", std("tools/call", "other"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, 400, -32020},
		{"Mcp-Name differs on prompts/get", std("prompts/get", "other"),
			`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet",` + meta + `}}`, 400, -32020},
		{"no Mcp-Name on resources/read", std("resources/read", ""),
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"embedded:info",` + meta + `}}`, 400, -32020},
		{"Mcp-Name differs on resources/read", std("resources/read", "embedded:other"),
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"embedded:info",` + meta + `}}`, 400, -32020},
		{"no header, _meta says 2026", map[string]string{"Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, 400, -32020},
		{"header says 2026, no _meta", std("tools/list", ""),
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, 400, -32602},
		{"unknown later revision", map[string]string{"Mcp-Protocol-Version": "2027-01-01", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01"}}}`, 400, -32022},
		{"unserved method", std("logging/setLevel", ""),
			`{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{` + meta + `}}`, 404, -32601},
		// A served method: -32601 without the 404 clients take for "gone".
		{"unknown tool", std("tools/call", "nope"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope",` + meta + `}}`, 200, -32601},
		{"upstream error", std("tools/call", "rpc_error"),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"rpc_error","arguments":{},` + meta + `}}`, 400, -32602},
	} {
		rep := send(tc.hdr, tc.body)
		if rep.Status != tc.status || rep.code() != tc.code {
			t.Errorf("%s: %d %s, want %d and code %d", tc.name, rep.Status, rep.Body, tc.status, tc.code)
		}
		if tc.code == -32022 && (rep.msg.Error == nil || !strings.Contains(string(rep.msg.Error.Data), `"supported":["2026-07-28"`)) {
			t.Errorf("%s: data %s does not list the supported versions", tc.name, rep.Body)
		}
	}

	// GET and DELETE are not part of 2026-07-28.
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, _ := http.NewRequest(method, g.url+"/mcp", nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
			t.Errorf("%s with 2026-07-28: %d Allow %q", method, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}

	// A 2025 session cannot reach server/discover either: our -32601.
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	if rep := c.call("server/discover", map[string]any{}); rep.code() != -32601 || strings.Contains(string(rep.Body), "2026") {
		t.Errorf("server/discover in a 2025 session: %s", rep.Body)
	}
}

// TestStatelessAcrossReplicas: two replicas on one PostgreSQL behind a
// round-robin proxy with no affinity. A 2026-07-28 client's requests
// alternate between them, and it lists and calls the tools of a project
// created through one replica only.
func TestStatelessAcrossReplicas(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_SYNC_INTERVAL": "100ms", "MCP_SERVER_ADMIN_TOKEN": adminToken}
	ga, gb := startGateway(t, nil, env), startGateway(t, nil, env)
	a := newAPI(t, ga.url, adminToken)
	a.createProject("rr")
	a.createServer("rr", "s", fixture("s", nil))
	tok := a.createToken("rr", "round robin").Token

	var next atomic.Int64
	var hits [2]atomic.Int64
	var proxies [2]*httputil.ReverseProxy
	for i, u := range []string{ga.url, gb.url} {
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		proxies[i] = httputil.NewSingleHostReverseProxy(target)
		proxies[i].FlushInterval = -1 // SSE answers go through at once
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := next.Add(1) % 2
		hits[i].Add(1)
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)

	cs := connectRevision(t, lb.URL+"/projects/rr/mcp", tok, "", nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s through the balancer", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for i := range 6 {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list %d: %v", i, err)
		}
		found := false
		for _, tl := range lt.Tools {
			found = found || tl.Name == "s_t0000"
		}
		if !found {
			t.Fatalf("tools/list %d lacks s_t0000", i)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "rr" + strconv.Itoa(i)}})
		if err != nil || text(t, res) != "rr"+strconv.Itoa(i) {
			t.Fatalf("call %d: %v %v", i, res, err)
		}
	}
	if hits[0].Load() < 6 || hits[1].Load() < 6 {
		t.Errorf("requests per replica: %d and %d; want both to serve", hits[0].Load(), hits[1].Load())
	}
}

// TestStatelessListenStream: subscriptions/listen on the wire: the
// acknowledgement first, then list_changed with the listen's id in _meta,
// and the result that ends the stream when the gateway shuts down.
func TestStatelessListenStream(t *testing.T) {
	t.Parallel()
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	resp := listen2026(t, g.url+"/mcp", `{"notifications":{"toolsListChanged":true,"promptsListChanged":true},`+meta+`}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	events := sseData(resp.Body)
	next := func() string {
		t.Helper()
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatal("listen stream ended early")
			}
			return e
		case <-time.After(opTimeout):
			t.Fatal("no event on the listen stream")
		}
		return ""
	}
	const sub = `"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}`
	if e := next(); e != `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},`+sub+`}}` {
		t.Errorf("first event %s", e)
	}
	c := newRaw(t, g.url+"/mcp")
	for k, v := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "add_tool"} {
		c.header.Set(k, v)
	}
	if rep := c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_tool","arguments":{"name":"later"},` + meta + `}}`); rep.code() != 0 {
		t.Fatalf("add_tool: %s", rep.Body)
	}
	// The first use of "up" lists its tools (a change too); wait for the
	// change that adds "later".
	for {
		if e := next(); e != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{`+sub+`}}` {
			t.Fatalf("change event %s", e)
		}
		rep := newRaw(t, g.url+"/mcp").post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if strings.Contains(string(rep.Body), `"name":"later"`) {
			break
		}
	}
	g.stop(t)
	for e := range events {
		if e == `{"jsonrpc":"2.0","id":"L1","result":{"resultType":"complete",`+sub+`}}` {
			return
		}
	}
	t.Error("the listen stream ended without its result at shutdown")
}

// sseData reads an SSE stream's data lines, one value each, until it
// ends (then the channel is closed).
func sseData(body io.Reader) <-chan string {
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
	}()
	return events
}

// listen2026 opens a 2026-07-28 subscriptions/listen stream (id "L1")
// with params; the caller closes its body.
func listen2026(t *testing.T, url, params string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
