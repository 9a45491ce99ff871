package projects

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

const adminToken = "admin-token-for-tests-0123456789"

// newStore is a real embedded store with projects a and b, and a token
// for a.
func newStore(t *testing.T) (switchboard.Store, string, switchboard.Token) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, id := range []string{"a", "b"} {
		if _, err := st.CreateProject(ctx, switchboard.Project{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	tok, hash := secrets.NewToken()
	rec, err := st.CreateToken(ctx, switchboard.Token{ProjectID: "a", Name: "t", Hash: hash})
	if err != nil {
		t.Fatal(err)
	}
	return st, tok, rec
}

func bearer(tok string) map[string]string {
	if tok == "" {
		return nil
	}
	return map[string]string{"Authorization": "Bearer " + tok}
}

func TestAuthenticateAndAuthorize(t *testing.T) {
	st, tokA, _ := newStore(t)
	ctx := context.Background()
	other, _ := secrets.NewToken()
	cases := []struct {
		name    string
		admin   string            // configured admin token
		header  map[string]string // request headers
		project string
		want    error // from authenticate, then from project(); nil = allowed
	}{
		{"dev mode, no token, open project", "", nil, "b", nil},
		{"dev mode, no token, project with a token", "", nil, "a", switchboard.ErrUnauthorized},
		{"dev mode, own token", "", bearer(tokA), "a", nil},
		{"dev mode, token of another project", "", bearer(tokA), "b", switchboard.ErrForbidden},
		{"admin set, no token", adminToken, nil, "b", switchboard.ErrUnauthorized},
		{"admin set, admin token", adminToken, bearer(adminToken), "a", nil},
		{"admin set, project token", adminToken, bearer(tokA), "a", nil},
		{"admin set, project token elsewhere", adminToken, bearer(tokA), "b", switchboard.ErrForbidden},
		{"unknown token", adminToken, bearer(other), "a", switchboard.ErrUnauthorized},
		{"not a token", "", bearer("hello"), "b", switchboard.ErrUnauthorized},
		{"basic auth", "", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, "b", switchboard.ErrUnauthorized},
		{"bearer without token", "", map[string]string{"Authorization": "Bearer "}, "b", switchboard.ErrUnauthorized},
		{"admin token in dev mode is just a string", "", bearer(adminToken), "b", switchboard.ErrUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAuth(st, c.admin)
			r := httptest.NewRequest("GET", "/mcp", nil)
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			p, err := a.authenticate(r)
			if err == nil {
				err = a.project(ctx, p, c.project)
			}
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if err != nil && (strings.Contains(err.Error(), tokA) || strings.Contains(err.Error(), adminToken)) {
				t.Errorf("error quotes a token: %v", err)
			}
		})
	}
}

// A token revoked in the store stops working at once after forget (the
// replica that revoked it) and within tokenCacheTTL everywhere else.
func TestRevocationAndCache(t *testing.T) {
	st, tokA, rec := newStore(t)
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	a := newAuth(st, adminToken)
	a.now = func() time.Time { return now }
	req := func() error {
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+tokA)
		_, err := a.authenticate(r)
		return err
	}
	if err := req(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeToken(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := req(); err != nil {
		t.Fatalf("cached token refused before the TTL: %v", err)
	}
	now = now.Add(tokenCacheTTL)
	if err := req(); !errors.Is(err, switchboard.ErrUnauthorized) {
		t.Fatalf("revoked token after the TTL: %v", err)
	}

	// forget: immediate.
	tok2, hash := secrets.NewToken()
	rec2, err := st.CreateToken(ctx, switchboard.Token{ProjectID: "a", Hash: hash})
	if err != nil {
		t.Fatal(err)
	}
	tokA = tok2
	if err := req(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokeToken(ctx, "a", rec2.ID); err != nil {
		t.Fatal(err)
	}
	a.forget("a")
	if err := req(); !errors.Is(err, switchboard.ErrUnauthorized) {
		t.Fatalf("revoked token after forget: %v", err)
	}

	// A project without valid tokens opens again to dev-mode clients.
	d := newAuth(st, "")
	d.now = a.now
	if err := d.project(ctx, Principal{Admin: true, Dev: true}, "a"); err != nil {
		t.Fatalf("project whose tokens are all revoked still closed: %v", err)
	}
}

func TestAdminOnly(t *testing.T) {
	a := newAuth(nil, adminToken)
	if err := a.adminOnly(Principal{Admin: true}, "x"); err != nil {
		t.Error(err)
	}
	if err := a.adminOnly(Principal{Admin: true, Dev: true}, "x"); err != nil {
		t.Error(err)
	}
	if err := a.adminOnly(Principal{Token: switchboard.Token{ID: "1", ProjectID: "a"}}, "creating a token"); !errors.Is(err, switchboard.ErrForbidden) {
		t.Errorf("project token took an admin action: %v", err)
	}
	// Dev mode (issue 20, item 3): no admin token exists to send, so the
	// refusal says to send the action without the project token.
	err := newAuth(nil, "").adminOnly(Principal{Token: switchboard.Token{ID: "1", ProjectID: "a"}}, "reloading the servers file")
	if !errors.Is(err, switchboard.ErrForbidden) || !strings.Contains(err.Error(), "without a token") || strings.Contains(err.Error(), "needs the admin token") {
		t.Errorf("dev mode, project token: %v; want 403 saying to send it without a token", err)
	}
}

// pausingTokens is the real store with a pause after each token read, to
// line a revocation up between a read and the caching of its result.
type pausingTokens struct {
	switchboard.Store
	read, resume chan struct{}
}

func (p pausingTokens) TokenByHash(ctx context.Context, hash []byte) (switchboard.Token, error) {
	t, err := p.Store.TokenByHash(ctx, hash)
	p.read <- struct{}{}
	<-p.resume
	return t, err
}

// A token read from the store just before its revocation committed is not
// cached past the revocation: the next request is refused at once.
func TestRevocationRacingALookup(t *testing.T) {
	st, tok, rec := newStore(t)
	ctx := context.Background()
	ps := pausingTokens{st, make(chan struct{}), make(chan struct{})}
	a := newAuth(ps, adminToken)
	req := func() error {
		r := httptest.NewRequest("GET", "/mcp", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		_, err := a.authenticate(r)
		return err
	}
	first := make(chan error, 1)
	go func() { first <- req() }()
	<-ps.read // read, valid, not yet cached
	if _, err := st.RevokeToken(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	a.forget("a") // what TokensChanged does after a revocation
	close(ps.resume)
	if err := <-first; err != nil {
		t.Fatalf("the request in flight: %v", err) // it was valid when read
	}
	go func() {
		for range ps.read {
		}
	}()
	defer close(ps.read)
	if err := req(); !errors.Is(err, switchboard.ErrUnauthorized) {
		t.Fatalf("a request after the revocation: %v, want it refused", err)
	}
}
