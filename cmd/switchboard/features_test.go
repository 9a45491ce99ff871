package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 the gateway passes sampling, roots and logging, which 2026-07-28 deprecates (SEP-2577) but which clients and servers still use.

// featureFixtures builds the go-sdk "everything" example server (it is in
// the go-sdk module the gateway already requires) and clashserver, once
// per test binary.
var featureFixtures = sync.OnceValues(func() ([2]string, error) {
	dir, err := os.MkdirTemp("", "switchboard-fixtures-")
	if err != nil {
		return [2]string{}, err
	}
	fixturesDir = dir
	bins := [2]string{filepath.Join(dir, "everything"), filepath.Join(dir, "clash")}
	for i, pkg := range []string{"github.com/modelcontextprotocol/go-sdk/examples/server/everything",
		"github.com/switchboard-mcp/switchboard/internal/mcptest/clashserver"} {
		if out, err := exec.Command("go", "build", "-o", bins[i], pkg).CombinedOutput(); err != nil {
			return bins, &buildError{pkg, string(out), err}
		}
	}
	return bins, nil
})

// removeFeatureFixtures deletes what featureFixtures and gatewayBinary
// built (TestMain).
func removeFeatureFixtures() {
	for _, dir := range []string{fixturesDir, gatewayDir} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
}

var fixturesDir string

type buildError struct {
	pkg, out string
	err      error
}

func (e *buildError) Error() string { return "go build " + e.pkg + ": " + e.err.Error() + "\n" + e.out }

func fixtures(t *testing.T) (everything, clash string) {
	t.Helper()
	bins, err := featureFixtures()
	if err != nil {
		t.Fatal(err)
	}
	return bins[0], bins[1]
}

// httpFixture runs bin with -http on a free port until the test ends and
// returns its URL.
func httpFixture(t *testing.T, bin string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.Command(bin, "-http", addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Ready when it accepts a connection (the child listens right away).
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if i > 500 {
			t.Fatalf("%s did not listen: %v", bin, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + addr
}

// clientEvents collects what the server sends a go-sdk client by itself.
type clientEvents struct {
	logs          chan *mcp.LoggingMessageParams
	updated       chan string
	promptsChange chan struct{}
	resChange     chan struct{}
	samples       chan string // the text of each sampling request
}

// featureClient is a go-sdk client that offers sampling, elicitation and
// roots, answering each the same way, so a server reached directly and
// through the gateway must give the same results.
func featureClient(ev *clientEvents, name string) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := ""
			if len(req.Params.Messages) > 0 {
				if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			if ev != nil {
				select {
				case ev.samples <- text:
				default:
				}
			}
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: name + " sampled " + text}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"random": "from " + name}}, nil
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			if ev != nil {
				ev.logs <- r.Params
			}
		},
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if ev != nil {
				ev.updated <- r.Params.URI
			}
		},
		PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
			if ev != nil {
				select {
				case ev.promptsChange <- struct{}{}:
				default:
				}
			}
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			if ev != nil {
				select {
				case ev.resChange <- struct{}{}:
				default:
				}
			}
		},
	})
	c.AddRoots(&mcp.Root{Name: "work", URI: "file:///work"})
	return c
}

func newEvents() *clientEvents {
	return &clientEvents{logs: make(chan *mcp.LoggingMessageParams, 16), updated: make(chan string, 16),
		promptsChange: make(chan struct{}, 4), resChange: make(chan struct{}, 4), samples: make(chan string, 16)}
}

