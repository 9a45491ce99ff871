package main

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/store/postgres"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestCallLog: every call that got a response is in the store after a
// graceful shutdown, with secrets redacted, on both stores.
func TestCallLog(t *testing.T) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			env := map[string]string{}
			if kind == "postgres" {
				env["MCP_SERVER_DATABASE_URL"] = pgtest.NewDB(t)
			}
			g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, env)
			c := newRaw(t, g.url+"/mcp")
			c.initialize()
			c.toolText("echo", map[string]any{"text": "hello", "api_key": "sk-live-123"})
			c.call("tools/call", map[string]any{"name": "rpc_error", "arguments": map[string]any{}})
			c.call("tools/call", map[string]any{"name": "missing_tool"})
			g.stop(t)

			ctx := context.Background()
			var st switchboard.Store
			var err error
			if kind == "postgres" {
				st, err = postgres.Open(ctx, env["MCP_SERVER_DATABASE_URL"])
			} else {
				st, err = sqlite.Open(ctx, g.dataDir)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			page, err := st.ListToolCalls(ctx, switchboard.ToolCallFilter{ProjectID: "default"})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]switchboard.ToolCallRecord{}
			for _, r := range page.Calls {
				got[r.Tool] = r
			}
			if len(page.Calls) != 3 {
				t.Fatalf("%d records, want 3: %+v", len(page.Calls), page.Calls)
			}
			echo := got["echo"]
			if echo.Outcome != switchboard.OutcomeOK || echo.Server != "up" || echo.Session != c.session {
				t.Errorf("echo record %+v", echo)
			}
			if strings.Contains(string(echo.Arguments), "sk-live-123") || !strings.Contains(string(echo.Arguments), `"hello"`) {
				t.Errorf("echo arguments %s: secret not redacted or text lost", echo.Arguments)
			}
			if r := got["rpc_error"]; r.Outcome != switchboard.OutcomeError || r.Code != -32602 {
				t.Errorf("rpc_error record %+v", r)
			}
			if r := got["missing_tool"]; r.Outcome != switchboard.OutcomeError || r.Code != -32601 || r.Server != "" {
				t.Errorf("unknown tool record %+v", r)
			}
		})
	}
}
