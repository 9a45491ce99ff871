package projects

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
)

// User is the person (or service) an identity provider's access token
// names: issuer and subject identify them, Name and Email are shown
// where the token has them. The token itself is never kept.
type User struct {
	Issuer  string
	Subject string
	Name    string
	Email   string

	audience []string
	claims   map[string]any
}

// tokenSkew is the clock difference tolerated on exp, nbf and iat.
const tokenSkew = 30 * time.Second

// allowedAlgs are the signature algorithms a token may use: asymmetric
// only, so neither "none" nor an HMAC keyed with a public key (the
// HS/RS confusion) is ever accepted.
var allowedAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// oauth checks access tokens from one issuer and describes each project
// as a protected resource (RFC 9728).
type oauth struct {
	cfg          config.Auth
	scope        string // required scope, "" for none
	adminClaim   string
	adminValue   string
	client       *http.Client
	now          func() time.Time
	refetchEvery time.Duration // the least time between two JWKS fetches

	fetch     sync.Mutex // one fetch at a time; holds mu never
	mu        sync.Mutex
	jwksURI   string
	keys      jose.JSONWebKeySet
	lastFetch time.Time
	lastErr   error
}

func newOAuth(cfg config.Auth, client *http.Client) *oauth {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	o := &oauth{cfg: cfg, scope: cfg.RequiredScope(), client: client, now: time.Now, refetchEvery: 30 * time.Second}
	o.adminClaim, o.adminValue = cfg.AdminClaimPair()
	return o
}

// resource is project id's canonical resource URI.
func (o *oauth) resource(id string) string { return o.cfg.PublicURL + endpointPath(id) }

// metadataURL is where project id's resource metadata is served.
func (o *oauth) metadataURL(id string) string {
	return o.cfg.PublicURL + "/.well-known/oauth-protected-resource" + endpointPath(id)
}

func endpointPath(id string) string {
	if id == Default {
		return "/mcp"
	}
	return "/projects/" + id + "/mcp"
}

// looksLikeJWT: three base64url parts; static tokens have no dots.
func looksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// verify checks a JWT access token: signature by a key of the issuer's
// JWKS with an allowed algorithm, the exact issuer, exp (required) and
// nbf within tokenSkew. The audience is checked per project (project).
// Errors wrap ErrUnauthorized, or ErrUnavailable when the issuer's keys
// cannot be had.
func (o *oauth) verify(ctx context.Context, raw string) (*User, bool, error) {
	tok, err := jwt.ParseSigned(raw, allowedAlgs)
	if err != nil {
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: not a JWT signed with an allowed algorithm (%s)", algNames())
	}
	kid := tok.Headers[0].KeyID
	alg := tok.Headers[0].Algorithm
	key, err := o.key(ctx, kid, alg)
	if err != nil {
		return nil, false, err
	}
	var std jwt.Claims
	all := map[string]any{}
	if err := tok.Claims(key.Key, &std, &all); err != nil {
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: bad signature")
	}
	if std.Issuer != o.cfg.Issuer {
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: issued by %q, not by %s", switchboard.Clip(std.Issuer), o.cfg.Issuer)
	}
	if std.Expiry == nil {
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: it has no exp")
	}
	switch err := std.ValidateWithLeeway(jwt.Expected{Time: o.now()}, tokenSkew); {
	case errors.Is(err, jwt.ErrExpired):
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: expired")
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: not valid yet")
	case err != nil:
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token")
	}
	if std.Subject == "" {
		return nil, false, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: it has no sub")
	}
	u := &User{Issuer: std.Issuer, Subject: std.Subject, audience: std.Audience, claims: all}
	u.Name, _ = all["name"].(string)
	u.Email, _ = all["email"].(string)
	admin := claimHolds(all[o.adminClaim], o.adminValue) && slices.Contains(std.Audience, o.cfg.PublicURL)
	return u, admin, nil
}

