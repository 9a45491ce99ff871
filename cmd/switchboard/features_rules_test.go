package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 the gateway passes sampling and logging, which 2026-07-28 deprecates (SEP-2577) but which clients and servers still use.

// The rules of issue 25 that a client only sees when they break: what
// the gateway declares, toolPrefix on prompts, list changes on a
// 2026-07-28 listen stream, and the refusals of requests back.

const meta2026 = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`

// post2026 sends one 2026-07-28 request with the headers the revision
// asks for; clientCaps is the _meta clientCapabilities object.
func post2026(t *testing.T, url, method, name, params, clientCaps string) *rpcReply {
	t.Helper()
	c := newRaw(t, url)
	c.header.Set("Mcp-Protocol-Version", "2026-07-28")
	c.header.Set("Mcp-Method", method)
	if name != "" {
		c.header.Set("Mcp-Name", name)
	}
	m := `"_meta":{` + meta2026 + `,"io.modelcontextprotocol/clientCapabilities":` + clientCaps + `}`
	if params != "" {
		m = params + "," + m
	}
	return c.post(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + m + `}}`)
}

// TestFeatureCapabilities: initialize declares prompts, resources (with
// subscribe), logging and completions; server/discover the same without
// the session features (subscribe, logging).
func TestFeatureCapabilities(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	caps := func(result json.RawMessage) map[string]json.RawMessage {
		var r struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		}
		if err := json.Unmarshal(result, &r); err != nil {
			t.Fatalf("%v: %s", err, result)
		}
		return r.Capabilities
	}
	c := newRaw(t, g.url+"/mcp")
	rep := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw", "version": "1"}})
	got := caps(rep.msg.Result)
	want := map[string]string{"prompts": `{"listChanged":true}`, "resources": `{"listChanged":true,"subscribe":true}`,
		"logging": `{}`, "completions": `{}`, "tools": `{"listChanged":true}`}
	sameCaps(t, "initialize", got, want)
	got = caps(post2026(t, g.url+"/mcp", "server/discover", "", "", "{}").msg.Result)
	want = map[string]string{"prompts": `{"listChanged":true}`, "resources": `{"listChanged":true}`, "completions": `{}`, "tools": `{"listChanged":true}`}
	sameCaps(t, "server/discover", got, want)
	if _, ok := got["logging"]; ok {
		t.Errorf("server/discover declares logging, which 2026-07-28 clients do not get")
	}
}

// TestPromptPrefix: a server's toolPrefix applies to its prompt names, so
// two servers' prompts of one name are both offered; get and completion
// of a prefixed name reach that server under its own name.
func TestPromptPrefix(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}},
		{"two", map[string]any{"command": clash, "toolPrefix": "two_"}}}, nil)
	cs := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", nil, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lp, err := cs.ListPrompts(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range lp.Prompts {
		names = append(names, p.Name)
	}
	if diff := cmp.Diff([]string{"farewell", "greet", "two_farewell", "two_greet"}, names); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "two_farewell", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || !strings.Contains(asJSON(t, gp, nil), "bye Ada") {
		t.Errorf("two_farewell: %s", asJSON(t, gp, err))
	}
	cp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "two_farewell"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
	if err != nil || len(cp.Completion.Values) != 1 || cp.Completion.Values[0] != "clash-A" {
		t.Errorf("completion of two_farewell: %s", asJSON(t, cp, err))
	}
}

// TestFeatureListChangedOnListen: a 2026-07-28 client's listen stream
// gets prompts and resources list_changed when a server's lists change.
func TestFeatureListChangedOnListen(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	// Connect the server first: its first lists are a change too.
	if rep := post2026(t, g.url+"/mcp", "prompts/list", "", "", "{}"); rep.code() != 0 {
		t.Fatalf("prompts/list: %s", rep.Body)
	}
	resp := listen2026(t, g.url+"/mcp", `{"notifications":{"promptsListChanged":true,"resourcesListChanged":true},"_meta":{`+meta2026+`}}`)
	defer resp.Body.Close()
	events := sseData(resp.Body)
	next := func() string {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(opTimeout):
			t.Fatal("no event on the listen stream")
		}
		return ""
	}
	if e := next(); !strings.Contains(e, "notifications/subscriptions/acknowledged") {
		t.Fatalf("first event %s", e)
	}
	for _, tc := range []struct{ tool, args, want string }{
		{"add_prompt", `{"name":"late"}`, "notifications/prompts/list_changed"},
		{"add_resource", `{"uri":"clash:late"}`, "notifications/resources/list_changed"},
	} {
		if rep := post2026(t, g.url+"/mcp", "tools/call", tc.tool, `"name":"`+tc.tool+`","arguments":`+tc.args, "{}"); rep.code() != 0 {
			t.Fatalf("%s: %s", tc.tool, rep.Body)
		}
		if e := next(); !strings.Contains(e, `"method":"`+tc.want+`"`) {
			t.Errorf("after %s: event %s, want %s", tc.tool, e, tc.want)
		}
	}
	g.stop(t)
}

// TestRequestsBackRefused: a server's request back is refused, and never
// sent, to a client that did not declare the capability (a 2025 session
// and a 2026-07-28 request that declared roots only), and when requests
// of several clients are in flight on a stdio server (its pipe does not
// say whose call asks).
func TestRequestsBackRefused(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, map[string]string{"MCP_SERVER_CALL_TIMEOUT": "5s"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("capability not declared", func(t *testing.T) {
		c := newRaw(t, g.url+"/mcp")
		rep := c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"roots": map[string]any{}},
			"clientInfo": map[string]any{"name": "raw", "version": "1"}})
		c.session = rep.Header.Get("Mcp-Session-Id")
		c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		rep = c.call("tools/call", map[string]any{"name": "ask", "arguments": map[string]any{"name": "q"}})
		for _, e := range rep.Events {
			if strings.Contains(string(e), "sampling/createMessage") {
				t.Errorf("a session without sampling was sent %s", e)
			}
		}
		if !strings.Contains(string(rep.Body), `"isError":true`) && rep.code() == 0 {
			t.Errorf("ask succeeded without sampling: %s", rep.Body)
		}

		rep = post2026(t, g.url+"/mcp", "tools/call", "ask", `"name":"ask","arguments":{"name":"q"}`, `{"roots":{}}`)
		if strings.Contains(string(rep.Body), "input_required") || (!strings.Contains(string(rep.Body), `"isError":true`) && rep.code() == 0) {
			t.Errorf("2026 request without sampling: %s", rep.Body)
		}
	})

	t.Run("several clients in flight", func(t *testing.T) {
		evA, evB := newEvents(), newEvents()
		a := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", evA, "a")
		b := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", evB, "b")
		if err := a.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
			t.Fatal(err)
		}
		holdCtx, release := context.WithCancel(ctx)
		held := make(chan error, 1)
		go func() {
			_, err := a.CallTool(holdCtx, &mcp.CallToolParams{Name: "hold", Arguments: map[string]any{}})
			held <- err
		}()
		// hold logs when it starts: a's call is in flight on the server.
		select {
		case <-evA.logs:
		case <-ctx.Done():
			t.Fatal("hold never started")
		}
		res, err := b.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"name": "q"}})
		if err == nil && !res.IsError {
			t.Errorf("ask with another client's call in flight succeeded: %s", asJSON(t, res, nil))
		}
		release()
		<-held
		for name, ev := range map[string]*clientEvents{"a": evA, "b": evB} {
			select {
			case q := <-ev.samples:
				t.Errorf("%s was asked %q", name, q)
			default:
			}
		}
	})
}

// sameCaps compares each capability in want (JSON) with got's, as values.
func sameCaps(t *testing.T, where string, got map[string]json.RawMessage, want map[string]string) {
	t.Helper()
	for k, v := range want {
		var a, b any
		_ = json.Unmarshal([]byte(v), &a)
		_ = json.Unmarshal(got[k], &b)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s capabilities.%s (-want +got):\n%s", where, k, diff)
		}
	}
}