func connectFeature(t *testing.T, tr mcp.Transport, version string, ev *clientEvents, name string) *mcp.ClientSession {
	t.Helper()
	// Not a context that ends: the legacy SSE transport's stream lives
	// on the one Connect gets.
	ctx := context.Background()
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := featureClient(ev, name).Connect(ctx, tr, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func asJSON(t *testing.T, v any, err error) string {
	t.Helper()
	if err != nil {
		return "error: " + err.Error()
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// revisionMembers are the result members that say how a result travelled
// rather than what it holds: the revision's resultType (a 2026-07-28
// client's results have it, a 2025 session's do not) and the cache
// hints of a list (the go-sdk server says "public", the gateway's own
// lists say nothing to a 2025 client and "private" to a 2026 one: they
// depend on the project and token). They are compared apart.
var revisionMembers = []string{"resultType", "ttlMs", "cacheScope"}

// content drops revisionMembers from a result's JSON.
func content(t *testing.T, s string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &m) != nil {
		return s
	}
	for _, k := range revisionMembers {
		delete(m, k)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// exchanges runs every list, get, read, completion and tool that asks the
// client something, returning each result as JSON by name.
func exchanges(t *testing.T, cs *mcp.ClientSession) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[string]string{}
	lp, err := cs.ListPrompts(ctx, nil)
	out["prompts/list"] = asJSON(t, lp, err)
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
	out["prompts/get"] = asJSON(t, gp, err)
	lr, err := cs.ListResources(ctx, nil)
	out["resources/list"] = asJSON(t, lr, err)
	lt, err := cs.ListResourceTemplates(ctx, nil)
	out["resources/templates/list"] = asJSON(t, lt, err)
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
	out["resources/read"] = asJSON(t, rr, err)
	cp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
	out["completion/complete prompt"] = asJSON(t, cp, err)
	ct, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "http://example.com/~{resource_name}/"},
		Argument: mcp.CompleteParamsArgument{Name: "resource_name", Value: "r"}})
	out["completion/complete template"] = asJSON(t, ct, err)
	for _, tool := range []string{"sample", "elicit (form)", "roots"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		out["tools/call "+tool] = asJSON(t, res, err)
	}
	return out
}

// TestEverythingThroughTheGateway: the go-sdk "everything" example behind
// the gateway (over stdio and over streamable HTTP) gives a go-sdk client
// (2025-11-25 session, and the SDK's default 2026-07-28) the same
// prompts, resources, templates, completions and answers to sampling,
// elicitation and roots as the same client talking to it directly.
func TestEverythingThroughTheGateway(t *testing.T) {
	everything, _ := fixtures(t)
	direct := connectFeature(t, &mcp.CommandTransport{Command: exec.Command(everything)}, "2025-11-25", nil, "client")
	want := exchanges(t, direct)
	wantContent := map[string]string{}
	for k, v := range want {
		wantContent[k] = content(t, v)
	}
	for _, tc := range []struct {
		name  string
		entry map[string]any
	}{
		{"stdio", map[string]any{"command": everything}},
		{"streamable-http", map[string]any{"url": httpFixture(t, everything)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, [][2]any{{"every", tc.entry}}, nil)
			for _, version := range []string{"2025-11-25", ""} {
				cs := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, version, nil, "client")
				got := exchanges(t, cs)
				want := maps.Clone(wantContent)
				for k := range got {
					got[k] = content(t, got[k])
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("client %q: through the gateway (-direct +gateway):\n%s", version, diff)
				}
			}
		})
	}
}

