package main

//lint:file-ignore SA1019 the gateway passes logging, which 2026-07-28 deprecates (SEP-2577) but which 2025 clients and servers still use.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpgoclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// TestLogMessagesOnTheCallsStream: a log message a server sends while it
// serves a call reaches a 2025 client that keeps no GET stream open
// (mcp-go's default) through the gateway as it does directly: on the
// call's own response stream, before the result. It used to go on the
// session's GET stream, which such a client never opens, so it got none.
//
// The upstreams are the go-sdk clash server over streamable HTTP and over
// stdio: go-sdk sends a request's messages on that request's stream. (The
// issue's mcp-go v1.2.1 server sends them on the session's GET stream
// whenever one is open, as the gateway's is, and on neither at times with
// none: where it sends them is not deterministic, so it cannot show
// which stream the gateway uses.)
func TestLogMessagesOnTheCallsStream(t *testing.T) {
	t.Parallel()
	_, clash := fixtures(t)
	up := httpFixture(t, clash)
	g := startGateway(t, [][2]any{
		{"up", map[string]any{"url": up, "transport": "streamable-http"}},
		{"clash", map[string]any{"command": clash, "toolPrefix": "clash_"}},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// messages calls tool on url as an mcp-go 2025-11-25 client at level
	// info and returns the data of the log messages it got, waiting (up to
	// a bound) for want of them: mcp-go hands notifications to its
	// handler on a goroutine of its own, so one the server sent before
	// the result can reach the handler after CallTool returned.
	messages := func(url, tool string, args map[string]any, want int) []string {
		t.Helper()
		tr, err := transport.NewStreamableHTTP(url)
		if err != nil {
			t.Fatal(err)
		}
		c := mcpgoclient.NewClient(tr, mcpgoclient.WithProtocolVersion(mcpgo.ProtocolVersion20251125))
		defer c.Close()
		var mu sync.Mutex
		var got []string
		arrived := make(chan struct{}, 16)
		c.OnNotification(func(n mcpgo.JSONRPCNotification) {
			if n.Method == "notifications/message" {
				mu.Lock()
				got = append(got, fmt.Sprint(n.Params.AdditionalFields["data"]))
				mu.Unlock()
				arrived <- struct{}{}
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
		bound := time.After(10 * time.Second)
		for n := 0; n < want; n++ {
			select {
			case <-arrived:
			case <-bound:
				n = want // what arrived is compared below
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	want := messages(up, "log", map[string]any{"name": "hello"}, 1)
	if d := cmp.Diff([]string{"hello"}, want); d != "" {
		t.Fatalf("directly (-want +got):\n%s", d)
	}
	// up over streamable HTTP, clash (go-sdk) over stdio.
	for tool, args := range map[string]map[string]any{"log": {"name": "hello"}, "clash_log": {"name": "hello"}} {
		if d := cmp.Diff(want, messages(g.url+"/mcp", tool, args, len(want))); d != "" {
			t.Errorf("%s through the gateway (-direct +gateway):\n%s", tool, d)
		}
	}
}
