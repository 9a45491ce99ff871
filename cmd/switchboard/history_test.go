package main

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestToolCallHistory: calls through a project's endpoint are in that
// project's history, with server, tool, outcome and code, and not in any
// other project's; the filters and paging of the history API work.
func TestToolCallHistory(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	api.createProject("hist")
	api.createProject("other")
	api.createServer("hist", "h", fixture("h", nil))
	api.createServer("other", "o", fixture("o", nil))
	tok := api.createToken("hist", "history client").Token

	start := time.Now().UTC()
	cs, _ := openMCP(t, g.url+"/projects/hist/mcp", tok)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	// "&", "<" and ">" as the client sent them, whoever re-encodes them
	// (the call log's redaction of api_key, the CLI and the console write
	// them HTML-escaped, \u0026...): the history shows the characters.
	for _, args := range []map[string]any{{"text": "one"}, {"text": "two"}, {"text": "a&b<c>", "api_key": "k"}} {
		callText(t, cs, "echo", args)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "tool_error", Arguments: map[string]any{}}); err != nil || !res.IsError {
		t.Fatalf("tool_error: %v %v", res, err)
	}
	for _, name := range []string{"rpc_error", "no_such_tool"} {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err == nil {
			t.Fatalf("%s succeeded", name)
		}
	}
	oc, _ := openMCP(t, g.url+"/projects/other/mcp", adminToken)
	callText(t, oc, "echo", map[string]any{"text": "elsewhere"})

	// The call log writes in batches: wait until all six are visible.
	all := api.waitCalls("hist", "", 6)
	if len(all) != 6 {
		t.Fatalf("%d records, want 6: %+v", len(all), all)
	}
	if !slices.ContainsFunc(all, func(c callOut) bool { return bytes.Contains(c.Arguments, []byte(`"a&b<c>"`)) }) {
		t.Errorf("no record with the text a&b<c> as it was sent: %+v", all)
	}
	type key struct{ server, tool, outcome string }
	count := map[key]int{}
	for _, c := range all {
		count[key{c.Server, c.Tool, c.Outcome}]++
		if c.Session != cs.ID() {
			t.Errorf("record %d: session %q, want %q", c.ID, c.Session, cs.ID())
		}
		if c.StartedAt.Before(start.Add(-time.Second)) || c.StartedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("record %d started at %s, outside the test", c.ID, c.StartedAt)
		}
		if bytes.Contains(c.Arguments, []byte(`\u00`)) {
			t.Errorf("record %d: arguments %s hold an HTML-safe escape", c.ID, c.Arguments)
		}
		switch c.Tool {
		case "rpc_error":
			if c.Code != -32602 {
				t.Errorf("rpc_error code %d, want -32602", c.Code)
			}
		case "no_such_tool":
			if c.Code != -32601 {
				t.Errorf("unknown tool code %d, want -32601", c.Code)
			}
		}
	}
	want := map[key]int{
		{"h", "echo", "ok"}: 3, {"h", "tool_error", "tool_error"}: 1,
		{"h", "rpc_error", "error"}: 1, {"", "no_such_tool", "error"}: 1,
	}
	if !maps.Equal(want, count) {
		t.Errorf("records by (server, tool, outcome): %v, want %v", count, want)
	}
	for i := 1; i < len(all); i++ {
		if all[i].StartedAt.After(all[i-1].StartedAt) {
			t.Errorf("not newest first: %+v", all)
		}
	}
	histIDs := ids(all)

	t.Run("filters", func(t *testing.T) {
		api := api.on(t)
		since := url.QueryEscape(all[len(all)-1].StartedAt.Format(time.RFC3339Nano))
		until := url.QueryEscape(all[0].StartedAt.Format(time.RFC3339Nano))
		for _, tt := range []struct {
			query string
			n     int
		}{
			{"?tool=echo", 3},
			{"?server=h", 5},
			{"?outcome=ok", 3},
			{"?outcome=tool_error", 1},
			{"?outcome=error", 2},
			{"?server=h&outcome=error", 1},
			{"?tool=echo&outcome=error", 0},
			{"?server=o", 0},
			{"?since=" + since, 6}, // inclusive
			{"?until=" + until, 5}, // exclusive
			{"?since=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)), 0},
		} {
			page := api.toolCalls("hist", tt.query)
			if len(page.Calls) != tt.n {
				t.Errorf("%s: %d records, want %d", tt.query, len(page.Calls), tt.n)
			}
			for _, c := range page.Calls {
				if !slices.Contains(histIDs, c.ID) {
					t.Errorf("%s: record %d is not one of this project's", tt.query, c.ID)
				}
			}
		}
		for _, q := range []string{"?outcome=fine", "?limit=0", "?limit=1001", "?since=yesterday", "?cursor=garbage"} {
			api.fails(http.StatusBadRequest, "invalid", "GET", "/api/v1/projects/hist/tool-calls"+q, nil)
		}
		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/nope/tool-calls", nil)
	})

	t.Run("paging", func(t *testing.T) {
		api := api.on(t)
		var got []int64
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 6 {
				t.Fatalf("paging does not end: %v", got)
			}
			page := api.toolCalls("hist", "?limit=4&cursor="+url.QueryEscape(cursor))
			if len(page.Calls) > 4 {
				t.Fatalf("page of %d, limit 4", len(page.Calls))
			}
			got = append(got, ids(page.Calls)...)
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
		if !slices.Equal(got, histIDs) {
			t.Errorf("paged ids %v, want %v (one listing)", got, histIDs)
		}
	})

	t.Run("the other project's history is its own", func(t *testing.T) {
		api := api.on(t)
		others := api.waitCalls("other", "", 1)
		if len(others) != 1 || others[0].Server != "o" || others[0].Tool != "echo" || others[0].Session != oc.ID() {
			t.Errorf("other's history: %+v", others)
		}
		for _, c := range others {
			if slices.Contains(histIDs, c.ID) {
				t.Errorf("record %d in both histories", c.ID)
			}
		}
		// A project token cannot read the other project's history.
		api.as(tok).fails(http.StatusForbidden, "forbidden", "GET", "/api/v1/projects/other/tool-calls", nil)
		if page := api.as(tok).toolCalls("hist", ""); len(page.Calls) != 6 {
			t.Errorf("the project's own token reads %d records, want 6", len(page.Calls))
		}
	})
}

func ids(calls []callOut) []int64 {
	out := make([]int64, len(calls))
	for i, c := range calls {
		out[i] = c.ID
	}
	return out
}