// TestFeatureClashesAndRouting: a second server with a prompt named like
// everything's and a resource with the same URI: the first server in
// order wins both (the other's are reported shadowed), URIs are never
// rewritten, and its other prompts, resources and templates route to it.
func TestFeatureClashesAndRouting(t *testing.T) {
	everything, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"every", map[string]any{"command": everything}}, {"clash", map[string]any{"command": clash}}}, nil)
	ev := newEvents()
	cs := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", ev, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || !strings.Contains(asJSON(t, gp, nil), "Say hi to Ada") {
		t.Errorf("greet should be everything's: %s", asJSON(t, gp, err))
	}
	gp, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "farewell", Arguments: map[string]string{"name": "Ada"}})
	if err != nil || !strings.Contains(asJSON(t, gp, nil), "bye Ada") {
		t.Errorf("farewell: %s", asJSON(t, gp, err))
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "embedded:info"})
	if err != nil || !strings.Contains(asJSON(t, rr, nil), "hello example server") {
		t.Errorf("embedded:info should be everything's: %s", asJSON(t, rr, err))
	}
	for uri, text := range map[string]string{"clash:doc": "clash doc", "clash:item/42": "clash item"} {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || !strings.Contains(asJSON(t, rr, nil), text) {
			t.Errorf("%s: %s", uri, asJSON(t, rr, err))
		}
	}
	cp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "farewell"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "A"}})
	if err != nil || len(cp.Completion.Values) != 1 || cp.Completion.Values[0] != "clash-A" {
		t.Errorf("completion of clash's prompt: %s", asJSON(t, cp, err))
	}
	lp, err := cs.ListPrompts(ctx, nil)
	var names []string
	if err == nil {
		for _, p := range lp.Prompts {
			names = append(names, p.Name)
		}
	}
	if diff := cmp.Diff([]string{"greet", "greet (with Icons)", "farewell"}, names); diff != "" {
		t.Errorf("prompts (-want +got):\n%s", diff)
	}
	lr, err := cs.ListResources(ctx, nil)
	var uris []string
	if err == nil {
		for _, r := range lr.Resources {
			uris = append(uris, r.URI)
		}
	}
	// everything lists embedded:info once (its second AddResource of the
	// URI replaced the first); clash's embedded:info is shadowed.
	if diff := cmp.Diff([]string{"embedded:info", "clash:doc"}, uris); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	met := get(t, g.url+"/metrics")
	for _, want := range []string{
		`switchboard_feature_requests_total{kind="prompt",outcome="ok",project="default"} 2`,
		`switchboard_feature_requests_total{kind="resource",outcome="ok",project="default"} 3`,
	} {
		if !strings.Contains(met, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// The call log records them like calls, with their kind and server.
	type logged struct{ Server, Tool, Kind, Outcome string }
	want := []logged{{"clash", "clash:doc", "resource", "ok"}, {"every", "greet", "prompt", "ok"}}
	eventually(t, opTimeout, func() (bool, string) {
		var page struct{ Calls []logged }
		body := get(t, g.url+"/api/v1/projects/default/tool-calls?limit=1000")
		_ = json.Unmarshal([]byte(body), &page)
		found := 0
		for _, w := range want {
			if slices.Contains(page.Calls, w) {
				found++
			}
		}
		return found == len(want), body
	})
	// The console's Calls page and the CLI's history show the kind.
	page := get(t, g.url+"/ui/p/default/calls")
	for _, want := range []string{`data-tool="greet" data-kind="prompt"`, `data-tool="clash:doc" data-kind="resource"`, "<th scope=\"col\">Kind</th>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Calls page lacks %s", want)
		}
	}
	hist := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url}).ok("history")
	for _, row := range [][]string{{"KIND", "NAME"}, {"every", "prompt", "greet", "ok"}, {"clash", "resource", "clash:doc", "ok"}} {
		if !hasRow(hist, row...) {
			t.Errorf("history lacks %q:\n%s", row, hist)
		}
	}
	st := get(t, g.url+"/")
	if !strings.Contains(st, `"shadowed_prompts": [`) || !strings.Contains(st, `"shadowed_resources": [`) {
		t.Errorf("status does not report the shadowed prompt and resource:\n%s", st)
	}

	t.Run("list_changed for prompts", func(t *testing.T) {
		for len(ev.promptsChange) > 0 { // those of the first connects
			<-ev.promptsChange
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_prompt", Arguments: map[string]any{"name": "late"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ev.promptsChange:
		case <-ctx.Done():
			t.Fatal("no notifications/prompts/list_changed")
		}
		gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "late"})
		if err != nil || !strings.Contains(asJSON(t, gp, nil), "late") {
			t.Errorf("late prompt: %s", asJSON(t, gp, err))
		}
	})

	t.Run("list_changed for resources", func(t *testing.T) {
		for len(ev.resChange) > 0 {
			<-ev.resChange
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_resource", Arguments: map[string]any{"uri": "clash:late"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ev.resChange:
		case <-ctx.Done():
			t.Fatal("no notifications/resources/list_changed")
		}
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "clash:late"})
		if err != nil || !strings.Contains(asJSON(t, rr, nil), "clash:late") {
			t.Errorf("late resource: %s", asJSON(t, rr, err))
		}
	})

	t.Run("log messages reach the client that asked, tagged", func(t *testing.T) {
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "log", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-ev.logs:
			if m.Logger != "every" || m.Level != "error" || m.Data != "something happened!" {
				t.Errorf("log message %+v", m)
			}
		case <-ctx.Done():
			t.Fatal("no notifications/message")
		}
	})

}

