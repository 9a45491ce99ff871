package projects

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
)

// tokenCacheTTL bounds how long a replica trusts what it read about a
// token: a token revoked on another replica stops working within it.
const tokenCacheTTL = 5 * time.Second

// maxCachedTokens bounds the token cache; it is emptied when full.
const maxCachedTokens = 10000

// Principal is who sent a request.
type Principal struct {
	// Admin: the admin token, or anyone in dev mode (no admin token).
	Admin bool
	// Dev is set for requests without a token in dev mode.
	Dev bool
	// Token is the project token used, if any.
	Token switchboard.Token
	// User is the person an identity provider's access token names, if
	// the request brought one (Admin is set when its claims make them one).
	User *User
}

// key names the principal for session ownership.
func (p Principal) key() string {
	switch {
	case p.Token.ID != "":
		return "token:" + p.Token.ID
	case p.User != nil:
		return "user:" + strconv.Quote(p.User.Issuer) + strconv.Quote(p.User.Subject)
	case p.Dev:
		return "dev"
	default:
		return "admin"
	}
}

type principalCtxKey struct{}

// principalOf is who sent r, as the guard or Authenticate found.
func principalOf(r *http.Request) Principal {
	p, _ := r.Context().Value(principalCtxKey{}).(Principal)
	return p
}

// personOf is the edge's Options.Person: an identity provider's user,
// for the call log.
func personOf(r *http.Request) (principal, name string) {
	u := principalOf(r).User
	if u == nil {
		return "", ""
	}
	name = u.Email
	if name == "" {
		name = u.Name
	}
	return u.Issuer + " " + u.Subject, switchboard.Clip(name)
}

// principalKey is the edge's Options.Principal.
func principalKey(r *http.Request) string { return principalOf(r).key() }

// auth authenticates requests and decides what a principal may reach.
//
// With an admin token configured, every request but health checks needs a
// token: the admin token reaches everything, a project token its own
// project. Without one (dev mode, which config allows only on loopback or
// with MCP_SERVER_ALLOW_UNAUTHENTICATED), a request without a token may do
// everything except reach a project that has tokens: creating a token for
// a project closes it to anonymous clients.
type auth struct {
	st    switchboard.TokenStore
	admin string
	// oauth, when set, accepts access tokens from an identity provider.
	oauth *oauth

	mu        sync.Mutex
	byHash    map[string]cachedToken
	hasTokens map[string]cachedFlag
	// forgets counts forget calls: a store read that started before one
	// (a token read just before its revocation committed) is not cached.
	forgets uint64
	now     func() time.Time
}

type cachedToken struct {
	tok     switchboard.Token
	expires time.Time
}

type cachedFlag struct {
	has     bool
	expires time.Time
}

func newAuth(st switchboard.TokenStore, admin string) *auth {
	return &auth{st: st, admin: admin, byHash: map[string]cachedToken{}, hasTokens: map[string]cachedFlag{}, now: time.Now}
}

// authenticate names the sender of r. Errors wrap ErrUnauthorized with a
// message that says what to send; a store failure wraps ErrUnavailable.
func (a *auth) authenticate(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		switch {
		case a.admin != "":
			return Principal{}, switchboard.Errorf(switchboard.ErrUnauthorized, "a token is required: send Authorization: Bearer <token> (a project token or the admin token)")
		case a.oauth != nil:
			// Sign-in configured: nothing is open, the admin API
			// included (dev mode is for a gateway without tokens).
			return Principal{}, switchboard.Errorf(switchboard.ErrUnauthorized, "a token is required: send Authorization: Bearer <token> (an access token from %s, or a project token)", a.oauth.cfg.Issuer)
		}
		return Principal{Admin: true, Dev: true}, nil
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return Principal{}, switchboard.Errorf(switchboard.ErrUnauthorized, "malformed Authorization header; send Authorization: Bearer <token>")
	}
	if a.admin != "" && secrets.Equal(tok, a.admin) {
		return Principal{Admin: true}, nil
	}
	if a.oauth != nil && looksLikeJWT(tok) {
		u, admin, err := a.oauth.verify(r.Context(), tok)
		if err != nil {
			return Principal{}, err
		}
		return Principal{Admin: admin, User: u}, nil
	}
	if !secrets.ValidTokenFormat(tok) {
		return Principal{}, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token")
	}
	t, err := a.lookup(r.Context(), secrets.HashToken(tok))
	if err != nil {
		return Principal{}, err
	}
	return Principal{Token: t}, nil
}

