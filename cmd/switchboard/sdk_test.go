package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkConnect opens a session with the official go-sdk client pinned to
// 2025-11-25: these tests are about sessions (the GET stream,
// notifications/cancelled); the SDK's default, stateless 2026-07-28, is
// tested in stateless_test.go.
func sdkConnect(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("empty result")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

func TestGoSDKClient(t *testing.T) {
	// "short" times its calls out after 300ms: the gateway's own -32603.
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}, {"short", stdioServer("short", "toolPrefix", "short_", "callTimeout", "300ms")}}, nil)
	progress := make(chan *mcp.ProgressNotificationParams, 16)
	changed := make(chan struct{}, 4)
	cs := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params },
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Errorf("negotiated %q, want 2025-11-25", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"echo", "exotic", "rpc_error", "slow", "progress", "crash"} {
		if !strings.Contains(","+strings.Join(names, ",")+",", ","+want+",") {
			t.Errorf("tool %s missing from %v", want, names)
		}
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "héllo"}})
	if err != nil || text(t, res) != "héllo" {
		t.Fatalf("echo: %v %v", res, err)
	}

	t.Run("error codes", func(t *testing.T) {
		for _, tc := range []struct {
			tool string
			args any
			code int64
		}{
			{"rpc_error", map[string]any{}, -32602},              // the upstream's own, forwarded
			{"no_such_tool", map[string]any{}, -32601},           // the gateway's: unknown tool
			{"echo", "arguments that are not an object", -32602}, // the gateway's: invalid params
			{"short_slow", map[string]any{"ms": 10000}, -32603},  // the gateway's: timed out
		} {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != tc.code {
				t.Errorf("%s: err %v, want JSON-RPC code %d", tc.tool, err, tc.code)
			}
			if tc.tool == "rpc_error" && je != nil && string(je.Data) != `{"field":"x"}` {
				t.Errorf("rpc_error data %s", je.Data)
			}
			if tc.tool == "short_slow" && je != nil && !strings.Contains(je.Message, "short") {
				t.Errorf("timeout message %q does not name the server", je.Message)
			}
		}
	})

	t.Run("progress forwarded with the client's token", func(t *testing.T) {
		p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
		p.SetProgressToken("client-token-7")
		res, err := cs.CallTool(ctx, p)
		if err != nil || text(t, res) != "done" {
			t.Fatalf("progress: %v %v", res, err)
		}
		for i := 1; i <= 3; i++ {
			select {
			case n := <-progress:
				if n.ProgressToken != "client-token-7" || n.Progress != float64(i) {
					t.Errorf("progress %d: %+v", i, n)
				}
			case <-ctx.Done():
				t.Fatalf("progress %d never arrived", i)
			}
		}
	})

	t.Run("cancellation forwarded upstream", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		p := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 60000}}
		p.SetProgressToken("slow-1")
		errc := make(chan error, 1)
		go func() {
			_, err := cs.CallTool(cctx, p)
			errc <- err
		}()
		// The fixture reports "started" once its handler runs.
		select {
		case <-progress:
		case <-ctx.Done():
			t.Fatal("slow never started")
		}
		ccancel()
		if err := <-errc; err == nil {
			t.Fatal("cancelled call succeeded")
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cancelled_count", Arguments: map[string]any{"atLeast": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := strconv.Atoi(text(t, res)); n < 1 {
			t.Fatalf("upstream saw %d cancellations", n)
		}
	})

	t.Run("list_changed reaches the client", func(t *testing.T) {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add_tool", Arguments: map[string]any{"name": "fresh"}}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no list_changed with the new tool")
			}
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tl := range lt.Tools {
				if tl.Name == "fresh" {
					return
				}
			}
		}
	})
}

// TestSlowServerDoesNotHoldTheFirstList (issue 34, item 6): a server that
// takes long to connect does not hold a client's first tools/list: the
// list comes at MCP_SERVER_LIST_WAIT with what is ready, the status says
// the slow one is connecting, and when it arrives the client is sent
// tools/list_changed and its tools are listed.
func TestSlowServerDoesNotHoldTheFirstList(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	late := map[string]any{"command": "sh", "args": []string{"-c", `while [ ! -e "$GATE" ]; do sleep 0.05; done; exec "$BIN"`},
		"env":        map[string]string{"GATE": gate, "BIN": os.Args[0], "SWITCHBOARD_FIXTURE": "stdio", "SWITCHBOARD_FIXTURE_NAME": "late"},
		"toolPrefix": "late_"}
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}, {"late", late}}, map[string]string{"MCP_SERVER_LIST_WAIT": "500ms"})
	changed := make(chan struct{}, 8)
	cs := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	names := toolNames(t, cs)
	if !has(names, "echo") || has(names, "late_echo") {
		t.Fatalf("first list %v: want up's echo and nothing of late yet", names)
	}
	api := newAPI(t, g.url, "")
	var list struct {
		Servers []struct {
			Name   string
			Status struct{ State string } `json:"status"`
		} `json:"servers"`
	}
	api.must(http.StatusOK, "GET", "/api/v1/projects/default/servers", nil, &list)
	for _, s := range list.Servers {
		if s.Name == "late" && s.Status.State != "connecting" {
			t.Fatalf("late's status is %q while it connects; want connecting", s.Status.State)
		}
	}
	for len(changed) > 0 { // what up's connect sent before the first list
		<-changed
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(opTimeout):
		t.Fatal("no tools/list_changed when the late server arrived")
	}
	if names := toolNames(t, cs); !has(names, "late_echo") {
		t.Fatalf("the list after list_changed: %v; want late_echo", names)
	}
}