// TestLogMessagesReachTheirClient: a server's log message sent while it
// serves one client's call reaches that client only, at the level it
// asked for: not another session of the project that asked for messages,
// nor a session that asked for a higher level or for none.
func TestLogMessagesReachTheirClient(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type client struct {
		name  string
		level mcp.LoggingLevel
		cs    *mcp.ClientSession
		ev    *clientEvents
		want  []string
	}
	clients := []*client{{name: "a", level: "info"}, {name: "b", level: "info"}, {name: "quiet", level: "critical"}, {name: "silent"}}
	for _, c := range clients {
		c.ev = newEvents()
		c.cs = connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", c.ev, c.name)
		if c.level != "" {
			if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: c.level}); err != nil {
				t.Fatal(err)
			}
		}
	}
	say := func(c *client, text string) {
		if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "log", Arguments: map[string]any{"name": text}}); err != nil {
			t.Fatal(err)
		}
	}
	// Round 1: each client's own call logs at error; a and b asked for
	// info and get their own message, quiet and silent get nothing.
	for _, c := range clients {
		say(c, "1-"+c.name)
		if c.level == "info" {
			c.want = append(c.want, "1-"+c.name)
		}
	}
	// Round 2, everyone at info: each stream must hold its own messages
	// only, in order; a message of another session's call would have
	// come before its own last one.
	for _, c := range clients {
		if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clients {
		say(c, "2-"+c.name)
		c.want = append(c.want, "2-"+c.name)
	}
	for _, c := range clients {
		var got []string
		for len(got) < 10 && (len(got) == 0 || got[len(got)-1] != "2-"+c.name) {
			select {
			case m := <-c.ev.logs:
				if m.Logger != "clash" {
					t.Errorf("%s: logger %q, want the server's name", c.name, m.Logger)
				}
				got = append(got, fmt.Sprint(m.Data))
			case <-ctx.Done():
				t.Fatalf("%s got %q and then nothing", c.name, got)
			}
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("log messages of %s (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestLogMessagesOfNoCall: a server's log message sent while no client
// request is in flight on it (here: right after the gateway set its
// level) reaches every session that asked for messages of its level.
func TestLogMessagesOfNoCall(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash, "args": []string{"-announce-level"}}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	evA, evB := newEvents(), newEvents()
	a := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", evA, "a")
	b := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", evB, "b")
	if _, err := a.ListTools(ctx, nil); err != nil { // connects the server
		t.Fatal(err)
	}
	next := func(name string, ev *clientEvents) string {
		t.Helper()
		select {
		case m := <-ev.logs:
			if m.Logger != "clash" {
				t.Errorf("%s: logger %q", name, m.Logger)
			}
			return fmt.Sprint(m.Data)
		case <-time.After(opTimeout):
			t.Fatalf("%s got no notifications/message", name)
		}
		return ""
	}
	if err := a.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	if got := next("a", evA); got != "level info" {
		t.Errorf("a got %q first, want level info", got)
	}
	if err := b.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string]*clientEvents{"a": evA, "b": evB} {
		if got := next(name, ev); got != "level debug" {
			t.Errorf("%s got %q, want level debug", name, got)
		}
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestUnknownToolStatelessClients: an unknown tool in a 2026-07-28
// request is -32601 (this gateway's table) answered with HTTP 200, not
// the 404 the revision gives an unserved method: the mcp-go client reads
// 404 as "session terminated" and would never show the error. Checked
// with the mcp-go client, the go-sdk client and a plain POST.
func TestUnknownToolStatelessClients(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("plain POST", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
		req, _ := http.NewRequest(http.MethodPost, g.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope",`+meta+`}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "nope")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != 200 || body.Error.Code != -32601 {
			t.Errorf("status %d code %d, want 200 and -32601", resp.StatusCode, body.Error.Code)
		}
	})
	t.Run("go-sdk", func(t *testing.T) {
		cs := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "", nil, "client")
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32601 {
			t.Errorf("err %v, want JSON-RPC -32601", err)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}}); err != nil || text(t, res) != "still here" {
			t.Errorf("echo after the unknown tool: %v", err)
		}
	})
	t.Run("mcp-go", func(t *testing.T) {
		c, err := mcpgoclient.NewStreamableHttpClient(g.url + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		_, err = c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "nope", Arguments: map[string]any{}}})
		if err == nil || strings.Contains(err.Error(), "session terminated") || !strings.Contains(err.Error(), "nope") {
			t.Errorf("mcp-go sees %v, want the gateway's unknown-tool error", err)
		}
		res, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "still here"}}})
		if err != nil || len(res.Content) == 0 {
			t.Errorf("echo after the unknown tool: %v", err)
		}
	})
}

