package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// TestClientAndUpstreamRevisions: the client's revision and each
// upstream's are independent. A go-sdk client in 2026-07-28 (its default)
// and one pinned to 2025-11-25 call a go-sdk upstream in stateless
// 2026-07-28 mode and one in stateful 2025 mode; every call works, the
// same call returns the same result bytes whichever revision the client or
// the upstream speaks (apart from the client-revision bytes docs/endpoints.md
// lists), the client's protocol _meta never reaches an upstream while its
// own keys and progress token do, and status says which revision each
// upstream speaks.
func TestClientAndUpstreamRevisions(t *testing.T) {
	t.Parallel()
	s26 := httptest.NewServer(mcptest.StatelessHandler(mcptest.Options{Name: "s26"}))
	s25 := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "s25"}))
	t.Cleanup(s26.Close)
	t.Cleanup(s25.Close)
	g := startGateway(t, [][2]any{
		{"s26", map[string]any{"url": s26.URL, "transport": "streamable-http", "toolPrefix": "s26_"}},
		{"s25", map[string]any{"url": s25.URL, "transport": "streamable-http", "toolPrefix": "s25_"}},
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// results[client revision][upstream] holds every call's result.
	results := map[string]map[string][]map[string]any{}
	for _, rev := range []string{"", "2025-11-25"} {
		progress := make(chan *mcp.ProgressNotificationParams, 16)
		cs := connectRevision(t, g.url+"/mcp", "", rev, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { progress <- r.Params },
		})
		results[rev] = map[string][]map[string]any{}
		for _, up := range []string{"s26", "s25"} {
			name := func(tool string) string { return up + "_" + tool }
			for _, call := range []mcp.CallToolParams{
				{Name: name("echo"), Arguments: map[string]any{"text": "héllo"}},
				{Name: name("exotic"), Arguments: map[string]any{"id": "x1"}},
				{Name: name("tool_error"), Arguments: map[string]any{}},
				{Name: name("meta"), Arguments: map[string]any{}, Meta: mcp.Meta{"user/key": "kept"}},
			} {
				res, err := cs.CallTool(ctx, &call)
				if err != nil {
					t.Fatalf("client %q, %s: %v", rev, call.Name, err)
				}
				results[rev][up] = append(results[rev][up], revisionBytes(t, res))
				if call.Name != name("meta") {
					continue
				}
				got := text(t, res)
				if !strings.Contains(got, `"user/key":"kept"`) || strings.Contains(got, `"e2e"`) {
					t.Errorf("client %q: upstream %s saw _meta %s: want the user key and none of the client's protocol keys", rev, up, got)
				}
				hop := strings.Contains(got, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`) && strings.Contains(got, `"switchboard"`)
				if up == "s26" && !hop || up == "s25" && strings.Contains(got, "io.modelcontextprotocol/") {
					t.Errorf("client %q: upstream %s saw _meta %s: want the gateway's own protocol keys on the 2026 hop only", rev, up, got)
				}
			}

			p := &mcp.CallToolParams{Name: name("progress"), Arguments: map[string]any{"steps": 2}}
			p.SetProgressToken("client-token-" + up)
			if res, err := cs.CallTool(ctx, p); err != nil || text(t, res) != "done" {
				t.Fatalf("client %q, %s: %v %v", rev, p.Name, res, err)
			}
			for i := 1; i <= 2; i++ {
				select {
				case n := <-progress:
					if n.ProgressToken != "client-token-"+up || n.Progress != float64(i) {
						t.Errorf("client %q, %s: progress %d: %+v", rev, up, i, n)
					}
				case <-ctx.Done():
					t.Fatalf("client %q, %s: progress %d never arrived", rev, up, i)
				}
			}

			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name("rpc_error"), Arguments: map[string]any{}})
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32602 || string(je.Data) != `{"field":"x"}` {
				t.Errorf("client %q, %s rpc_error: %v, want -32602 with the upstream's data", rev, up, err)
			}
		}
	}
	for _, up := range []string{"s26", "s25"} {
		if d := cmp.Diff(results["2025-11-25"][up], results[""][up]); d != "" {
			t.Errorf("upstream %s: results differ by client revision (-2025 +2026):\n%s", up, d)
		}
	}
	// The meta tool's text names the hop, so it legitimately differs by
	// upstream revision; every other result may not.
	for _, rev := range []string{"", "2025-11-25"} {
		a, b := results[rev]["s26"], results[rev]["s25"]
		if d := cmp.Diff(b[:3], a[:3]); d != "" {
			t.Errorf("client %q: results differ by upstream revision (-2025 +2026):\n%s", rev, d)
		}
	}

	resp, err := http.Get(g.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Upstreams []struct{ Name, Protocol string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range st.Upstreams {
		got[u.Name] = u.Protocol
	}
	if d := cmp.Diff(map[string]string{"s26": "2026-07-28", "s25": "2025-06-18"}, got); d != "" {
		t.Errorf("status protocol per upstream (-want +got):\n%s", d)
	}
}
