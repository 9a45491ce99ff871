package console_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/console"
	"github.com/switchboard-mcp/switchboard/projects"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/server/api"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

const adminToken = "admin-token-0123456789abcdef"

// gateway is the real hub, admin API and console over a real SQLite
// store, wired as run wires them, behind an httptest server.
type gateway struct {
	srv *httptest.Server
	ui  *console.Console
	st  switchboard.Store
}

func newGateway(t *testing.T, admin string, hosted ...api.Hosted) *gateway {
	t.Helper()
	var h api.Hosted
	if len(hosted) > 0 {
		h = hosted[0]
	}
	return newGatewayWith(t, admin, h, nil)
}

// newGatewayWith is newGateway with the API's hosted and sandbox services
// (nil: the gateway runs without them).
func newGatewayWith(t *testing.T, admin string, hosted api.Hosted, sandbox api.Sandbox) *gateway {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range []string{"default", "a", "b"} {
		if _, err := st.CreateProject(ctx, switchboard.Project{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	hub := projects.New(projects.Options{Store: st, Box: box, AdminToken: admin})
	t.Cleanup(func() { hub.Close(context.Background()) })
	if err := hub.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	opts := api.Options{Store: st, Projects: hub, Access: hub, Secrets: box, NewToken: secrets.NewToken, TokensChanged: hub.TokensChanged}
	if hosted != nil {
		opts.Hosted = hosted
	}
	if sandbox != nil {
		opts.Sandbox = sandbox
	}
	a := api.New(opts)
	ui := console.New(console.Options{Version: "test"})
	root := hub.Handler(a, ui)
	ui.Bind(root)
	srv := httptest.NewServer(root)
	t.Cleanup(srv.Close)
	return &gateway{srv: srv, ui: ui, st: st}
}

// browser is a client with a cookie jar that does not follow redirects.
type browser struct {
	t   *testing.T
	g   *gateway
	c   *http.Client
	hdr http.Header
}

func (g *gateway) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, g: g, hdr: http.Header{}, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.g.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range b.hdr {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: string(out)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil) }

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the form token from a page, as a browser submits it.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	m := csrfInput.FindStringSubmatch(b.get(path).body)
	if m == nil {
		b.t.Fatalf("no csrf field on %s", path)
	}
	return m[1]
}

func (b *browser) post(path string, form url.Values) page { return b.do(http.MethodPost, path, form) }

func (b *browser) login(token, project string) page {
	b.t.Helper()
	return b.post("/ui/login", url.Values{"csrf": {b.csrf("/ui/login")}, "token": {token}, "project": {project}})
}

func (g *gateway) projectToken(t *testing.T, project string) string {
	t.Helper()
	tok, hash := secrets.NewToken()
	if _, err := g.st.CreateToken(context.Background(), switchboard.Token{ProjectID: project, Name: "t", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestLoginRequiredWithAdminToken(t *testing.T) {
	g := newGateway(t, adminToken)
	b := g.browser(t)
	p := b.get("/ui/")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/ui/login?") {
		t.Fatalf("GET /ui/ without a token: %d to %q, want 303 to the login form", p.status, p.header.Get("Location"))
	}
	if p := b.login("not-a-token", ""); p.status != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", p.status)
	}
	p = b.login(adminToken, "")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
		t.Fatalf("admin login: %d to %q", p.status, p.header.Get("Location"))
	}
	var tok *http.Cookie
	for _, ck := range (&http.Response{Header: p.header}).Cookies() {
		if ck.Name == "switchboard_token" {
			tok = ck
		}
	}
	if tok == nil || !tok.HttpOnly || tok.SameSite != http.SameSiteStrictMode || tok.Path != "/ui/" || tok.Secure {
		t.Fatalf("token cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP", tok)
	}
	p = b.get("/ui/")
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="p-a"`) || !strings.Contains(p.body, `id="p-b"`) {
		t.Fatalf("admin overview: %d, want every project:\n%s", p.status, p.body)
	}
	// Projects are created and deleted through the API, as the admin.
	p = b.post("/ui/projects", url.Values{"csrf": {b.csrf("/ui/")}, "id": {"c"}, "description": {"made in the console"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/p/c/manage" {
		t.Fatalf("create project: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	if p := b.post("/ui/projects", url.Values{"csrf": {b.csrf("/ui/")}, "id": {"Bad ID"}}); p.status != http.StatusBadRequest {
		t.Errorf("create project with a bad id: %d, want 400", p.status)
	}
	p = b.post("/ui/p/c/manage/project-delete", url.Values{"csrf": {b.csrf("/ui/p/c/manage")}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/" {
		t.Fatalf("delete project: %d to %q", p.status, p.header.Get("Location"))
	}
	if _, err := g.st.GetProject(context.Background(), "c"); err == nil {
		t.Errorf("project c still exists")
	}

	// A token is shown once, on the page that answers its creation, and
	// can be revoked from the list.
	p = b.post("/ui/p/a/manage/token-create", url.Values{"csrf": {b.csrf("/ui/p/a/manage")}, "name": {"ci"}})
	m := regexp.MustCompile(`id="newtoken"[^>]*value="(sbt_[^"]+)"`).FindStringSubmatch(p.body)
	if p.status != http.StatusCreated || m == nil {
		t.Fatalf("token-create: %d, no new token shown", p.status)
	}
	if strings.Contains(b.get("/ui/p/a/manage").body, m[1]) {
		t.Errorf("the token is shown again on a later page")
	}
	toks, err := g.st.ListTokens(context.Background(), "a")
	if err != nil || len(toks) != 1 {
		t.Fatalf("tokens: %v %v", toks, err)
	}
	p = b.post("/ui/p/a/manage/token-revoke", url.Values{"csrf": {b.csrf("/ui/p/a/manage")}, "id": {toks[0].ID}})
	if p.status != http.StatusSeeOther {
		t.Fatalf("token-revoke: %d", p.status)
	}
	if body := b.get("/ui/p/a/manage?done=token-revoke").body; !strings.Contains(body, "Token revoked.") || !strings.Contains(body, "· revoked ") {
		t.Errorf("manage page after revoking does not show it")
	}

	// Logout drops the cookie: the next page asks for a login again.
	if p := b.post("/ui/logout", url.Values{"csrf": {b.csrf("/ui/")}}); p.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", p.status)
	}
	if p := b.get("/ui/"); p.status != http.StatusSeeOther {
		t.Errorf("after logout: %d, want 303 to the login form", p.status)
	}
}

