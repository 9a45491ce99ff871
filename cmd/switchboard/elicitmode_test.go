package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elicitServer is a go-sdk streamable HTTP server (stateful: the gateway
// speaks 2025 to it) whose tool "ask" {"mode"} sends elicitation/create
// in that mode and returns what came back: "code N" for a JSON-RPC error,
// else the action.
func elicitServer(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	type args struct {
		Mode string `json:"mode"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, a args) (*mcp.CallToolResult, any, error) {
		p := &mcp.ElicitParams{Mode: a.Mode, Message: "need input"}
		if a.Mode == "url" {
			p.URL, p.ElicitationID = "https://example.com/connect?e=1", "e1"
		} else {
			p.RequestedSchema = map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string"}}}
		}
		res, err := req.Session.Elicit(ctx, p)
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("code %d", je.Code)}}}, nil, nil
		case err != nil:
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "error " + err.Error()}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestElicitationModeTheClientDeclared: a client that declared form-mode
// elicitation only is never sent a url-mode elicitation/create: the
// upstream gets -32602 (Invalid params), what the specification has a
// client answer for a mode it did not declare, and the client's handler
// is not called. It used to get the URL (the gateway declares both modes
// to upstreams and passed every elicitation on). Form mode still reaches
// it. Both client revisions: a 2025 session and 2026-07-28 rounds.
func TestElicitationModeTheClientDeclared(t *testing.T) {
	t.Parallel()
	g := startGateway(t, [][2]any{{"asker", map[string]any{"url": elicitServer(t), "transport": "streamable-http"}}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, rev := range []string{"2025-11-25", ""} {
		var mu sync.Mutex
		var asked []string
		cs := connectRevision(t, g.url+"/mcp", "", rev, &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}},
			ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, r.Params.Mode+" "+r.Params.URL)
				mu.Unlock()
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"x": "y"}}, nil
			},
		})
		got := map[string]string{}
		for _, mode := range []string{"url", "form"} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"mode": mode}})
			if err != nil {
				t.Fatalf("client %q, %s: %v", rev, mode, err)
			}
			got[mode] = text(t, res)
		}
		if d := cmp.Diff(map[string]string{"url": "code -32602", "form": "accept"}, got); d != "" {
			t.Errorf("client %q: what the server got back (-want +got):\n%s", rev, d)
		}
		mu.Lock()
		if d := cmp.Diff([]string{"form "}, asked); d != "" {
			t.Errorf("client %q: elicitations the client was sent (-want +got):\n%s", rev, d)
		}
		mu.Unlock()
	}
}