func algNames() string {
	s := make([]string, len(allowedAlgs))
	for i, a := range allowedAlgs {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

// claimHolds: v is want, has want as one of its space-separated words
// (scope), or is an array holding it (scp, groups, roles).
func claimHolds(v any, want string) bool {
	switch v := v.(type) {
	case string:
		return slices.Contains(strings.Fields(v), want)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// hasScope reports whether u's token grants scope (scope or scp).
func (u *User) hasScope(scope string) bool {
	return claimHolds(u.claims["scope"], scope) || claimHolds(u.claims["scp"], scope)
}

// key returns the issuer's public key kid for alg, fetching the JWKS when
// it has none yet or does not hold kid, at most once per refetchEvery.
func (o *oauth) key(ctx context.Context, kid, alg string) (*jose.JSONWebKey, error) {
	if k := o.find(kid, alg); k != nil {
		return k, nil
	}
	o.fetch.Lock()
	defer o.fetch.Unlock()
	if k := o.find(kid, alg); k != nil { // fetched while this one waited
		return k, nil
	}
	o.mu.Lock()
	recent := !o.lastFetch.IsZero() && o.now().Sub(o.lastFetch) < o.refetchEvery
	lastErr, have := o.lastErr, len(o.keys.Keys) > 0
	o.mu.Unlock()
	if !recent {
		ks, uri, err := o.fetchKeys(ctx)
		o.mu.Lock()
		o.lastFetch, o.lastErr = o.now(), err
		if err == nil {
			o.keys, o.jwksURI = ks, uri
		}
		o.mu.Unlock()
		lastErr, have = err, have || err == nil
		if k := o.find(kid, alg); k != nil {
			return k, nil
		}
	}
	if lastErr != nil && !have {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "cannot check the token now: the keys of the issuer %s could not be fetched (%v); retry later", o.cfg.Issuer, lastErr)
	}
	return nil, switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: the issuer %s has no key %q for %s", o.cfg.Issuer, switchboard.Clip(kid), alg)
}

func (o *oauth) find(kid, alg string) *jose.JSONWebKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.keys.Keys {
		k := &o.keys.Keys[i]
		if kid != "" && k.KeyID != kid {
			continue
		}
		if !k.Valid() || !k.IsPublic() || (k.Use != "" && k.Use != "sig") || (k.Algorithm != "" && k.Algorithm != alg) {
			continue
		}
		if !keyFits(k.Key, alg) {
			continue
		}
		return k
	}
	return nil
}

// keyFits: the key's type is the one alg needs (an EC key never checks
// an RS256 signature, and no key is ever an HMAC secret).
func keyFits(key any, alg string) bool {
	switch {
	case strings.HasPrefix(alg, "RS"), strings.HasPrefix(alg, "PS"):
		return keyType(key) == "RSA"
	case strings.HasPrefix(alg, "ES"):
		return keyType(key) == "EC"
	case alg == string(jose.EdDSA):
		return keyType(key) == "OKP"
	}
	return false
}

func keyType(key any) string {
	switch key.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "EC"
	case ed25519.PublicKey:
		return "OKP"
	}
	return ""
}

// fetchKeys reads the issuer's metadata (OpenID discovery, else RFC 8414)
// for its jwks_uri, then the JWKS.
func (o *oauth) fetchKeys(ctx context.Context) (jose.JSONWebKeySet, string, error) {
	var ks jose.JSONWebKeySet
	o.mu.Lock()
	uri := o.jwksURI
	o.mu.Unlock()
	if uri == "" {
		var err error
		if uri, err = o.discover(ctx); err != nil {
			return ks, "", err
		}
	}
	if err := o.getJSON(ctx, uri, &ks); err != nil {
		return ks, uri, fmt.Errorf("jwks: %w", err)
	}
	return ks, uri, nil
}

func (o *oauth) discover(ctx context.Context) (string, error) {
	iss := o.cfg.Issuer
	u, _ := url.Parse(iss)
	path := strings.TrimRight(u.Path, "/")
	candidates := []string{
		strings.TrimRight(iss, "/") + "/.well-known/openid-configuration",
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + path,
	}
	var errs []error
	for _, c := range candidates {
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := o.getJSON(ctx, c, &md); err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != iss {
			return "", fmt.Errorf("the metadata at %s names the issuer %q, not %q", c, md.Issuer, iss)
		}
		if md.JWKSURI == "" {
			return "", fmt.Errorf("the metadata at %s has no jwks_uri", c)
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("discovery: %w", errors.Join(errs...))
}

func (o *oauth) getJSON(ctx context.Context, uri string, v any) error {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodGet, uri, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ue.Timeout() {
			return fmt.Errorf("GET %s: timed out", uri)
		}
		return fmt.Errorf("GET %s: %w", uri, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", uri, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", uri, err)
	}
	return nil
}

// project reports whether u may use project id: its token's aud holds the
// project's resource (else ErrUnauthorized: the token is not for it) and
// grants the required scope (else an insufficientScope, ErrForbidden).
func (o *oauth) project(u *User, id string) error {
	if !slices.Contains(u.audience, o.resource(id)) {
		return switchboard.Errorf(switchboard.ErrUnauthorized, "invalid token: it is not for this project (its aud does not hold %s)", o.resource(id))
	}
	if o.scope != "" && !u.hasScope(o.scope) {
		return insufficientScope{switchboard.Errorf(switchboard.ErrForbidden, "the token lacks the scope %q", o.scope), o.scope}
	}
	return nil
}

// insufficientScope is a 403 whose challenge names the scope needed.
type insufficientScope struct {
	error
	scope string
}

func (e insufficientScope) Unwrap() error { return e.error }

// challenge is the WWW-Authenticate value for a failure on project id's
// endpoint (RFC 6750, RFC 9728 resource_metadata).
func (o *oauth) challenge(id string, err error, presented bool) string {
	var b strings.Builder
	b.WriteString(`Bearer resource_metadata=` + strconv.Quote(o.metadataURL(id)))
	var is insufficientScope
	switch {
	case errors.As(err, &is):
		b.WriteString(`, error="insufficient_scope"`)
	case presented && errors.Is(err, switchboard.ErrUnauthorized):
		b.WriteString(`, error="invalid_token"`)
	}
	if o.scope != "" {
		b.WriteString(`, scope=` + strconv.Quote(o.scope))
	}
	return b.String()
}

// metadata serves project id's protected resource metadata (RFC 9728).
func (o *oauth) metadata(w http.ResponseWriter, id string) {
	scopes := []string{}
	if o.scope != "" {
		scopes = append(scopes, o.scope)
	}
	if o.adminClaim == "scope" && !slices.Contains(scopes, o.adminValue) {
		scopes = append(scopes, o.adminValue)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"resource":                 o.resource(id),
		"authorization_servers":    []string{o.cfg.Issuer},
		"scopes_supported":         scopes,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Switchboard project " + id,
	})
}