func TestProjectTokenSeesOnlyItsProject(t *testing.T) {
	g := newGateway(t, adminToken)
	tok := g.projectToken(t, "a")
	b := g.browser(t)
	if p := b.login(tok, ""); p.status != http.StatusBadRequest {
		t.Errorf("project token without its project: %d, want 400", p.status)
	}
	if p := b.login(tok, "b"); p.status != http.StatusForbidden {
		t.Errorf("project token naming another project: %d, want 403", p.status)
	}
	p := b.login(tok, "a")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/p/a/" {
		t.Fatalf("project login: %d to %q", p.status, p.header.Get("Location"))
	}
	if p := b.get("/ui/"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/p/a/" {
		t.Errorf("GET /ui/ with a project token: %d to %q, want its project", p.status, p.header.Get("Location"))
	}
	for _, path := range []string{"/ui/p/a/", "/ui/p/a/tools", "/ui/p/a/calls", "/ui/p/a/manage"} {
		if p := b.get(path); p.status != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", path, p.status)
		}
	}
	for _, path := range []string{"/ui/p/b/", "/ui/p/b/tools", "/ui/p/b/calls", "/ui/p/b/manage"} {
		if p := b.get(path); p.status != http.StatusForbidden || !strings.Contains(p.body, "403 Forbidden") {
			t.Errorf("GET %s: %d, want the 403 page", path, p.status)
		}
	}
	// Actions on another project are the API's to refuse too.
	p = b.post("/ui/p/b/manage/server-create", url.Values{"csrf": {b.csrf("/ui/p/a/manage")}, "name": {"x"}, "url": {"https://example.com/mcp"}})
	if p.status != http.StatusForbidden {
		t.Errorf("creating a server in another project: %d, want 403", p.status)
	}
	// Deleting a project is the admin's.
	if p := b.post("/ui/p/a/manage/project-delete", url.Values{"csrf": {b.csrf("/ui/p/a/manage")}}); p.status != http.StatusForbidden {
		t.Errorf("project token deleting its project: %d, want 403", p.status)
	}
	// Tokens are the admin's: the page says so instead of failing.
	if p := b.get("/ui/p/a/manage"); !strings.Contains(p.body, "managing tokens needs the admin token") {
		t.Errorf("manage page for a project token does not explain the tokens section")
	}
}

