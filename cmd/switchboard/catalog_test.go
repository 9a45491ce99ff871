package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
)

// catalogGateway starts a gateway with a catalog of the fixture image:
// "longfix" (long-lived) and "callfix" (a container per call).
func catalogGateway(t *testing.T) (*gateway, *engine.Engine) {
	t.Helper()
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, mcpFixturePkg)
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	cat := fmt.Sprintf(`registry:
  longfix:
    title: Long fixture
    description: Echo and files, one container per session
    image: %q
    longLived: true
    disableNetwork: true
  callfix:
    title: Per-call fixture
    description: Echo and files, a fresh container per call
    image: %q
    disableNetwork: true
`, image, image)
	if err := os.WriteFile(file, []byte(cat), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{
		"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_CATALOG": file, "MCP_SERVER_CATALOG_WARM_POOL": "1"})
	return g, eng
}

// catalogContainersOf lists the engine's catalog containers by owner.
func catalogContainersOf(t *testing.T, eng *engine.Engine) map[string][]string {
	t.Helper()
	cs, err := eng.List(context.Background(), map[string]string{engine.LabelKind: catalog.KindCatalog})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range cs {
		out[c.Labels[engine.LabelRef]] = append(out[c.Labels[engine.LabelRef]], c.Labels[hosted.LabelServer])
	}
	return out
}

func structuredOf(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(t, res))
	}
	if err := json.Unmarshal([]byte(text(t, res)), v); err != nil {
		t.Fatalf("result %q: %v", text(t, res), err)
	}
}

// TestCatalogEndToEnd: the official go-sdk client finds a catalog server,
// adds it to its session (list_changed arrives, its tools appear only in
// that session), calls them, and the session's container is removed when
// the session ends; per-call servers run each call in a container of its
// own; a session-less request cannot add; the CLI's key=value form works.
func TestCatalogEndToEnd(t *testing.T) {
	g, eng := catalogGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 8)
	cs := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	other := sdkConnect(t, g.url+"/mcp", nil)

	listNames := func(s *mcp.ClientSession) []string {
		t.Helper()
		lt, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range lt.Tools {
			names = append(names, tool.Name)
		}
		return names
	}
	before := listNames(cs)
	for _, want := range []string{"mcp-find", "mcp-add", "mcp-remove", "echo"} {
		if !slices.Contains(before, want) {
			t.Fatalf("tools %v lack %s", before, want)
		}
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-find", Arguments: map[string]any{"query": "per call"}})
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		Servers []catalog.FoundServer `json:"servers"`
		Total   int                   `json:"total"`
	}
	structuredOf(t, res, &found)
	if found.Total != 1 || found.Servers[0].Name != "callfix" || found.Servers[0].LongLived {
		t.Fatalf("mcp-find %q = %+v, want callfix only", "per call", found)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-add", Arguments: map[string]any{"name": "longfix"}})
	if err != nil {
		t.Fatal(err)
	}
	var added catalog.AddResult
	structuredOf(t, res, &added)
	// The fixture's echo is shadowed by the project's own "up" server.
	if !added.LongLived || !slices.Contains(added.Tools, "write_file") || !slices.Contains(added.Shadowed, "echo") {
		t.Fatalf("mcp-add = %+v", added)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after mcp-add")
	}
	after := listNames(cs)
	if !slices.Contains(after, "write_file") || slices.Index(after, "write_file") < len(before) {
		t.Fatalf("tools after mcp-add %v: want write_file after the project's tools", after)
	}
	if n := strings.Count(strings.Join(after, ","), "echo"); n != 1 {
		t.Fatalf("tools after mcp-add %v: echo listed %d times", after, n)
	}
	if slices.Contains(listNames(other), "write_file") {
		t.Fatal("another session sees the tools this session added")
	}
	// Another session calling the tool by name gets the server activated
	// for itself, in a container of its own: it never reaches this
	// session's (removed again, so the rest counts one session's).
	if res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/tmp/only-in-other"}}); err != nil || !res.IsError {
		t.Fatalf("another session calling an added tool by name: %v %+v; want its own container (where the file does not exist)", err, res)
	}
	if res, err := other.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-remove", Arguments: map[string]any{"name": "longfix"}}); err != nil || res.IsError {
		t.Fatalf("mcp-remove in the other session: %v %+v", err, res)
	}
	call := func(s *mcp.ClientSession, name string, args map[string]any) string {
		t.Helper()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return text(t, res)
	}
	call(cs, "write_file", map[string]any{"path": "/tmp/note", "text": "same container"})
	if got := call(cs, "read_file", map[string]any{"path": "/tmp/note"}); got != "same container" {
		t.Fatalf("read_file = %q", got)
	}
	if owners := catalogContainersOf(t, eng); len(owners[cs.ID()]) != 1 {
		t.Fatalf("catalog containers %v, want one of this session's", owners)
	}

	// Per-call: a new container (hostname) for every call.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-add", Arguments: map[string]any{"name": "callfix"}})
	if err != nil {
		t.Fatal(err)
	}
	structuredOf(t, res, &added)
	// callfix's tools are all shadowed by longfix's (same fixture, added
	// first): the session keeps calling longfix's.
	if added.LongLived || len(added.Shadowed) != len(added.Tools) {
		t.Fatalf("mcp-add callfix = %+v", added)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-remove", Arguments: map[string]any{"name": "longfix"}})
	if err != nil || res.IsError {
		t.Fatalf("mcp-remove: %v %v", err, res)
	}
	h1 := call(cs, "read_file", map[string]any{"path": "/etc/hostname"})
	h2 := call(cs, "read_file", map[string]any{"path": "/etc/hostname"})
	if h1 == h2 {
		t.Fatalf("two per-call calls ran in the same container %q", h1)
	}

	// Errors: unknown server -32602; no session (plain POST) refused.
	var je *jsonrpc.Error
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-add", Arguments: map[string]any{"name": "nope"}}); !errors.As(err, &je) || je.Code != -32602 {
		t.Fatalf("mcp-add nope: %v, want -32602", err)
	}
	// Without a session (a plain POST), mcp-add activates for the
	// caller (its token, kept until the idle expiry); its tools are then
	// in its tools/list and called through it.
	raw := newRaw(t, g.url+"/mcp")
	if rep := raw.call("tools/call", map[string]any{"name": "mcp-add", "arguments": map[string]any{"name": "longfix"}}); rep.code() != 0 || !strings.Contains(string(rep.Body), "longfix") {
		t.Fatalf("session-less mcp-add: %s, want it added", rep.Body)
	}
	if rep := raw.call("tools/list", nil); !strings.Contains(string(rep.Body), `"write_file"`) {
		t.Fatalf("session-less tools/list after mcp-add lacks write_file: %s", rep.Body)
	}
	if rep := raw.call("tools/call", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "/etc/hostname"}}); rep.code() != 0 || strings.Contains(string(rep.Body), `"isError":true`) {
		t.Fatalf("session-less call after mcp-add: %s", rep.Body)
	}
	if rep := raw.call("tools/call", map[string]any{"name": "mcp-remove", "arguments": map[string]any{"name": "longfix"}}); rep.code() != 0 {
		t.Fatalf("session-less mcp-remove: %s", rep.Body)
	}

	// The CLI's key=value form (its own short session).
	cli := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url})
	out := cli.ok("call", "mcp-add", "name=callfix")
	if !strings.Contains(out, `"server": "callfix"`) {
		t.Fatalf("switchboard call mcp-add name=callfix printed %s", out)
	}
	if err := cli.fails("call", "mcp-find", "limit:=x"); !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("bad KEY:=JSON: %v", err)
	}

	// Ending the session removes everything bound to it.
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() (bool, string) {
		owners := catalogContainersOf(t, eng)
		for owner := range owners {
			if owner != "pool" {
				return false, fmt.Sprintf("containers still bound to sessions: %v", owners)
			}
		}
		// With no session using callfix, its warm pool drains too.
		return len(owners) == 0, fmt.Sprintf("containers left: %v", owners)
	})
	g.stop(t)
	if owners := catalogContainersOf(t, eng); len(owners) != 0 {
		t.Fatalf("containers after the gateway stopped: %v", owners)
	}
}