func (a *auth) lookup(ctx context.Context, hash []byte) (switchboard.Token, error) {
	now := a.now()
	a.mu.Lock()
	c, ok := a.byHash[string(hash)]
	gen := a.forgets
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.tok, nil
	}
	t, err := a.st.TokenByHash(ctx, hash)
	if errors.Is(err, switchboard.ErrNotFound) {
		return t, switchboard.Errorf(switchboard.ErrUnauthorized, "unknown or revoked token")
	}
	if err != nil {
		return t, switchboard.Errorf(switchboard.ErrUnavailable, "cannot check the token now: the store is unavailable; retry")
	}
	a.mu.Lock()
	if len(a.byHash) >= maxCachedTokens {
		clear(a.byHash)
	}
	if a.forgets == gen {
		a.byHash[string(hash)] = cachedToken{tok: t, expires: now.Add(tokenCacheTTL)}
	}
	a.mu.Unlock()
	return t, nil
}

// project reports whether p may reach project id: nil, or an error
// wrapping ErrForbidden or ErrUnauthorized.
func (a *auth) project(ctx context.Context, p Principal, id string) error {
	switch {
	case p.Token.ID != "":
		if p.Token.ProjectID != id {
			return switchboard.Errorf(switchboard.ErrForbidden, "this token belongs to another project")
		}
		return nil
	case p.User != nil && !p.Admin:
		return a.oauth.project(p.User, id)
	case p.Dev:
		has, err := a.projectHasTokens(ctx, id)
		if err != nil {
			return err
		}
		if has {
			return switchboard.Errorf(switchboard.ErrUnauthorized, "project %q requires one of its tokens: send Authorization: Bearer <token>", id)
		}
		return nil
	case p.Admin:
		return nil
	}
	return switchboard.Errorf(switchboard.ErrUnauthorized, "a token is required")
}

func (a *auth) projectHasTokens(ctx context.Context, id string) (bool, error) {
	now := a.now()
	a.mu.Lock()
	c, ok := a.hasTokens[id]
	gen := a.forgets
	a.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.has, nil
	}
	list, err := a.st.ListTokens(ctx, id)
	if errors.Is(err, switchboard.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, switchboard.Errorf(switchboard.ErrUnavailable, "cannot check the project's tokens now: the store is unavailable; retry")
	}
	has := false
	for _, t := range list {
		if t.RevokedAt.IsZero() {
			has = true
			break
		}
	}
	a.mu.Lock()
	if len(a.hasTokens) >= maxCachedTokens {
		clear(a.hasTokens)
	}
	if a.forgets == gen {
		a.hasTokens[id] = cachedFlag{has: has, expires: now.Add(tokenCacheTTL)}
	}
	a.mu.Unlock()
	return has, nil
}

// forget drops what is cached about project id's tokens.
func (a *auth) forget(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forgets++
	delete(a.hasTokens, id)
	for h, c := range a.byHash {
		if c.tok.ProjectID == id {
			delete(a.byHash, h)
		}
	}
}

// expire drops stale cache entries (called by the sync loop).
func (a *auth) expire() {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for h, c := range a.byHash {
		if !now.Before(c.expires) {
			delete(a.byHash, h)
		}
	}
	for id, c := range a.hasTokens {
		if !now.Before(c.expires) {
			delete(a.hasTokens, id)
		}
	}
}

// admin reports whether p may take admin actions (projects, tokens).
func (a *auth) adminOnly(p Principal, what string) error {
	if p.Admin {
		return nil
	}
	if a.admin == "" {
		// Dev mode has no admin token to send: its admin is a request
		// without one, and a project token stays within its project.
		return switchboard.Errorf(switchboard.ErrForbidden, "%s is an admin action, and a project token reaches only its project: in dev mode (no MCP_SERVER_ADMIN_TOKEN) send it without a token (SWITCHBOARD_TOKEN= switchboard ...)", what)
	}
	return switchboard.Errorf(switchboard.ErrForbidden, "%s needs the admin token (MCP_SERVER_ADMIN_TOKEN)", what)
}