// TestReloadAddingServerNotifies: a reload that adds a server tells every
// session that tools, prompts and resources changed, although the new
// server connects only when something lists.
func TestReloadAddingServerNotifies(t *testing.T) {
	everything, clash := fixtures(t)
	servers := [][2]any{{"every", map[string]any{"command": everything}}}
	g := startGateway(t, servers, nil)
	tools := make(chan struct{}, 8)
	prompts := make(chan struct{}, 8)
	resources := make(chan struct{}, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { tools <- struct{}{} },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { prompts <- struct{}{} },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resources <- struct{}{} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for len(tools)+len(prompts)+len(resources) > 0 {
		select {
		case <-tools:
		case <-prompts:
		case <-resources:
		}
	}
	g.applyReload(t, append(servers, [2]any{"clash", map[string]any{"command": clash}}))
	for name, ch := range map[string]chan struct{}{"tools": tools, "prompts": prompts, "resources": resources} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("no notifications/%s/list_changed after a reload that added a server", name)
		}
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil || !strings.Contains(asJSON(t, lt, nil), `"touch"`) {
		t.Errorf("the added server's tools are not listed: %v", err)
	}
}

// TestFeatureIsolation: a resource subscription and a sampling request of
// one client reach that client only: not another session of its project,
// nor a client of another project running the same server.
func TestFeatureIsolation(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	tokens := map[string]string{}
	for _, p := range []string{"alpha", "beta"} {
		admin.createProject(p)
		admin.createServer(p, "clash", map[string]any{"command": clash})
		tokens[p] = admin.createToken(p, "client").Token
	}
	open := func(project, name string, version string) (*mcp.ClientSession, *clientEvents) {
		b := &bearer{}
		tok := tokens[project]
		b.token.Store(&tok)
		ev := newEvents()
		return connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/projects/" + project + "/mcp", HTTPClient: &http.Client{Transport: b}}, version, ev, name), ev
	}
	a1, ev1 := open("alpha", "a1", "2025-11-25")
	a2, ev2 := open("alpha", "a2", "2025-11-25")
	b1, evB := open("beta", "b1", "2025-11-25")
	b2026, evB2026 := open("beta", "b2026", "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("subscription", func(t *testing.T) {
		if err := a1.Subscribe(ctx, &mcp.SubscribeParams{URI: "clash:doc"}); err != nil {
			t.Fatal(err)
		}
		// b1, in beta, holds the same URI.
		if err := b1.Subscribe(ctx, &mcp.SubscribeParams{URI: "clash:doc"}); err != nil {
			t.Fatal(err)
		}
		// a2 makes alpha's server touch the URI a1 holds: only a1
		// hears of it.
		if _, err := a2.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "clash:doc"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-ev1.updated:
			if uri != "clash:doc" {
				t.Errorf("a1 got an update of %q", uri)
			}
		case <-ctx.Done():
			t.Fatal("a1 got no notifications/resources/updated")
		}
		// Then beta's server touches it: b1 hears of it once. An update
		// of alpha's touch would have come first, on the same stream.
		if _, err := b1.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "clash:doc"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-evB.updated:
		case <-ctx.Done():
			t.Fatal("b1 got no notifications/resources/updated of its own project's touch")
		}
		if n := len(evB.updated); n > 0 {
			t.Errorf("b1 got %d more updates: alpha's touch reached beta", n)
		}
		// Each client's calls are answered in order after its
		// notifications: a ping through each stream settles them.
		if _, err := a2.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "clash:unheld"}}); err != nil {
			t.Fatal(err)
		}
		if err := a1.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "clash:doc"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a2.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "clash:doc"}}); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*mcp.ClientSession{a1, a2, b1} {
			if err := s.Ping(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		for name, ch := range map[string]chan string{"a1 (after unsubscribing)": ev1.updated, "a2": ev2.updated, "b1": evB.updated} {
			select {
			case uri := <-ch:
				t.Errorf("%s got an update of %q it never subscribed to", name, uri)
			default:
			}
		}
	})

	t.Run("sampling", func(t *testing.T) {
		for _, tc := range []struct {
			cs   *mcp.ClientSession
			ev   *clientEvents
			name string
		}{{a1, ev1, "a1"}, {a2, ev2, "a2"}, {b1, evB, "b1"}, {b2026, evB2026, "b2026"}} {
			res, err := tc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"name": "q-" + tc.name}})
			if err != nil || text(t, res) != tc.name+" sampled q-"+tc.name {
				t.Errorf("%s: %s", tc.name, asJSON(t, res, err))
			}
		}
		for name, ev := range map[string]*clientEvents{"a1": ev1, "a2": ev2, "b1": evB, "b2026": evB2026} {
			if got := <-ev.samples; got != "q-"+name {
				t.Errorf("%s was asked %q", name, got)
			}
			select {
			case got := <-ev.samples:
				t.Errorf("%s was also asked %q", name, got)
			default:
			}
		}
	})
}

