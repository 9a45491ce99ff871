package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Auth makes each project an OAuth protected resource (RFC 9728) whose
// clients bring JWT access tokens from one identity provider. Off unless
// both PublicURL and Issuer are set; static project tokens and the admin
// token keep working beside it.
type Auth struct {
	// PublicURL is the gateway's address as clients reach it
	// (https://mcp.example.com): a project's canonical resource, the
	// audience its tokens must carry, is PublicURL + its endpoint path.
	PublicURL string `env:"MCP_SERVER_PUBLIC_URL"`
	// Issuer is the identity provider's issuer URL, exactly as its tokens
	// carry it in iss; its metadata names the JWKS.
	Issuer string `env:"MCP_SERVER_AUTH_ISSUER"`
	// Scope is the scope a token needs to use a project's MCP endpoint;
	// "none" requires none (the audience alone decides).
	Scope string `env:"MCP_SERVER_AUTH_SCOPE" envDefault:"mcp"`
	// AdminClaim is claim=value: a token whose claim holds value (equal,
	// a word of a space-separated string, or an element of an array) and
	// whose audience holds PublicURL is an admin.
	AdminClaim string `env:"MCP_SERVER_AUTH_ADMIN_CLAIM" envDefault:"scope=mcp:admin"`
}

// Enabled reports whether tokens from an issuer are accepted.
func (a Auth) Enabled() bool { return a.PublicURL != "" && a.Issuer != "" }

// RequiredScope is Scope, or "" when none is required.
func (a Auth) RequiredScope() string {
	if a.Scope == "none" {
		return ""
	}
	return a.Scope
}

// AdminClaimPair splits AdminClaim into claim and value.
func (a Auth) AdminClaimPair() (claim, value string) {
	claim, value, _ = strings.Cut(a.AdminClaim, "=")
	return strings.TrimSpace(claim), strings.TrimSpace(value)
}

// normalize drops a trailing slash from PublicURL, so resources are
// PublicURL + "/mcp" with exactly one slash.
func (a *Auth) normalize() { a.PublicURL = strings.TrimRight(a.PublicURL, "/") }

func (a Auth) validate() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}
	if (a.PublicURL == "") != (a.Issuer == "") {
		bad("MCP_SERVER_AUTH_ISSUER", "MCP_SERVER_PUBLIC_URL and MCP_SERVER_AUTH_ISSUER go together: set both to accept tokens from an identity provider, or neither")
	}
	if a.PublicURL != "" && !plainHTTPURL(a.PublicURL, false) {
		bad("MCP_SERVER_PUBLIC_URL", "must be the gateway's http:// or https:// address as clients reach it, such as https://mcp.example.com, without user, query or fragment")
	}
	if a.Issuer != "" && !plainHTTPURL(a.Issuer, true) {
		bad("MCP_SERVER_AUTH_ISSUER", "must be the issuer's https:// URL exactly as its tokens' iss claim holds it (http:// only for a loopback host), without user, query or fragment")
	}
	if strings.ContainsAny(a.Scope, " \t\"\\") || a.Scope == "" {
		bad("MCP_SERVER_AUTH_SCOPE", "must be one scope name without spaces or quotes, or none, got %q", a.Scope)
	}
	if c, v := a.AdminClaimPair(); c == "" || v == "" {
		bad("MCP_SERVER_AUTH_ADMIN_CLAIM", "must be claim=value, such as scope=mcp:admin or groups=switchboard-admins, got %q", a.AdminClaim)
	}
	return errs
}

// plainHTTPURL: an absolute http(s) URL without user, query or fragment;
// with httpsOnly, http is allowed only for a loopback host.
func plainHTTPURL(s string, httpsOnly bool) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		if !httpsOnly {
			return true
		}
		h := u.Hostname()
		return h == "localhost" || h == "127.0.0.1" || h == "::1"
	}
	return false
}