func TestFormsNeedCSRFAndSameOrigin(t *testing.T) {
	g := newGateway(t, "")
	b := g.browser(t)
	tok := b.csrf("/ui/p/a/manage")
	form := func(csrf string) url.Values {
		return url.Values{"csrf": {csrf}, "name": {"remote"}, "url": {"https://example.com/mcp"}}
	}
	for name, tc := range map[string]struct {
		csrf string
		hdr  http.Header
	}{
		"no token":          {csrf: "", hdr: http.Header{}},
		"wrong token":       {csrf: strings.Repeat("x", 43), hdr: http.Header{}},
		"cross-site fetch":  {csrf: tok, hdr: http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		"same-site sibling": {csrf: tok, hdr: http.Header{"Sec-Fetch-Site": {"same-site"}}},
	} {
		b.hdr = tc.hdr
		if p := b.post("/ui/p/a/manage/server-create", form(tc.csrf)); p.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, p.status)
		}
	}
	if recs, _ := g.st.ListServers(context.Background(), "a"); len(recs) != 0 {
		t.Fatalf("a refused form created %d servers", len(recs))
	}
	// The same form from this origin with its token goes through (dev
	// mode: no login needed, as for the API).
	b.hdr = http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {g.srv.URL}}
	p := b.post("/ui/p/a/manage/server-create", form(tok))
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/ui/p/a/manage?done=server-create" {
		t.Fatalf("create: %d to %q\n%s", p.status, p.header.Get("Location"), p.body)
	}
	recs, err := g.st.ListServers(context.Background(), "a")
	if err != nil || len(recs) != 1 || recs[0].Name != "remote" {
		t.Fatalf("servers after create: %v %v", recs, err)
	}
	// Secrets are write-only: the page lists the name, never the value,
	// not even when the API refuses the form.
	const value = "s3cret-value-for-the-test"
	if p := b.post("/ui/p/a/manage/secret-set", url.Values{"csrf": {tok}, "name": {"API_KEY"}, "value": {value}}); p.status != http.StatusSeeOther {
		t.Fatalf("secret-set: %d\n%s", p.status, p.body)
	}
	if body := b.get("/ui/p/a/manage").body; !strings.Contains(body, "API_KEY") || strings.Contains(body, value) {
		t.Errorf("manage page after setting a secret: name listed %v, value shown %v", strings.Contains(body, "API_KEY"), strings.Contains(body, value))
	}
	if p := b.post("/ui/p/a/manage/secret-set", url.Values{"csrf": {tok}, "name": {"1BAD"}, "value": {value}}); p.status != http.StatusBadRequest || strings.Contains(p.body, value) {
		t.Errorf("bad secret name: %d (want 400), value echoed %v", p.status, strings.Contains(p.body, value))
	}
	// A manifest makes the product's servers exactly its entries.
	manifest := `{"name":"billing","mcp":{"servers":{"invoices":{"url":"https://billing.example/mcp"}}}}`
	if p := b.post("/ui/p/a/manage/manifest-import", url.Values{"csrf": {tok}, "product": {"billing"}, "manifest": {manifest}}); p.status != http.StatusSeeOther {
		t.Fatalf("manifest-import: %d\n%s", p.status, p.body)
	}
	if rec, err := g.st.GetServer(context.Background(), "a", "invoices"); err != nil || rec.ProductID != "billing" {
		t.Errorf("imported server: %+v %v", rec, err)
	}
	if p := b.post("/ui/p/a/manage/manifest-import", url.Values{"csrf": {tok}, "product": {"billing"}, "manifest": {`{"mcp":`}}); p.status != http.StatusBadRequest || !strings.Contains(p.body, "{&#34;mcp&#34;:") {
		t.Errorf("broken manifest: %d, want 400 with the form filled again", p.status)
	}

	// A refusal by the API comes back with its status and reason.
	p = b.post("/ui/p/a/manage/server-create", url.Values{"csrf": {tok}, "name": {"bad name"}, "url": {"https://example.com"}})
	if p.status != http.StatusBadRequest || !strings.Contains(p.body, "name must be") {
		t.Errorf("bad name: %d, want 400 with the API's message", p.status)
	}
}

