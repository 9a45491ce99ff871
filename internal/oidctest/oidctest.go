// Package oidctest runs a real OpenID provider in a test: zitadel/oidc
// v3's op package (an OpenID Certified implementation) with its example
// in-memory storage, issuing RS256 JWT access tokens through the client
// credentials grant, plus hand-signed tokens for the cases a well-behaved
// provider never issues (expired, not yet valid, alg none, HS256).
package oidctest

import (
	"context"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is the example storage's client-credentials service user.
const (
	ClientID     = "sid1"
	clientSecret = "verysecret"
)

// Provider is a running OpenID provider.
type Provider struct {
	Issuer string
	st     *jwtStorage
	srv    *httptest.Server
}

// Start runs a provider on a loopback port until t ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	issuer := srv.URL
	st := &jwtStorage{Storage: storage.NewStorage(storage.NewUserStore(issuer))}
	srv.Config.Handler = exampleop.SetupServer(issuer, st, nil, false)
	t.Cleanup(srv.Close)
	return &Provider{Issuer: issuer, st: st, srv: srv}
}

// Token asks the provider's token endpoint for an access token with the
// given scopes whose aud holds audience (the test provider takes each
// audience as a scope "aud:<uri>", since it has no RFC 8707 support).
func (p *Provider) Token(t testing.TB, scopes []string, audience ...string) string {
	t.Helper()
	s := append([]string{}, scopes...)
	for _, a := range audience {
		s = append(s, "aud:"+a)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(s, " ")}}
	req, _ := http.NewRequest(http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(ClientID, clientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("token endpoint: %s %v %s %s", resp.Status, err, tr.Error, tr.Description)
	}
	return tr.AccessToken
}

// Sign signs claims with the provider's own RS256 key (and kid).
func (p *Provider) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	k, _ := p.st.Storage.SigningKey(context.Background())
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.Key()}, (&jose.SignerOptions{}).WithHeader("kid", k.ID()).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	jws, err := sig.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Unsigned is claims with alg none and the provider's kid.
func (p *Provider) Unsigned(claims map[string]any) string {
	k, _ := p.st.Storage.SigningKey(context.Background())
	return compact(map[string]any{"alg": "none", "typ": "JWT", "kid": k.ID()}, claims, nil)
}

// HS256WithPublicKey signs claims with HMAC-SHA256 keyed with the
// provider's RSA public key (PKIX DER and PEM both tried by attackers;
// this is the DER): the RS/HS confusion.
func (p *Provider) HS256WithPublicKey(claims map[string]any) string {
	k, _ := p.st.Storage.SigningKey(context.Background())
	pub, _ := x509.MarshalPKIXPublicKey(&k.Key().(*rsa.PrivateKey).PublicKey)
	return compact(map[string]any{"alg": "HS256", "typ": "JWT", "kid": k.ID()}, claims, func(in []byte) []byte {
		m := hmac.New(sha256.New, pub)
		m.Write(in)
		return m.Sum(nil)
	})
}

func compact(header, claims map[string]any, sign func([]byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	var sig []byte
	if sign != nil {
		sig = sign([]byte(in))
	}
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// jwtStorage is the example storage with JWT access tokens for the
// service user, the "aud:" scopes as its audience, and the requested
// scopes, a name and an e-mail as claims.
type jwtStorage struct{ *storage.Storage }

type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }

func (s *jwtStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	c, err := s.Storage.ClientCredentials(ctx, id, secret)
	if err != nil {
		return nil, err
	}
	return jwtClient{c}, nil
}

func (s *jwtStorage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if _, err := s.Storage.ClientCredentialsTokenRequest(ctx, id, scopes); err != nil {
		return nil, err
	}
	var aud, plain []string
	for _, sc := range scopes {
		if a, ok := strings.CutPrefix(sc, "aud:"); ok {
			aud = append(aud, a)
		} else {
			plain = append(plain, sc)
		}
	}
	return &oidc.JWTTokenRequest{Subject: id, Audience: aud, Scopes: plain}, nil
}

func (s *jwtStorage) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	var plain []string
	for _, sc := range scopes {
		if !strings.HasPrefix(sc, "aud:") {
			plain = append(plain, sc)
		}
	}
	return map[string]any{"scope": strings.Join(plain, " "), "name": "Service One", "email": "service-one@example.com"}, nil
}
