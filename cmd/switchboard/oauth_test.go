package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/oidctest"
)

// TestSignInWithAnIssuer: the official go-sdk client calls a tool through
// the gateway with an access token from a real OpenID provider
// (zitadel/oidc's op), the call log names the person behind it, and
// without a token (or with another project's) the client is refused with
// a 401 that points to the project's resource metadata.
func TestSignInWithAnIssuer(t *testing.T) {
	t.Parallel()
	const public = "https://gw.example.test"
	idp := oidctest.Start(t)
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{
		"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_PUBLIC_URL": public, "MCP_SERVER_AUTH_ISSUER": idp.Issuer})

	tok := idp.Token(t, []string{"mcp"}, public+"/mcp")
	cs, _ := openMCP(t, g.url+"/mcp", tok)
	if got := callText(t, cs, "echo", map[string]any{"text": "signed in"}); got != "signed in" {
		t.Fatalf("echo: %q", got)
	}

	// The legacy transport answers on the session's stream, after the
	// request: the person goes with the call all the same.
	b := &bearer{}
	b.set(tok)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ls, err := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil).Connect(ctx, &mcp.SSEClientTransport{Endpoint: g.url + "/sse", HTTPClient: &http.Client{Transport: b}}, nil)
	if err != nil {
		t.Fatalf("legacy connect: %v", err)
	}
	defer ls.Close()
	if got := callText(t, ls, "echo", map[string]any{"text": "legacy"}); got != "legacy" {
		t.Fatalf("legacy echo: %q", got)
	}

	refused(t, g.url+"/mcp", "", http.StatusUnauthorized)
	refused(t, g.url+"/mcp", idp.Token(t, []string{"mcp"}, public+"/projects/p/mcp"), http.StatusUnauthorized)
	refused(t, g.url+"/mcp", idp.Token(t, []string{"openid"}, public+"/mcp"), http.StatusForbidden)

	req, _ := http.NewRequest(http.MethodPost, g.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer resource_metadata="` + public + `/.well-known/oauth-protected-resource/mcp", scope="mcp"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Errorf("without a token: %s, WWW-Authenticate %q; want 401, %q", resp.Status, resp.Header.Get("WWW-Authenticate"), want)
	}
	resp, err = http.Get(g.url + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	md, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(md), `"resource":"`+public+`/mcp"`) || !strings.Contains(string(md), idp.Issuer) {
		t.Errorf("resource metadata: %s %s", resp.Status, md)
	}

	api := newAPI(t, g.url, adminToken)
	for _, c := range api.waitCalls("default", "", 2) {
		p := c.Principal
		if p == nil || p.Issuer != idp.Issuer || p.Subject != oidctest.ClientID || p.Name != "service-one@example.com" {
			t.Errorf("the call log names %+v for %s, want %s %s service-one@example.com", p, c.Arguments, idp.Issuer, oidctest.ClientID)
		}
	}
	_, body := api.do("GET", "/api/v1/projects/default/tool-calls", nil)
	if strings.Contains(string(body), tok) || strings.Contains(string(body), "eyJ") {
		t.Errorf("the history holds a token: %s", body)
	}
}

// TestNoClientTokenReachesAnUpstream (issue 35): the bearer token a
// client presents to the gateway (here the admin token, and a project
// token) is never forwarded: the HTTP upstream sees only the headers its
// own entry configures.
func TestNoClientTokenReachesAnUpstream(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	fixture := mcptest.StreamableHandler(mcptest.Options{Name: "recorder"})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		fixture.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	g := startGateway(t, [][2]any{{"rec", map[string]any{"url": up.URL, "transport": "streamable-http", "headers": map[string]string{"X-Api-Key": "configured-key"}}}},
		map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	tok := newAPI(t, g.url, adminToken).createToken("default", "client").Token
	for _, bearer := range []string{adminToken, tok} {
		cs, _ := openMCP(t, g.url+"/mcp", bearer)
		callText(t, cs, "echo", map[string]any{"text": "hi"})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, h := range seen {
		if strings.Contains(h, adminToken) || strings.Contains(h, tok) || !strings.HasSuffix(h, "|configured-key") {
			t.Fatalf("the upstream was sent %q (Authorization|X-Api-Key): a client's token, or not the entry's header", h)
		}
	}
}