func TestCookiesSecureOverTLS(t *testing.T) {
	g := newGateway(t, adminToken)
	// The CSRF cookie and field of a page read over TLS...
	req := httptest.NewRequest(http.MethodGet, "https://gw.example/ui/login", nil)
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	g.ui.ServeHTTP(rec, req)
	var csrf *http.Cookie
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == "switchboard_csrf" {
			csrf = ck
		}
	}
	if csrf == nil || !csrf.Secure || !csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("csrf cookie over TLS: %+v", csrf)
	}
	// ...and the token cookie of a login over TLS are Secure.
	form := url.Values{"csrf": {csrf.Value}, "token": {adminToken}}
	req = httptest.NewRequest(http.MethodPost, "https://gw.example/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.TLS = &tls.ConnectionState{}
	req.AddCookie(csrf)
	rec = httptest.NewRecorder()
	g.ui.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("login over TLS: %d\n%s", rec.Code, rec.Body)
	}
	for _, ck := range rec.Result().Cookies() {
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
			t.Errorf("cookie %s over TLS: %+v", ck.Name, ck)
		}
	}
}

func TestLoginRedirectStaysInConsole(t *testing.T) {
	g := newGateway(t, adminToken)
	for next, want := range map[string]string{
		"/ui/p/a/calls?tool=x": "/ui/p/a/calls?tool=x",
		"https://evil.example": "/ui/",
		"//evil.example/ui/":   "/ui/",
		"/ui/\\evil":           "/ui/",
		"/api/v1/projects":     "/ui/",
	} {
		b := g.browser(t)
		p := b.post("/ui/login", url.Values{"csrf": {b.csrf("/ui/login")}, "token": {adminToken}, "next": {next}})
		if got := p.header.Get("Location"); got != want {
			t.Errorf("next=%q: redirected to %q, want %q", next, got, want)
		}
	}
}

// TestDevModeClosedProject: what the console shows is what the API
// answers for the same token; a project its tokens closed is listed to an
// anonymous dev-mode browser by name, marked as needing its token with a
// way to log in with one, not left out; opening it asks for a login.
func TestDevModeClosedProject(t *testing.T) {
	g := newGateway(t, "")
	g.projectToken(t, "b")
	b := g.browser(t)
	p := b.get("/ui/")
	i := strings.Index(p.body, `id="p-b"`)
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="p-a"`) || i < 0 {
		t.Fatalf("dev-mode overview: %d; want a and b (closed by its token) listed", p.status)
	}
	if card := p.body[i:]; !strings.Contains(card, "needs its token") || !strings.Contains(card, "/ui/login?project=b") {
		t.Errorf("b's card does not say it needs its token or how to log in:\n%s", card[:min(len(card), 600)])
	}
	p = b.get("/ui/p/b/tools")
	if loc := p.header.Get("Location"); p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login?") || !strings.Contains(loc, "project=b") {
		t.Errorf("closed project: %d to %q, want the login form for b", p.status, loc)
	}
	var list struct {
		Projects []struct {
			ID          string `json:"id"`
			Description string `json:"description"`
			Closed      bool   `json:"closed"`
		} `json:"projects"`
	}
	resp, err := http.Get(g.srv.URL + "/api/v1/projects")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&list)
	closed := 0
	for _, p := range list.Projects {
		if p.Closed {
			closed++
			if p.ID != "b" || p.Description != "" {
				t.Errorf("API shows a closed project with more than its name: %+v", p)
			}
		}
	}
	if len(list.Projects) != 3 || closed != 1 {
		t.Errorf("API lists %+v to an anonymous client; want default, a and b (closed)", list.Projects)
	}
}

// BenchmarkMCPRoute measures a request to /mcp through the gateway's
// whole handler with and without the console mounted: the console is one
// more prefix on the top-level router and MCP requests never reach it.
// (A tools/list on a session, in process, so the edge's own work dominates.)
func BenchmarkMCPRoute(b *testing.B) {
	for _, withUI := range []bool{false, true} {
		name := "without-console"
		if withUI {
			name = "with-console"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
				b.Fatal(err)
			}
			box, _ := secrets.NewBox(make([]byte, secrets.KeySize))
			hub := projects.New(projects.Options{Store: st, Box: box})
			defer hub.Close(ctx)
			if err := hub.Start(ctx, nil); err != nil {
				b.Fatal(err)
			}
			a := api.New(api.Options{Store: st, Projects: hub, Access: hub, Secrets: box, NewToken: secrets.NewToken})
			var root http.Handler
			if withUI {
				ui := console.New(console.Options{})
				root = hub.Handler(a, ui)
				ui.Bind(root)
			} else {
				root = hub.Handler(a)
			}
			post := func(body, sid string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
				}
				rec := httptest.NewRecorder()
				root.ServeHTTP(rec, req)
				return rec
			}
			sid := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`, "").Header().Get("Mcp-Session-Id")
			if sid == "" {
				b.Fatal("no session")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if rec := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, sid); rec.Code != http.StatusOK {
					b.Fatalf("tools/list: %d", rec.Code)
				}
			}
		})
	}
}

