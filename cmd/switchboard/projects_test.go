package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestProjectIsolation: two projects with their own servers and tokens,
// with an admin token configured. Each project's endpoint serves its own
// tools only; a project token reaches its own project and nothing else
// (403), no token reaches nothing (401), the admin token reaches both; a
// session belongs to the token that opened it; a token revoked through
// the API stops working at the next request.
func TestProjectIsolation(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "E2E_HOST_ONLY": hostOnlyValue})
	admin := newAPI(t, g.url, adminToken)
	for _, p := range []string{"alpha", "beta"} {
		admin.createProject(p)
		admin.createServer(p, p+"-srv", fixture(p, nil))
	}
	tokA := admin.createToken("alpha", "client a").Token
	tokB := admin.createToken("beta", "client b").Token
	mcpA, mcpB := g.url+"/projects/alpha/mcp", g.url+"/projects/beta/mcp"

	t.Run("each project lists only its own tools", func(t *testing.T) {
		admin := admin.on(t)
		a, _ := openMCP(t, mcpA, tokA)
		b, _ := openMCP(t, mcpB, tokB)
		ta, tb := toolNames(t, a), toolNames(t, b)
		if !has(ta, "alpha_t0000") || has(ta, "beta_t0000") {
			t.Errorf("alpha's tools: %v", ta)
		}
		if !has(tb, "beta_t0000") || has(tb, "alpha_t0000") {
			t.Errorf("beta's tools: %v", tb)
		}
		if got := callText(t, a, "alpha_t0000", map[string]any{"k": "v"}); got != `{"k":"v"}` {
			t.Errorf("alpha_t0000 returned %q", got)
		}
		// The API sees the same catalogs.
		var tools struct {
			Tools []struct{ Name, Server string }
		}
		admin.as(tokB).must(http.StatusOK, "GET", "/api/v1/projects/beta/tools", nil, &tools)
		for _, tl := range tools.Tools {
			if tl.Server != "beta-srv" || strings.HasPrefix(tl.Name, "alpha") {
				t.Errorf("beta's API tool list has %+v", tl)
			}
		}
	})

	t.Run("a project token reaches only its project", func(t *testing.T) {
		admin := admin.on(t)
		refused(t, mcpB, tokA, http.StatusForbidden)
		refused(t, mcpA, tokB, http.StatusForbidden)
		refused(t, g.url+"/mcp", tokA, http.StatusForbidden) // the default project
		a := admin.as(tokA)
		a.must(http.StatusOK, "GET", "/api/v1/projects/alpha/servers", nil, nil)
		a.fails(http.StatusForbidden, "forbidden", "GET", "/api/v1/projects/beta/servers", nil)
		a.fails(http.StatusForbidden, "forbidden", "GET", "/api/v1/projects/beta/tool-calls", nil)
		a.fails(http.StatusForbidden, "forbidden", "PUT", "/api/v1/projects/beta/secrets/X", map[string]any{"value": "v"})
		// Admin actions stay admin-only, even on its own project.
		a.fails(http.StatusForbidden, "forbidden", "GET", "/api/v1/projects", nil)
		a.fails(http.StatusForbidden, "forbidden", "POST", "/api/v1/projects/alpha/tokens", map[string]any{"name": "more"})
		a.fails(http.StatusForbidden, "forbidden", "POST", "/api/v1/projects/alpha/servers",
			map[string]any{"name": "sneaky", "config": fixture("sneaky", nil)})
	})

	t.Run("no token or a bad one is 401", func(t *testing.T) {
		admin := admin.on(t)
		for _, tok := range []string{"", "sbt_" + strings.Repeat("A", 43), "not-a-token"} {
			refused(t, mcpA, tok, http.StatusUnauthorized)
			refused(t, g.url+"/mcp", tok, http.StatusUnauthorized)
			admin.as(tok).fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/projects/alpha/servers", nil)
			admin.as(tok).fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/projects", nil)
		}
		// The OpenAPI document is public.
		admin.as("").must(http.StatusOK, "GET", "/api/v1/openapi.json", nil, nil)
	})

	t.Run("the admin token reaches both", func(t *testing.T) {
		admin := admin.on(t)
		for _, u := range []string{mcpA, mcpB} {
			cs, _ := openMCP(t, u, adminToken)
			if len(toolNames(t, cs)) == 0 {
				t.Errorf("%s: no tools for the admin", u)
			}
		}
		admin.must(http.StatusOK, "GET", "/api/v1/projects/beta/servers", nil, nil)
	})

	t.Run("a session belongs to the token that opened it", func(t *testing.T) {
		admin := admin.on(t)
		cs, b := openMCPSession(t, mcpA, tokA)
		toolNames(t, cs)
		b.set(adminToken)
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, err := cs.ListTools(ctx, nil); err == nil || b.lastStatus() != http.StatusForbidden {
			t.Fatalf("admin token on token A's session: err %v, HTTP %d, want 403", err, b.lastStatus())
		}
		// Nor may another token of the same project take it over.
		tokA2 := admin.createToken("alpha", "client a2").Token
		cs2, b2 := openMCPSession(t, mcpA, tokA)
		b2.set(tokA2)
		if _, err := cs2.ListTools(ctx, nil); err == nil || b2.lastStatus() != http.StatusForbidden {
			t.Fatalf("second token of the project on token A's session: err %v, HTTP %d, want 403", err, b2.lastStatus())
		}
	})

	t.Run("a project token cannot read the gateway's environment", func(t *testing.T) {
		admin := admin.on(t)
		// A remote server that a project token may add, pointed at a
		// recorder, asking for a variable of the gateway's environment.
		seen := &testenv.Buffer{}
		fix := mcptest.StreamableHandler(mcptest.Options{Name: "recorded"})
		rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(seen, "%s %s\n", r.URL, r.Header)
			fix.ServeHTTP(w, r)
		}))
		defer rec.Close()
		a := admin.as(tokA)
		a.createServer("alpha", "exfil", map[string]any{"url": rec.URL + "/mcp?v=${E2E_HOST_ONLY}",
			"headers": map[string]string{"X-Leak": "${E2E_HOST_ONLY}"}, "toolPrefix": "exfil_"})
		cs, _ := openMCP(t, mcpA, tokA)
		if names := toolNames(t, cs); has(names, "exfil_echo") {
			t.Errorf("the server resolved the gateway's variable and connected: %v", names)
		}
		if strings.Contains(seen.String(), hostOnlyValue) {
			t.Errorf("a server added with a project token was sent the gateway's environment:\n%s", seen.String())
		}
		st := a.getServer("alpha", "exfil").Status
		if st == nil || st.State != "invalid" || !strings.Contains(st.LastError, "E2E_HOST_ONLY") {
			t.Errorf("status of a remote server using the gateway's environment: %+v", st)
		}
		a.must(http.StatusNoContent, "DELETE", "/api/v1/projects/alpha/servers/exfil", nil, nil)
		// Through a project secret of that name, it works.
		a.putSecret("alpha", "E2E_HOST_ONLY", "project-value")
		a.createServer("alpha", "exfil", map[string]any{"url": rec.URL + "/mcp?v=${E2E_HOST_ONLY}", "toolPrefix": "exfil_"})
		if names := toolNames(t, cs); !has(names, "exfil_echo") || !strings.Contains(seen.String(), "v=project-value") {
			t.Errorf("a remote server with a project secret: tools %v, requests:\n%s", names, seen.String())
		}
		a.must(http.StatusNoContent, "DELETE", "/api/v1/projects/alpha/servers/exfil", nil, nil)
		a.must(http.StatusNoContent, "DELETE", "/api/v1/projects/alpha/secrets/E2E_HOST_ONLY", nil, nil)
		// A stdio server, which only the admin may configure, still reads
		// the gateway's environment.
		admin.createServer("alpha", "hosted", fixture("hosted", map[string]string{"FROM_HOST": "${E2E_HOST_ONLY}"}, "toolPrefix", "hosted_"))
		if out := callText(t, cs, "hosted_env", nil); !strings.Contains(out, "FROM_HOST="+hostOnlyValue) {
			t.Errorf("an admin's stdio server lost the gateway's environment:\n%s", out)
		}
		admin.must(http.StatusNoContent, "DELETE", "/api/v1/projects/alpha/servers/hosted", nil, nil)
	})

	t.Run("a legacy SSE session belongs to its token too", func(t *testing.T) {
		endpoint := legacyEndpoint(t, g.url+"/projects/alpha/sse", tokA)
		if !strings.HasPrefix(endpoint, "/projects/alpha/message?sessionId=") {
			t.Fatalf("endpoint %q", endpoint)
		}
		post := func(path, token string) int {
			req, _ := http.NewRequest(http.MethodPost, g.url+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		if got := post(endpoint, adminToken); got != http.StatusForbidden {
			t.Errorf("admin token on token A's legacy session: HTTP %d, want 403", got)
		}
		if got := post(strings.Replace(endpoint, "/alpha/", "/beta/", 1), tokB); got != http.StatusNotFound {
			t.Errorf("alpha's legacy session on beta's endpoint: HTTP %d, want 404", got)
		}
		if got := post(endpoint, tokA); got != http.StatusAccepted {
			t.Errorf("token A on its own legacy session: HTTP %d, want 202", got)
		}
	})

	t.Run("a revoked token is 401 at the next request", func(t *testing.T) {
		admin := admin.on(t)
		tok := admin.createToken("alpha", "short-lived")
		cs, b := openMCP(t, mcpA, tok.Token)
		toolNames(t, cs)
		as := admin.as(tok.Token)
		as.must(http.StatusOK, "GET", "/api/v1/projects/alpha/servers", nil, nil) // cached as valid now

		var revoked tokenOut
		admin.must(http.StatusOK, "DELETE", "/api/v1/projects/alpha/tokens/"+tok.ID, nil, &revoked)
		if revoked.RevokedAt == nil {
			t.Fatalf("revocation answered %+v", revoked)
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil || b.lastStatus() != http.StatusUnauthorized {
			t.Fatalf("open session after revocation: err %v, HTTP %d, want 401", err, b.lastStatus())
		}
		as.fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/projects/alpha/servers", nil)
		refused(t, mcpA, tok.Token, http.StatusUnauthorized)
		// The project's other tokens are unaffected.
		cs2, _ := openMCP(t, mcpA, tokA)
		toolNames(t, cs2)
	})
}

// TestServerCRUD: servers are created, read, listed, changed and deleted
// through the API; changing one server's config reconnects that server
// only; disabling a server takes its tools away and enabling brings them
// back; bad input is 400 naming the problem, a taken name 409, an unknown
// project 404.
func TestServerCRUD(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	api.createProject("crud")
	const base = "/api/v1/projects/crud/servers"
	one := api.createServer("crud", "one", fixture("one", nil, "toolPrefix", "one_"))
	if one.ID == "" || one.ProjectID != "crud" || one.Transport != "stdio" || !one.Enabled || one.ProductID != "" {
		t.Fatalf("created %+v", one)
	}
	api.createServer("crud", "two", fixture("two", nil, "toolPrefix", "two_"))

	if got := api.getServer("crud", "one"); got.ID != one.ID || got.Name != "one" || !strings.Contains(string(got.Config), `"toolPrefix"`) {
		t.Errorf("GET one: %+v", got)
	}
	list := api.listServers("crud")
	if len(list) != 2 || list[0].Name != "one" || list[1].Name != "two" {
		t.Fatalf("list: %+v", list)
	}

	cs, _ := openMCP(t, g.url+"/projects/crud/mcp", adminToken)
	pid1, pid2 := callText(t, cs, "one_pid", nil), callText(t, cs, "two_pid", nil)

	t.Run("a config change reconnects that server only", func(t *testing.T) {
		api := api.on(t)
		var patched serverOut
		api.must(http.StatusOK, "PATCH", base+"/one",
			map[string]any{"config": fixture("one", map[string]string{"ADDED": "yes"}, "toolPrefix", "one_")}, &patched)
		if patched.ID != one.ID || !strings.Contains(string(patched.Config), `"ADDED"`) || patched.UpdatedAt == one.UpdatedAt {
			t.Fatalf("PATCH answered %+v", patched)
		}
		if got := callText(t, cs, "one_pid", nil); got == pid1 {
			t.Errorf("one still runs pid %s after its config changed", got)
		}
		if env := callText(t, cs, "one_env", nil); !strings.Contains(env, "ADDED=yes") {
			t.Errorf("one's new environment lacks ADDED=yes:\n%s", env)
		}
		if got := callText(t, cs, "two_pid", nil); got != pid2 {
			t.Errorf("two restarted (pid %s -> %s) by a change to one", pid2, got)
		}
		eventually(t, opTimeout, func() (bool, string) { return processGone(pid1), "one's old process " + pid1 + " still exists" })
		// A description-only change connects nothing anew.
		pid1 = callText(t, cs, "one_pid", nil)
		api.must(http.StatusOK, "PATCH", base+"/one", map[string]any{"description": "just words"}, nil)
		if got := callText(t, cs, "one_pid", nil); got != pid1 {
			t.Errorf("a description change restarted one: pid %s -> %s", pid1, got)
		}
	})

	t.Run("disable and enable", func(t *testing.T) {
		api := api.on(t)
		var s serverOut
		api.must(http.StatusOK, "PATCH", base+"/two", map[string]any{"enabled": false}, &s)
		if s.Enabled || s.Status != nil {
			t.Errorf("disabled server: enabled %v, status %+v", s.Enabled, s.Status)
		}
		names := toolNames(t, cs)
		if has(names, "two_echo") || !has(names, "one_echo") {
			t.Errorf("tools with two disabled: %v", names)
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "two_echo", Arguments: map[string]any{"text": "x"}}); err == nil {
			t.Errorf("a disabled server's tool is still callable")
		}
		eventually(t, opTimeout, func() (bool, string) { return processGone(pid2), "disabled server's process " + pid2 + " still exists" })

		api.must(http.StatusOK, "PATCH", base+"/two", map[string]any{"enabled": true}, &s)
		if !s.Enabled {
			t.Errorf("enabled server: %+v", s)
		}
		if names := toolNames(t, cs); !has(names, "two_echo") || !has(names, "one_echo") {
			t.Errorf("tools with two enabled again: %v", names)
		}
		if got := callText(t, cs, "two_echo", map[string]any{"text": "back"}); got != "back" {
			t.Errorf("two_echo: %q", got)
		}
	})

	t.Run("validation", func(t *testing.T) {
		api := api.on(t)
		before := api.listServers("crud")
		tests := []struct {
			name, method, path string
			body               any
			mention            string // the message names the problem
		}{
			{"name missing", "POST", base, map[string]any{"config": fixture("x", nil)}, "name"},
			{"config missing", "POST", base, map[string]any{"name": "x"}, "config"},
			{"config not an object", "POST", base, map[string]any{"name": "x", "config": "npx"}, "JSON object"},
			{"neither command nor url", "POST", base, map[string]any{"name": "x", "config": map[string]any{"args": []string{"a"}}}, `"command"`},
			{"command and url", "POST", base, map[string]any{"name": "x", "config": map[string]any{"command": "a", "url": "http://h"}}, "not both"},
			{"bad url", "POST", base, map[string]any{"name": "x", "config": map[string]any{"url": "ftp://h"}}, "url"},
			{"bad transport", "POST", base, map[string]any{"name": "x", "config": map[string]any{"url": "http://h", "transport": "carrier-pigeon"}}, "carrier-pigeon"},
			{"bad name", "POST", base, map[string]any{"name": "no spaces", "config": fixture("x", nil)}, "name"},
			{"bad callTimeout", "POST", base, map[string]any{"name": "x", "config": fixture("x", nil, "callTimeout", "soon")}, "callTimeout"},
			{"unknown field", "POST", base, map[string]any{"name": "x", "config": fixture("x", nil), "enabeld": true}, "enabeld"},
			{"malformed JSON", "POST", base, `{"name": "x",`, "JSON"},
			{"enabled not a bool", "PATCH", base + "/one", map[string]any{"enabled": "yes"}, "enabled"},
			{"bad config in a patch", "PATCH", base + "/one", map[string]any{"config": map[string]any{"command": ""}}, `"command"`},
			{"bad rename", "PATCH", base + "/one", map[string]any{"name": "../etc"}, "name"},
			{"disabled inside config", "POST", base, map[string]any{"name": "x", "config": fixture("x", nil, "disabled", true)}, `"enabled": false`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				msg := api.on(t).fails(http.StatusBadRequest, "invalid", tt.method, tt.path, tt.body)
				if !strings.Contains(msg, tt.mention) {
					t.Errorf("message %q does not mention %s", msg, tt.mention)
				}
			})
		}
		msg := api.fails(http.StatusConflict, "conflict", "POST", base, map[string]any{"name": "two", "config": fixture("two", nil)})
		if !strings.Contains(msg, "two") {
			t.Errorf("duplicate name: message %q does not name it", msg)
		}
		api.fails(http.StatusConflict, "conflict", "PATCH", base+"/one", map[string]any{"name": "two"})
		if after := api.listServers("crud"); !sameRows(before, after) {
			t.Errorf("rejected requests changed the servers:\n before %+v\n after  %+v", before, after)
		}

		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/nope/servers", nil)
		api.fails(http.StatusNotFound, "not_found", "POST", "/api/v1/projects/nope/servers", map[string]any{"name": "x", "config": fixture("x", nil)})
		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/nope", nil)
		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/Bad..ID/servers", nil)
		api.fails(http.StatusNotFound, "not_found", "GET", base+"/nope", nil)
		api.fails(http.StatusNotFound, "not_found", "PATCH", base+"/nope", map[string]any{"enabled": false})
		api.fails(http.StatusNotFound, "not_found", "DELETE", base+"/nope", nil)
		refused(t, g.url+"/projects/nope/mcp", adminToken, http.StatusNotFound)
	})

	t.Run("rename", func(t *testing.T) {
		api := api.on(t)
		var s serverOut
		api.must(http.StatusOK, "PATCH", base+"/two", map[string]any{"name": "deux"}, &s)
		if s.Name != "deux" {
			t.Fatalf("renamed: %+v", s)
		}
		api.fails(http.StatusNotFound, "not_found", "GET", base+"/two", nil)
		if st := api.getServer("crud", "deux").Status; st == nil {
			t.Errorf("the renamed server has no status")
		}
		if got := callText(t, cs, "two_echo", map[string]any{"text": "renamed"}); got != "renamed" {
			t.Errorf("two_echo after the rename: %q", got)
		}
		api.must(http.StatusOK, "PATCH", base+"/deux", map[string]any{"name": "two"}, nil)
	})

	t.Run("delete", func(t *testing.T) {
		api := api.on(t)
		pid := callText(t, cs, "two_pid", nil)
		api.must(http.StatusNoContent, "DELETE", base+"/two", nil, nil)
		api.fails(http.StatusNotFound, "not_found", "GET", base+"/two", nil)
		if names := toolNames(t, cs); has(names, "two_echo") || !has(names, "one_echo") {
			t.Errorf("tools after deleting two: %v", names)
		}
		eventually(t, opTimeout, func() (bool, string) { return processGone(pid), "deleted server's process " + pid + " still exists" })
		if list := api.listServers("crud"); len(list) != 1 || list[0].Name != "one" {
			t.Errorf("list after delete: %+v", list)
		}
	})

	t.Run("deleting the project stops its servers and closes its endpoint", func(t *testing.T) {
		api := api.on(t)
		pid := callText(t, cs, "one_pid", nil)
		api.fails(http.StatusConflict, "conflict", "DELETE", "/api/v1/projects/default", nil)
		api.must(http.StatusNoContent, "DELETE", "/api/v1/projects/crud", nil, nil)
		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/crud/servers", nil)
		refused(t, g.url+"/projects/crud/mcp", adminToken, http.StatusNotFound)
		eventually(t, opTimeout, func() (bool, string) { return processGone(pid), "deleted project's process " + pid + " still exists" })
	})
}

