package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"
)

// resourceServer is an mcp-go v1.2.1 streamable HTTP server with one
// text resource, uri, whose 2026-07-28 reads carry the cache hints
// ttlMs 60000 and cacheScope public; pinned to the 2025 revisions when
// legacy is set.
func resourceServer(t *testing.T, uri string, legacy bool) string {
	t.Helper()
	s := mcpgoserver.NewMCPServer("res", "1", mcpgoserver.WithResourceCapabilities(false, true),
		mcpgoserver.WithToolCapabilities(false), mcpgoserver.WithCacheHints(60000, mcpgo.CacheScopePublic))
	s.AddTool(mcpgo.NewTool("noop_"+uri[len("test://"):]), func(context.Context, mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText("ok"), nil
	})
	s.AddResource(mcpgo.NewResource(uri, "r", mcpgo.WithMIMEType("text/plain")),
		func(context.Context, mcpgo.ReadResourceRequest) ([]mcpgo.ResourceContents, error) {
			return []mcpgo.ResourceContents{mcpgo.TextResourceContents{URI: uri, MIMEType: "text/plain", Text: "contents of " + uri}}, nil
		})
	opts := []mcpgoserver.StreamableHTTPOption{mcpgoserver.WithStateful(true)}
	if legacy {
		opts = append(opts, mcpgoserver.WithStreamableHTTPProtocolVersions(mcpgo.ProtocolVersion20251125, mcpgo.ProtocolVersion20250618, mcpgo.ProtocolVersion20250326))
	}
	srv := httptest.NewServer(mcpgoserver.NewStreamableHTTPServer(s, opts...))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestReadResultShapeFollowsTheClient: a resources/read result looks as
// the client's revision says, whichever revision the upstream speaks. A
// 2025 client gets no cache hints from a 2026-07-28 upstream (they used
// to pass through: 2026-only members in a 2025 result), the same bytes
// as reading that server directly in 2025; a 2026-07-28 client gets the
// members its revision requires from a 2025 upstream (ttlMs 0 and
// cacheScope private, which it used to lose) and a 2026 upstream's own
// hints unchanged.
func TestReadResultShapeFollowsTheClient(t *testing.T) {
	t.Parallel()
	up26, up25 := resourceServer(t, "test://new", false), resourceServer(t, "test://old", true)
	g := startGateway(t, [][2]any{
		{"new", map[string]any{"url": up26, "transport": "streamable-http"}},
		{"old", map[string]any{"url": up25, "transport": "streamable-http"}},
	}, nil)

	read2025 := func(url, uri string) map[string]json.RawMessage {
		t.Helper()
		c := newRaw(t, url)
		c.initialize()
		rep := c.call("resources/read", map[string]any{"uri": uri})
		var res map[string]json.RawMessage
		if err := json.Unmarshal(rep.msg.Result, &res); err != nil {
			t.Fatalf("2025 read of %s: %d %s", uri, rep.Status, rep.Body)
		}
		return res
	}
	read2026 := func(uri string) map[string]json.RawMessage {
		t.Helper()
		c := newRaw(t, g.url+"/mcp")
		for k, v := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": uri} {
			c.header.Set(k, v)
		}
		rep := c.post(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"` + uri + `","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		var res map[string]json.RawMessage
		if err := json.Unmarshal(rep.msg.Result, &res); err != nil {
			t.Fatalf("2026 read of %s: %d %s", uri, rep.Status, rep.Body)
		}
		return res
	}
	hints := func(res map[string]json.RawMessage) map[string]string {
		out := map[string]string{}
		for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
			if v, ok := res[k]; ok {
				out[k] = string(v)
			}
		}
		return out
	}

	for _, uri := range []string{"test://new", "test://old"} {
		if d := cmp.Diff(map[string]string{}, hints(read2025(g.url+"/mcp", uri))); d != "" {
			t.Errorf("2025 client, %s (-want +got):\n%s", uri, d)
		}
	}
	if d := cmp.Diff(read2025(up26, "test://new"), read2025(g.url+"/mcp", "test://new")); d != "" {
		t.Errorf("2025 client, 2026 upstream: (-direct +gateway):\n%s", d)
	}
	for uri, want := range map[string]map[string]string{
		"test://new": {"resultType": `"complete"`, "ttlMs": "60000", "cacheScope": `"public"`},
		"test://old": {"resultType": `"complete"`, "ttlMs": "0", "cacheScope": `"private"`},
	} {
		if d := cmp.Diff(want, hints(read2026(uri))); d != "" {
			t.Errorf("2026 client, %s (-want +got):\n%s", uri, d)
		}
	}
}