var (
	editConfig    = regexp.MustCompile(`(?s)name="config" rows="5" spellcheck="false">(.*?)</textarea>`)
	editConfigWas = regexp.MustCompile(`name="config_was" value="([^"]*)"`)
)

// TestEditKeepsWhatTheFormMasked: a project token edits the description of
// servers an admin configured, through the Edit form as a browser submits
// it (the entry as shown, line breaks as CRLF). The admin's literal
// credential, which the form showed masked, stays stored. The stdio
// server's edit is refused (403) and changes nothing: any change to a
// stdio server is the admin's, as its deletion is.
func TestEditKeepsWhatTheFormMasked(t *testing.T) {
	g := newGateway(t, adminToken)
	ctx := context.Background()
	remote := json.RawMessage(`{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer admin-literal-3","X-Trace":"on"}}`)
	for _, rec := range []switchboard.ServerRecord{
		{ProjectID: "a", Name: "remote", Transport: switchboard.TransportStreamableHTTP, Config: remote},
		{ProjectID: "a", Name: "local", Transport: switchboard.TransportStdio, Config: json.RawMessage(`{"command":"true"}`)},
	} {
		if _, err := g.st.CreateServer(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	b := g.browser(t)
	if p := b.login(g.projectToken(t, "a"), "a"); p.status != http.StatusSeeOther {
		t.Fatalf("login: %d", p.status)
	}
	for _, name := range []string{"remote", "local"} {
		body := b.get("/ui/p/a/manage").body
		i := strings.Index(body, `<textarea id="ec-`+name+`"`)
		if i < 0 {
			t.Fatalf("no Edit form for %s", name)
		}
		cfg, was := editConfig.FindStringSubmatch(body[i:]), editConfigWas.FindStringSubmatch(body[i:])
		if cfg == nil {
			t.Fatalf("Edit form for %s lacks the entry", name)
		}
		if was == nil {
			was = []string{"", ""} // a form without it sends nothing
		}
		if name == "remote" && (strings.Contains(cfg[1], "admin-literal-3") || strings.Contains(was[1], "admin-literal-3")) {
			t.Fatalf("Edit form shows a project token the admin's credential")
		}
		shown := strings.ReplaceAll(html.UnescapeString(cfg[1]), "\n", "\r\n")
		p := b.post("/ui/p/a/manage/server-update", url.Values{"csrf": {b.csrf("/ui/p/a/manage")}, "name": {name}, "new_name": {name},
			"description": {"edited"}, "config": {shown}, "config_was": {html.UnescapeString(was[1])}})
		want, wantDesc := http.StatusSeeOther, "edited"
		if name == "local" {
			want, wantDesc = http.StatusForbidden, ""
		}
		if p.status != want {
			t.Errorf("editing %s's description: HTTP %d, want %d", name, p.status, want)
		}
		rec, err := g.st.GetServer(ctx, "a", name)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Description != wantDesc {
			t.Errorf("%s: description %q, want %q", name, rec.Description, wantDesc)
		}
		if name == "remote" && !strings.Contains(string(rec.Config), "Bearer admin-literal-3") {
			t.Errorf("remote: stored entry lost the admin's credential: %s", rec.Config)
		}
	}
}