// legacyEndpoint opens a legacy SSE stream with token and returns the
// message endpoint it announces; the stream is closed when t ends.
func legacyEndpoint(t *testing.T, url, token string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				event = e
			} else if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && event == "endpoint" {
				found <- d
				return
			}
		}
	}()
	select {
	case ep := <-found:
		return ep
	case <-time.After(opTimeout):
		t.Fatalf("no endpoint event on %s", url)
		return ""
	}
}

// hostOnlyValue is a variable of the gateway's own environment.
const hostOnlyValue = "host-only-4b1d0c"

// sameRows reports whether two server listings hold the same rows,
// unchanged (ids, timestamps, config, enabled).
func sameRows(a, b []serverOut) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ID != y.ID || x.Name != y.Name || x.UpdatedAt != y.UpdatedAt || x.CreatedAt != y.CreatedAt ||
			x.Enabled != y.Enabled || x.ProductID != y.ProductID || x.Description != y.Description || !jsonEqual(x.Config, y.Config) {
			return false
		}
	}
	return true
}

// jsonEqual compares JSON semantically (PostgreSQL's jsonb reorders keys).
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// TestManifestImport: PUT of a product manifest makes the product's
// servers exactly the manifest's, idempotently; a server dropped from the
// manifest loses its row and its tools; a name taken by a server added
// by hand is 409 and changes nothing.
func TestManifestImport(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	api.createProject("shop")
	const product = "/api/v1/projects/shop/products/storefront"
	manifest := func(servers map[string]any) map[string]any {
		return map[string]any{"name": "storefront", "version": "1.2.0", "mcp": map[string]any{"servers": servers}}
	}
	m1 := fixture("m1", nil, "toolPrefix", "m1_", "description", "first")
	m2 := fixture("m2", nil, "toolPrefix", "m2_")
	cs, _ := openMCP(t, g.url+"/projects/shop/mcp", adminToken)

	var first struct{ Servers []serverOut }
	api.must(http.StatusOK, "PUT", product, manifest(map[string]any{"m1": m1, "m2": m2}), &first)
	if len(first.Servers) != 2 {
		t.Fatalf("import answered %+v", first)
	}
	for _, s := range first.Servers {
		if s.ProductID != "storefront" || s.ProjectID != "shop" || s.ID == "" || !s.Enabled {
			t.Errorf("imported row %+v", s)
		}
	}
	if first.Servers[0].Description != "first" {
		t.Errorf("m1's description from the manifest: %q", first.Servers[0].Description)
	}
	rows := api.listServers("shop")
	if !sameRows(first.Servers, rows) {
		t.Fatalf("listing after import differs:\n import %+v\n list   %+v", first.Servers, rows)
	}
	names := toolNames(t, cs)
	if !has(names, "m1_echo") || !has(names, "m2_echo") {
		t.Fatalf("tools after import: %v", names)
	}
	pid1 := callText(t, cs, "m1_pid", nil)

	t.Run("re-import changes nothing", func(t *testing.T) {
		api := api.on(t)
		var again struct{ Servers []serverOut }
		api.must(http.StatusOK, "PUT", product, manifest(map[string]any{"m1": m1, "m2": m2}), &again)
		if !sameRows(first.Servers, again.Servers) {
			t.Errorf("re-import changed rows:\n first %+v\n again %+v", first.Servers, again.Servers)
		}
		if !sameRows(rows, api.listServers("shop")) {
			t.Errorf("re-import changed the listing")
		}
		if got := callText(t, cs, "m1_pid", nil); got != pid1 {
			t.Errorf("re-import restarted m1: pid %s -> %s", pid1, got)
		}
	})

	t.Run("a server dropped from the manifest is deleted with its tools", func(t *testing.T) {
		api := api.on(t)
		pid2 := callText(t, cs, "m2_pid", nil)
		var out struct{ Servers []serverOut }
		api.must(http.StatusOK, "PUT", product, manifest(map[string]any{"m1": m1}), &out)
		if len(out.Servers) != 1 || out.Servers[0].ID != first.Servers[0].ID {
			t.Errorf("import without m2 answered %+v", out.Servers)
		}
		api.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/shop/servers/m2", nil)
		if names := toolNames(t, cs); has(names, "m2_echo") || !has(names, "m1_echo") {
			t.Errorf("tools after dropping m2: %v", names)
		}
		eventually(t, opTimeout, func() (bool, string) { return processGone(pid2), "dropped server's process " + pid2 + " still exists" })
		if got := callText(t, cs, "m1_pid", nil); got != pid1 {
			t.Errorf("dropping m2 restarted m1: pid %s -> %s", pid1, got)
		}
	})

	t.Run("a name taken by hand is 409 and nothing changes", func(t *testing.T) {
		api := api.on(t)
		api.createServer("shop", "manual", fixture("manual", nil, "toolPrefix", "manual_"))
		before := api.listServers("shop")
		changedM1 := fixture("m1", map[string]string{"CHANGED": "1"}, "toolPrefix", "m1_")
		msg := api.fails(http.StatusConflict, "conflict", "PUT", product,
			manifest(map[string]any{"m1": changedM1, "m3": fixture("m3", nil, "toolPrefix", "m3_"), "manual": fixture("manual", nil)}))
		if !strings.Contains(msg, "manual") {
			t.Errorf("conflict message %q does not name the server", msg)
		}
		if after := api.listServers("shop"); !sameRows(before, after) {
			t.Errorf("a refused import changed rows:\n before %+v\n after  %+v", before, after)
		}
		if got := callText(t, cs, "m1_pid", nil); got != pid1 {
			t.Errorf("a refused import restarted m1: pid %s -> %s", pid1, got)
		}
		if names := toolNames(t, cs); has(names, "m3_echo") {
			t.Errorf("a refused import added m3's tools: %v", names)
		}
		// Another product cannot take the manifest's names either.
		api.fails(http.StatusConflict, "conflict", "PUT", "/api/v1/projects/shop/products/other", manifest(map[string]any{"m1": m1}))
	})

	t.Run("bad manifests are 400, unknown project 404", func(t *testing.T) {
		api := api.on(t)
		for _, body := range []any{
			map[string]any{"name": "no mcp block"},
			map[string]any{"mcp": map[string]any{}},
			manifest(map[string]any{"bad name!": m1}),
			manifest(map[string]any{"x": map[string]any{"command": "a", "url": "http://h"}}),
		} {
			api.fails(http.StatusBadRequest, "invalid", "PUT", product, body)
		}
		api.fails(http.StatusBadRequest, "invalid", "PUT", "/api/v1/projects/shop/products/-dash", manifest(map[string]any{"m1": m1}))
		api.fails(http.StatusNotFound, "not_found", "PUT", "/api/v1/projects/nope/products/storefront", manifest(map[string]any{"m1": m1}))
	})

	t.Run("deleting the product deletes its servers only", func(t *testing.T) {
		api := api.on(t)
		api.must(http.StatusNoContent, "DELETE", product, nil, nil)
		list := api.listServers("shop")
		if len(list) != 1 || list[0].Name != "manual" {
			t.Errorf("after deleting the product: %+v", list)
		}
		if names := toolNames(t, cs); has(names, "m1_echo") || !has(names, "manual_echo") {
			t.Errorf("tools after deleting the product: %v", names)
		}
	})
}