// TestCatalogLegacySession: a legacy SSE session (the go-sdk's SSE client)
// adds a long-lived server, sees list_changed on its stream and the tools
// in its list, and when the stream drops its container is removed.
func TestCatalogLegacySession(t *testing.T) {
	g, eng := catalogGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: g.url + "/sse"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "mcp-add", Arguments: map[string]any{"name": "longfix"}})
	if err != nil {
		t.Fatal(err)
	}
	var added catalog.AddResult
	structuredOf(t, res, &added)
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no list_changed on the legacy stream after mcp-add")
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "write_file" }) {
		t.Fatal("the legacy session's list lacks the added server's tools")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/hostname"}})
	if err != nil || res.IsError {
		t.Fatalf("read_file: %v %v", err, res)
	}
	if owners := catalogContainersOf(t, eng); len(owners) != 1 {
		t.Fatalf("containers %v, want the legacy session's one", owners)
	}
	_ = cs.Close() // drops the SSE stream: the session ends
	eventually(t, 60*time.Second, func() (bool, string) {
		owners := catalogContainersOf(t, eng)
		return len(owners) == 0, fmt.Sprintf("containers left after the stream dropped: %v", owners)
	})
}

// TestCatalogForEveryClient: a catalog tool called by its name, without
// mcp-add, works from a plain POST, from the go-sdk client at its default
// revision (2026-07-28, stateless) and pinned to 2025-11-25: per-call
// servers in a container per call, a long-lived one kept for the
// sessionless caller (a file written by one call is read by the next) in
// one container. mcp-add then a call works in both revisions, and
// list_changed reaches both: a 2025 session on its stream, a 2026-07-28
// client on its subscriptions/listen stream (again when its idle time
// removes what it added). With MCP_SERVER_CATALOG_IDLE_TIMEOUT=3s every
// container is gone once the callers are idle.
func TestCatalogForEveryClient(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, mcpFixturePkg)
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	cat := fmt.Sprintf(`registry:
  callfix: {image: %q, disableNetwork: true, tools: [{name: echo}, {name: env}]}
  longfix: {image: %q, longLived: true, disableNetwork: true, tools: [{name: write_file}, {name: read_file}]}
`, image, image)
	if err := os.WriteFile(file, []byte(cat), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_CATALOG": file,
		"MCP_SERVER_CATALOG_WARM_POOL": "1", "MCP_SERVER_CATALOG_IDLE_TIMEOUT": "3s"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	count := func(server string) int {
		n := 0
		for _, servers := range catalogContainersOf(t, eng) {
			for _, s := range servers {
				if s == server {
					n++
				}
			}
		}
		return n
	}

	raw := newRaw(t, g.url+"/mcp")
	if rep := raw.call("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "plain"}}); rep.code() != 0 || !strings.Contains(string(rep.Body), "plain") {
		t.Fatalf("plain POST of a catalog tool by name: %s", rep.Body)
	}
	connect := func(name, pv string, changed chan<- struct{}) *mcp.ClientSession {
		t.Helper()
		var opts *mcp.ClientOptions
		if changed != nil {
			opts = &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }}
		}
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if want, got := cmp.Or(pv, "2026-07-28"), cs.InitializeResult().ProtocolVersion; got != want {
			t.Fatalf("%s negotiated %s, want %s", name, got, want)
		}
		return cs
	}
	stateless := connect("e2e", "", nil)
	pinned := connect("e2e", "2025-11-25", nil)
	for name, cs := range map[string]*mcp.ClientSession{"default revision": stateless, "2025-11-25": pinned} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": name}})
		if err != nil || res.IsError || !strings.Contains(text(t, res), name) {
			t.Fatalf("%s: echo by name: %v %+v", name, err, res)
		}
	}
	p1 := text(t, mustCall(ctx, t, stateless, "env", nil))
	p2 := text(t, mustCall(ctx, t, stateless, "env", nil))
	if !strings.Contains(p1, "HOSTNAME=") || p1 == p2 {
		t.Errorf("two per-call calls answered %q and %q; want two containers", p1, p2)
	}
	// Another client (its own caller: callfix, which the first activated,
	// offers write_file too, and would serve it in a container per call).
	long := connect("e2e-long", "", nil)
	mustCall(ctx, t, long, "write_file", map[string]any{"path": "/tmp/k", "text": "kept"})
	if got := text(t, mustCall(ctx, t, long, "read_file", map[string]any{"path": "/tmp/k"})); got != "kept" {
		t.Errorf("the long-lived catalog server did not keep a sessionless caller's file: %q", got)
	}
	if n := count("longfix"); n != 1 {
		t.Errorf("%d containers of the long-lived server for one caller, want 1", n)
	}

	// mcp-add, then a call, in both revisions.
	var listening chan struct{}
	sessions := []*mcp.ClientSession{pinned}
	for _, pv := range []string{"", "2025-11-25"} {
		changed := make(chan struct{}, 8)
		cs := connect("adder", pv, changed)
		var added catalog.AddResult
		structuredOf(t, mustCall(ctx, t, cs, "mcp-add", map[string]any{"name": "longfix"}), &added)
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("revision %q: no notifications/tools/list_changed after mcp-add", pv)
		}
		lt, err := cs.ListTools(ctx, nil)
		if err != nil || !slices.ContainsFunc(lt.Tools, func(tool *mcp.Tool) bool { return tool.Name == "write_file" }) {
			t.Fatalf("revision %q: tools/list after mcp-add lacks write_file: %v", pv, err)
		}
		mustCall(ctx, t, cs, "write_file", map[string]any{"path": "/tmp/a", "text": "added " + pv})
		if got := text(t, mustCall(ctx, t, cs, "read_file", map[string]any{"path": "/tmp/a"})); got != "added "+pv {
			t.Errorf("revision %q: read_file after mcp-add = %q", pv, got)
		}
		if pv == "" {
			listening = changed
		} else {
			sessions = append(sessions, cs)
		}
	}
	// The idle time removes what the sessionless callers activated (the
	// long-lived containers, the per-call pools), and tells the listener.
	select {
	case <-listening:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed on the listen stream when the idle time removed the added server")
	}
	for _, cs := range sessions { // the 2025 sessions' go when they end
		_ = cs.Close()
	}
	eventually(t, time.Minute, func() (bool, string) {
		owners := catalogContainersOf(t, eng)
		return len(owners) == 0, fmt.Sprintf("containers left after the callers went idle: %v", owners)
	})
}

func mustCall(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("%s: %v %+v", name, err, res)
	}
	return res
}
