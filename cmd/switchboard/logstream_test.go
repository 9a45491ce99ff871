package main

//lint:file-ignore SA1019 the gateway passes logging, which 2026-07-28 deprecates (SEP-2577) but which 2025 clients and servers still use.

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// logServer is an mcp-go v1.2.1 streamable HTTP server, in 2025 only,
// whose tool "log" sends one notifications/message while it serves the
// call.
func logServer(t *testing.T) string {
	t.Helper()
	s := mcpgoserver.NewMCPServer("logger", "1", mcpgoserver.WithToolCapabilities(true), mcpgoserver.WithLogging())
	s.AddTool(mcpgo.NewTool("log", mcpgo.WithString("text")), func(ctx context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		text := req.GetString("text", "")
		if err := s.SendLogMessageToClient(ctx, mcpgo.NewLoggingMessageNotification(mcpgo.LoggingLevelWarning, "", text)); err != nil {
			return nil, err
		}
		return mcpgo.NewToolResultText("logged " + text), nil
	})
	h := mcpgoserver.NewStreamableHTTPServer(s, mcpgoserver.WithStateful(true),
		mcpgoserver.WithStreamableHTTPProtocolVersions(mcpgo.ProtocolVersion20251125, mcpgo.ProtocolVersion20250618, mcpgo.ProtocolVersion20250326))
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestLogMessagesOnTheCallsStream: a log message a server sends while it
// serves a call reaches a 2025 client that keeps no GET stream open
// (mcp-go's default) through the gateway as it does directly: on the
// call's own response stream, before the result. It used to go on the
// session's GET stream, which such a client never opens, so it got none.
func TestLogMessagesOnTheCallsStream(t *testing.T) {
	t.Parallel()
	up := logServer(t)
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{
		{"up", map[string]any{"url": up + "/mcp", "transport": "streamable-http"}},
		{"clash", map[string]any{"command": clash, "toolPrefix": "clash_"}},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// messages calls tool on url as an mcp-go 2025-11-25 client at level
	// info and returns the data of the log messages that arrived before
	// the result.
	messages := func(url, tool string, args map[string]any) []string {
		t.Helper()
		tr, err := transport.NewStreamableHTTP(url)
		if err != nil {
			t.Fatal(err)
		}
		c := mcpgoclient.NewClient(tr, mcpgoclient.WithProtocolVersion(mcpgo.ProtocolVersion20251125))
		defer c.Close()
		var mu sync.Mutex
		var got []string
		c.OnNotification(func(n mcpgo.JSONRPCNotification) {
			if n.Method == "notifications/message" {
				mu.Lock()
				got = append(got, fmt.Sprint(n.Params.AdditionalFields["data"]))
				mu.Unlock()
			}
		})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcpgo.InitializeRequest{}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetLevel(ctx, mcpgo.SetLevelRequest{Params: mcpgo.SetLevelParams{Level: mcpgo.LoggingLevelInfo}}); err != nil {
			t.Fatal(err)
		}
		if res, err := c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}}); err != nil || res.IsError {
			t.Fatalf("%s: %v %v", tool, res, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	want := messages(up+"/mcp", "log", map[string]any{"text": "hello"})
	if d := cmp.Diff([]string{"hello"}, want); d != "" {
		t.Fatalf("directly (-want +got):\n%s", d)
	}
	// up over streamable HTTP, clash (go-sdk) over stdio.
	for tool, args := range map[string]map[string]any{"log": {"text": "hello"}, "clash_log": {"name": "hello"}} {
		if d := cmp.Diff(want, messages(g.url+"/mcp", tool, args)); d != "" {
			t.Errorf("%s through the gateway (-direct +gateway):\n%s", tool, d)
		}
	}
}