// TestDevModeTokens: without an admin token (dev mode, loopback), requests
// without a token may do everything, except reach a project that has a
// token: creating one closes the project to anonymous clients, its
// tokens included (an anonymous client minting itself a token would open
// it again).
func TestDevModeTokens(t *testing.T) {
	t.Parallel()
	g := startGateway(t, nil, nil)
	anon := newAPI(t, g.url, "")
	anon.createProject("open")
	anon.createProject("closed")
	anon.createServer("closed", "srv", fixture("closed", nil))
	openMCP(t, g.url+"/projects/closed/mcp", "")
	tok := anon.createToken("closed", "first")

	endpoint := g.url + "/projects/closed/mcp"
	refused(t, endpoint, "", http.StatusUnauthorized)
	anon.fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/projects/closed/servers", nil)
	anon.fails(http.StatusUnauthorized, "unauthorized", "POST", "/api/v1/projects/closed/tokens", map[string]any{"name": "mine now"})
	anon.fails(http.StatusUnauthorized, "unauthorized", "GET", "/api/v1/projects/closed/tokens", nil)
	anon.fails(http.StatusUnauthorized, "unauthorized", "DELETE", "/api/v1/projects/closed/tokens/"+tok.ID, nil)
	anon.fails(http.StatusUnauthorized, "unauthorized", "DELETE", "/api/v1/projects/closed", nil)

	cs, _ := openMCP(t, endpoint, tok.Token)
	if !has(toolNames(t, cs), "closed_t0000") {
		t.Errorf("the project's token does not reach its tools")
	}
	anon.as(tok.Token).must(http.StatusOK, "GET", "/api/v1/projects/closed/servers", nil, nil)
	// Projects without tokens stay open.
	openMCP(t, g.url+"/projects/open/mcp", "")
	openMCP(t, g.url+"/mcp", "")
	// The list shows the closed project by name, marked closed, with
	// nothing else: no description and no times (not 0001-01-01).
	body := string(anon.must(http.StatusOK, "GET", "/api/v1/projects", nil, nil))
	var list struct {
		Projects []map[string]any `json:"projects"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Projects {
		if p["id"] == "closed" {
			if p["closed"] != true || p["created_at"] != nil || p["updated_at"] != nil {
				t.Errorf("the closed project reads %v; want it closed, without times", p)
			}
		} else if p["created_at"] == nil {
			t.Errorf("project %v has no created_at", p["id"])
		}
	}
}
