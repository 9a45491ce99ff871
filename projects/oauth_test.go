package projects

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/internal/oidctest"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

const publicURL = "https://gw.example.test"

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// oauthHub is a hub with projects default and p, an admin token, and the
// given auth settings, served over HTTP.
func oauthHub(t *testing.T, auth config.Auth, client *http.Client) (*Hub, string, switchboard.Store) {
	t.Helper()
	h, st := authHub(t, adminToken, auth, client)
	srv := httptest.NewServer(h.Handler(http.NotFoundHandler()))
	t.Cleanup(srv.Close)
	return h, srv.URL, st
}

// authHub is a started hub with projects default and p, admin as its
// admin token ("" for none), and the given auth settings.
func authHub(t *testing.T, admin string, auth config.Auth, client *http.Client) (*Hub, switchboard.Store) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Box: box, AdminToken: admin, Auth: auth, AuthClient: client})
	t.Cleanup(func() { h.Close(ctx) })
	for _, id := range []string{Default, "p"} {
		if _, err := st.CreateProject(ctx, switchboard.Project{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return h, st
}

func postAuth(t *testing.T, url, authz string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestOAuthProtectedResource: with an issuer configured each project
// publishes its RFC 9728 metadata, and a refusal points to it.
func TestOAuthProtectedResource(t *testing.T) {
	idp := oidctest.Start(t)
	_, base, _ := oauthHub(t, config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, nil)

	for path, resource := range map[string]string{"/mcp": publicURL + "/mcp", "/projects/p/mcp": publicURL + "/projects/p/mcp"} {
		resp, err := http.Get(base + "/.well-known/oauth-protected-resource" + path)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		want := map[string]any{"resource": resource, "authorization_servers": []any{idp.Issuer},
			"scopes_supported": []any{"mcp", "mcp:admin"}, "bearer_methods_supported": []any{"header"},
			"resource_name": md["resource_name"]}
		if diff := cmp.Diff(want, md); diff != "" {
			t.Errorf("metadata of %s (-want +got):\n%s", path, diff)
		}
		resp, _ = postAuth(t, base+path, "")
		wantAuth := `Bearer resource_metadata="` + publicURL + `/.well-known/oauth-protected-resource` + path + `", scope="mcp"`
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != wantAuth {
			t.Errorf("%s without a token: %s %q, want 401 %q", path, resp.Status, resp.Header.Get("WWW-Authenticate"), wantAuth)
		}
	}
	if resp, _ := http.Get(base + "/.well-known/oauth-protected-resource/projects/nope/mcp"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("metadata of an unknown project: %s", resp.Status)
	}
}

// TestOAuthTokens: the issuer's tokens open exactly the project they are
// for, with the scope; everything else is refused with the right status
// and challenge. Static and admin tokens keep working beside them.
func TestOAuthTokens(t *testing.T) {
	idp := oidctest.Start(t)
	_, base, st := oauthHub(t, config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, nil)
	resP := publicURL + "/projects/p/mcp"
	now := time.Now()
	claims := func(change map[string]any) map[string]any {
		c := map[string]any{"iss": idp.Issuer, "sub": "alice", "aud": []string{resP}, "scope": "mcp",
			"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()}
		for k, v := range change {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	other := oidctest.Start(t) // a foreign issuer with keys of its own
	static := mintStatic(t, st)

	tests := []struct {
		name   string
		path   string
		authz  string
		status int
		err    string // the challenge's error attribute
	}{
		{"issued token for p", "/projects/p/mcp", "Bearer " + idp.Token(t, []string{"mcp"}, resP), http.StatusOK, ""},
		{"issued token for p on the default project", "/mcp", "Bearer " + idp.Token(t, []string{"mcp"}, resP), http.StatusUnauthorized, "invalid_token"},
		{"issued token for the default project on p", "/projects/p/mcp", "Bearer " + idp.Token(t, []string{"mcp"}, publicURL+"/mcp"), http.StatusUnauthorized, "invalid_token"},
		{"issued token without the scope", "/projects/p/mcp", "Bearer " + idp.Token(t, []string{"openid"}, resP), http.StatusForbidden, "insufficient_scope"},
		{"issued admin token", "/mcp", "Bearer " + idp.Token(t, []string{"mcp:admin"}, publicURL), http.StatusOK, ""},
		{"admin scope without the gateway as audience", "/mcp", "Bearer " + idp.Token(t, []string{"mcp:admin"}, resP), http.StatusUnauthorized, "invalid_token"},
		{"hand-signed good token", "/projects/p/mcp", "Bearer " + idp.Sign(t, claims(nil)), http.StatusOK, ""},
		{"foreign issuer", "/projects/p/mcp", "Bearer " + other.Sign(t, claims(map[string]any{"iss": other.Issuer})), http.StatusUnauthorized, "invalid_token"},
		{"our key, another issuer", "/projects/p/mcp", "Bearer " + idp.Sign(t, claims(map[string]any{"iss": idp.Issuer + "/"})), http.StatusUnauthorized, "invalid_token"},
		{"foreign key claiming our issuer", "/projects/p/mcp", "Bearer " + other.Sign(t, claims(nil)), http.StatusUnauthorized, "invalid_token"},
		{"expired", "/projects/p/mcp", "Bearer " + idp.Sign(t, claims(map[string]any{"exp": now.Add(-time.Minute).Unix(), "iat": now.Add(-time.Hour).Unix(), "nbf": now.Add(-time.Hour).Unix()})), http.StatusUnauthorized, "invalid_token"},
		{"no exp", "/projects/p/mcp", "Bearer " + idp.Sign(t, claims(map[string]any{"exp": nil})), http.StatusUnauthorized, "invalid_token"},
		{"not yet valid", "/projects/p/mcp", "Bearer " + idp.Sign(t, claims(map[string]any{"nbf": now.Add(10 * time.Minute).Unix()})), http.StatusUnauthorized, "invalid_token"},
		{"alg none", "/projects/p/mcp", "Bearer " + idp.Unsigned(claims(nil)), http.StatusUnauthorized, "invalid_token"},
		{"HS256 keyed with the RSA public key", "/projects/p/mcp", "Bearer " + idp.HS256WithPublicKey(claims(nil)), http.StatusUnauthorized, "invalid_token"},
		{"token in the query string", "/projects/p/mcp?access_token=" + idp.Token(t, []string{"mcp"}, resP), "", http.StatusUnauthorized, ""},
		{"static project token", "/projects/p/mcp", "Bearer " + static, http.StatusOK, ""},
		{"admin token", "/projects/p/mcp", "Bearer " + adminToken, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postAuth(t, base+tt.path, tt.authz)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %s, want %d: %s", resp.Status, tt.status, body)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if tt.status == http.StatusOK {
				return
			}
			if !strings.Contains(ch, `resource_metadata="`+publicURL+"/.well-known/oauth-protected-resource") {
				t.Errorf("challenge %q does not name the resource metadata", ch)
			}
			if tt.err != "" && !strings.Contains(ch, `error="`+tt.err+`"`) {
				t.Errorf("challenge %q, want error=%q", ch, tt.err)
			}
			if strings.Contains(body, "eyJ") {
				t.Errorf("the answer echoes a token: %s", body)
			}
		})
	}
}

func mintStatic(t *testing.T, st switchboard.Store) string {
	t.Helper()
	tok, hash := secrets.NewToken()
	if _, err := st.CreateToken(context.Background(), switchboard.Token{ProjectID: "p", Name: "ci", Hash: hash}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestOAuthJWKSTimeout: an issuer whose keys do not come back in time
// leaves the gateway up; the client gets a 503 that says why, and static
// tokens keep working meanwhile.
func TestOAuthJWKSTimeout(t *testing.T) {
	idp := oidctest.Start(t)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/openid-configuration" {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"issuer": idp.Issuer, "jwks_uri": "http://" + r.Host + "/keys"})
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	// The issuer's discovery is answered by slow (a proxy in front of it).
	client := &http.Client{Timeout: 300 * time.Millisecond, Transport: rewriteHost{idp.Issuer, slow.URL}}
	_, base, _ := oauthHub(t, config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, client)

	resP := publicURL + "/projects/p/mcp"
	resp, body := postAuth(t, base+"/projects/p/mcp", "Bearer "+idp.Token(t, []string{"mcp"}, resP))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "could not be fetched") || !strings.Contains(body, "timed out") {
		t.Fatalf("with the JWKS timing out: %s %s, want 503 saying the keys could not be fetched", resp.Status, body)
	}
	if resp, body := postAuth(t, base+"/projects/p/mcp", "Bearer "+adminToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("the admin token meanwhile: %s %s", resp.Status, body)
	}
}

// rewriteHost sends requests for from to to.
type rewriteHost struct{ from, to string }

func (r rewriteHost) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL.String()
	if strings.HasPrefix(u, r.from) {
		nu := r.to + strings.TrimPrefix(u, r.from)
		req2, err := http.NewRequestWithContext(req.Context(), req.Method, nu, req.Body)
		if err != nil {
			return nil, err
		}
		req2.Header = req.Header
		return http.DefaultTransport.RoundTrip(req2)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// countKeys counts the JWKS fetches it forwards.
type countKeys struct{ n *atomic.Int32 }

func (c countKeys) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/keys") {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestOAuthKeyRefetchBounded: a token with an unknown kid makes the
// gateway fetch the JWKS again (a rotation), but not more than once per
// refetchEvery, however many such tokens arrive.
func TestOAuthKeyRefetchBounded(t *testing.T) {
	idp := oidctest.Start(t)
	other := oidctest.Start(t)
	var n atomic.Int32
	o := newOAuth(config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, &http.Client{Transport: countKeys{&n}})
	clock := time.Now()
	o.now = func() time.Time { return clock }
	ctx := context.Background()
	good := idp.Token(t, []string{"mcp"}, publicURL+"/mcp")
	unknown := other.Sign(t, map[string]any{"iss": idp.Issuer, "sub": "x", "aud": publicURL + "/mcp", "exp": clock.Add(time.Hour).Unix()})

	step := func(name, tok string, wantOK bool, wantFetches int32) {
		t.Helper()
		u, _, err := o.verify(ctx, tok)
		if (err == nil) != wantOK {
			t.Errorf("%s: %v", name, err)
		}
		if wantOK && (u.Subject != oidctest.ClientID || u.Email != "service-one@example.com") {
			t.Errorf("%s: user %+v", name, u)
		}
		if got := n.Load(); got != wantFetches {
			t.Errorf("%s: %d JWKS fetches, want %d", name, got, wantFetches)
		}
	}
	step("first token", good, true, 1)
	step("again", good, true, 1)
	step("unknown kid right after", unknown, false, 1)
	for range 20 {
		_, _, _ = o.verify(ctx, unknown)
	}
	step("many unknown kids", unknown, false, 1)
	clock = clock.Add(time.Minute)
	step("unknown kid later", unknown, false, 2)
	step("known kid still", good, true, 2)
}

// TestOAuthAdminAPIAndSessions: the admin API's checks (Authenticate,
// AllowAdmin, AllowProject) take the issuer's tokens too, and an MCP
// session belongs to the person who opened it.
func TestOAuthAdminAPIAndSessions(t *testing.T) {
	idp := oidctest.Start(t)
	h, base, _ := oauthHub(t, config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, nil)
	resP := publicURL + "/projects/p/mcp"
	req := func(tok string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/projects", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		r, err := h.Authenticate(r)
		if err != nil {
			t.Fatalf("Authenticate: %v", err)
		}
		return r
	}
	admin := req(idp.Token(t, []string{"mcp:admin"}, publicURL))
	if err := h.AllowAdmin(admin, "creating a project"); err != nil {
		t.Errorf("admin token from the issuer: %v", err)
	}
	forP := req(idp.Token(t, []string{"mcp", "mcp:admin"}, resP)) // admin scope, but only for p
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"AllowAdmin, token for p", h.AllowAdmin(forP, "creating a project"), switchboard.ErrForbidden},
		{"AllowProject p, token for p", h.AllowProject(forP, "p"), nil},
		{"AllowProject default, token for p", h.AllowProject(forP, Default), switchboard.ErrUnauthorized},
		{"AllowTokens p, token for p", h.AllowTokens(forP, "p"), switchboard.ErrForbidden},
	} {
		if !errors.Is(c.err, c.want) && (c.want != nil || c.err != nil) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}

	// A session opened by alice is not bob's, though both reach p.
	now := time.Now()
	person := func(sub string) string {
		return "Bearer " + idp.Sign(t, map[string]any{"iss": idp.Issuer, "sub": sub, "aud": resP, "scope": "mcp", "exp": now.Add(time.Hour).Unix()})
	}
	resp, _ := postAuth(t, base+"/projects/p/mcp", person("alice"))
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("alice's initialize: %s", resp.Status)
	}
	list := func(authz string) int {
		r, _ := http.NewRequest(http.MethodPost, base+"/projects/p/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		r.Header.Set("Mcp-Session-Id", sid)
		r.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		r.Header.Set("Authorization", authz)
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := list(person("bob")); got != http.StatusForbidden {
		t.Errorf("bob on alice's session: %d, want 403", got)
	}
	if got := list(person("alice")); got != http.StatusOK {
		t.Errorf("alice on her session: %d, want 200", got)
	}
}

// TestOAuthWithoutAdminTokenClosesAll: with an issuer and no admin token,
// nothing is open: a request without a token is refused by the admin API
// as by the MCP endpoints (dev mode, where a request without a token is
// the admin, is for a gateway without sign-in), and an issuer's admin
// token is the admin.
func TestOAuthWithoutAdminTokenClosesAll(t *testing.T) {
	idp := oidctest.Start(t)
	h, _ := authHub(t, "", config.Auth{PublicURL: publicURL, Issuer: idp.Issuer, Scope: "mcp", AdminClaim: "scope=mcp:admin"}, nil)
	if _, err := h.Authenticate(httptest.NewRequest(http.MethodGet, "/api/v1/projects", nil)); !errors.Is(err, switchboard.ErrUnauthorized) {
		t.Fatalf("a request without a token, issuer set, no admin token: %v; want ErrUnauthorized", err)
	}
	r := httptest.NewRequest(http.MethodGet, "/api/v1/projects", nil)
	r.Header.Set("Authorization", "Bearer "+idp.Token(t, []string{"mcp:admin"}, publicURL))
	r, err := h.Authenticate(r)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AllowAdmin(r, "creating a project"); err != nil {
		t.Errorf("the issuer's admin token: %v", err)
	}
}