// TestSubscriptionSurvivesReconnect: a server that crashed and was
// started again is subscribed again to the URIs clients hold, so their
// updates keep coming.
func TestSubscriptionSurvivesReconnect(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	ev := newEvents()
	cs := connectFeature(t, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{}}, "2025-11-25", ev, "client")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "clash:doc"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crash", Arguments: map[string]any{}}); err == nil {
		t.Fatal("crash returned no error")
	}
	// The next call starts the server again.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "touch", Arguments: map[string]any{"uri": "clash:doc"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-ev.updated:
		if uri != "clash:doc" {
			t.Errorf("update of %q", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/resources/updated after the server was started again")
	}
}

// TestLegacySSERequestsBack: over the legacy HTTP+SSE transport, an
// upstream's sampling request goes down the session's stream and the
// answer POSTed to its endpoint goes back to the upstream.
func TestLegacySSERequestsBack(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	ev := newEvents()
	cs := connectFeature(t, &mcp.SSEClientTransport{Endpoint: g.url + "/sse", HTTPClient: &http.Client{}}, "", ev, "legacy")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"name": "q"}})
	if err != nil || text(t, res) != "legacy sampled q" {
		t.Errorf("ask over /sse: %s", asJSON(t, res, err))
	}
}

// cacheHint matches a 2026-07-28 cache hint member as go-sdk writes it.
var cacheHint = regexp.MustCompile(`"(ttlMs":[0-9]+|cacheScope":"[a-z]+")(,|$)`)

// TestFeatureBytesUnchanged: on the wire, with a plain 2025 session, the
// everything server's prompt, resource and template objects, and its
// prompts/get, resources/read and completion/complete results, reach the
// client through the gateway byte for byte as the server sent them (but
// for 2026-07-28's cache hints, which a 2025 result does not have).
func TestFeatureBytesUnchanged(t *testing.T) {
	everything, _ := fixtures(t)
	url := httpFixture(t, everything)
	g := startGateway(t, [][2]any{{"every", map[string]any{"url": url}}}, nil)
	direct, through := newRaw(t, url), newRaw(t, g.url+"/mcp")
	direct.initialize()
	through.initialize()
	items := func(c *rawClient, method, key string) []string {
		rep := c.call(method, map[string]any{})
		var res map[string]json.RawMessage
		var list []json.RawMessage
		if json.Unmarshal(rep.msg.Result, &res) != nil || json.Unmarshal(res[key], &list) != nil {
			t.Fatalf("%s: %.300s", method, rep.Body)
		}
		var out []string
		for _, r := range list {
			out = append(out, string(r))
		}
		return out
	}
	for _, l := range [][2]string{{"prompts/list", "prompts"}, {"resources/list", "resources"}, {"resources/templates/list", "resourceTemplates"}} {
		want, got := items(direct, l[0], l[1]), items(through, l[0], l[1])
		if len(want) == 0 {
			t.Errorf("%s: the server listed nothing", l[0])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s objects (-direct +gateway):\n%s", l[0], diff)
		}
	}
	for _, c := range []struct {
		method string
		params any
	}{
		{"prompts/get", map[string]any{"name": "greet", "arguments": map[string]string{"name": "Ada"}}},
		{"resources/read", map[string]any{"uri": "embedded:info"}},
		{"completion/complete", map[string]any{"ref": map[string]string{"type": "ref/prompt", "name": "greet"}, "argument": map[string]string{"name": "name", "value": "A"}}},
	} {
		want, got := direct.call(c.method, c.params), through.call(c.method, c.params)
		wantRes := string(want.msg.Result)
		if c.method == "resources/read" {
			// go-sdk v1.8.0 sends 2026-07-28's cache hints in 2025
			// sessions too; a 2025 result has neither, and the gateway
			// drops them, every other byte kept.
			wantRes = cacheHint.ReplaceAllString(wantRes, "")
		}
		if len(want.msg.Result) == 0 || wantRes != string(got.msg.Result) {
			t.Errorf("%s:\ndirect  %s\ngateway %s", c.method, want.Body, got.Body)
		}
	}
}

// TestConsoleListsPromptsAndResources: the console's Tools page shows the
// project's prompts, resources and templates (read-only).
func TestConsoleListsPromptsAndResources(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)
	page := get(t, g.url+"/ui/p/default/tools")
	for _, want := range []string{`id="prompts"`, "<code>farewell</code>", "<td>name</td>", "<code>clash:doc</code>", "<code>clash:item/{id}</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Tools page lacks %s", want)
		}
	}
}

// TestRequestStateIsBoundToItsClient: a 2026-07-28 client that declares
// sampling gets an input_required round for the upstream's request; its
// requestState is refused from another token of the same project and at
// another project's endpoint, and the client that got it finishes the
// call with it, once.
func TestRequestStateIsBoundToItsClient(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	for _, p := range []string{"alpha", "beta"} {
		admin.createProject(p)
		admin.createServer(p, "clash", map[string]any{"command": clash})
	}
	tokA, tokA2, tokB := admin.createToken("alpha", "a").Token, admin.createToken("alpha", "a2").Token, admin.createToken("beta", "b").Token
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}`
	call := func(project, token, extra string) *rpcReply {
		c := newRaw(t, g.url+"/projects/"+project+"/mcp")
		for k, v := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ask", "Authorization": "Bearer " + token} {
			c.header.Set(k, v)
		}
		return c.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"name":"q"},` + extra + meta + `}}`)
	}
	first := call("alpha", tokA, "")
	var round struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Method string `json:"method"`
		} `json:"inputRequests"`
	}
	if err := json.Unmarshal(first.msg.Result, &round); err != nil || round.ResultType != "input_required" || round.RequestState == "" || len(round.InputRequests) != 1 {
		t.Fatalf("first round: %d %s", first.Status, first.Body)
	}
	key := ""
	for k, r := range round.InputRequests {
		key = k
		if r.Method != "sampling/createMessage" {
			t.Errorf("input request %s", r.Method)
		}
	}
	answer := `"requestState":"` + round.RequestState + `","inputResponses":{"` + key + `":{"role":"assistant","model":"m","content":{"type":"text","text":"from a"}}},`
	for _, tc := range []struct{ project, token string }{{"alpha", tokA2}, {"beta", tokB}} {
		if rep := call(tc.project, tc.token, answer); rep.code() != -32602 {
			t.Errorf("requestState used by %s with another token: %d %s", tc.project, rep.Status, rep.Body)
		}
	}
	rep := call("alpha", tokA, answer)
	if rep.code() != 0 || !strings.Contains(string(rep.msg.Result), `"from a"`) || !strings.Contains(string(rep.msg.Result), `"resultType":"complete"`) {
		t.Errorf("the client's own retry: %d %s", rep.Status, rep.Body)
	}
	if rep := call("alpha", tokA, answer); rep.code() != -32602 {
		t.Errorf("a requestState used twice: %d %s", rep.Status, rep.Body)
	}
}
