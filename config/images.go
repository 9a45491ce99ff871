package config

import (
	"fmt"
	"strings"
	"time"
)

// Images are the rules for the images hosted servers, catalog servers
// and the sandbox run, and how missing ones are pulled.
type Images struct {
	// PullPolicy is the default pull policy: if-not-present, always or
	// never; a hosted server or a catalog entry may set its own.
	PullPolicy string `env:"MCP_SERVER_PULL_POLICY" envDefault:"if-not-present"`
	// Allow lists the registries and repositories images may come from
	// (comma-separated); empty allows any.
	Allow []string `env:"MCP_SERVER_IMAGE_ALLOW" envSeparator:","`
	// RequireDigest refuses images named without @sha256:<digest>.
	RequireDigest bool `env:"MCP_SERVER_IMAGE_REQUIRE_DIGEST"`
	// PullTimeout bounds one pull; PullStallTimeout ends one that reports
	// no progress for that long.
	PullTimeout      time.Duration `env:"MCP_SERVER_PULL_TIMEOUT" envDefault:"10m"`
	PullStallTimeout time.Duration `env:"MCP_SERVER_PULL_STALL_TIMEOUT" envDefault:"60s"`
}

func (im Images) validate() []error {
	var errs []error
	bad := func(name, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, a...)))
	}
	switch im.PullPolicy {
	case "if-not-present", "always", "never":
	default:
		bad("MCP_SERVER_PULL_POLICY", "%q: want if-not-present, always or never", im.PullPolicy)
	}
	for _, a := range im.Allow {
		if a = strings.TrimSpace(a); a == "" || strings.ContainsAny(a, " \t\"'") {
			bad("MCP_SERVER_IMAGE_ALLOW", "%q: want comma-separated registries (ghcr.io/), repository prefixes (docker.io/mcp/*) or repositories (127.0.0.1:5000/tools/notes)", a)
		}
	}
	if im.PullTimeout <= 0 {
		bad("MCP_SERVER_PULL_TIMEOUT", "must be a positive duration such as 10m, got %s", im.PullTimeout)
	}
	if im.PullStallTimeout <= 0 {
		bad("MCP_SERVER_PULL_STALL_TIMEOUT", "must be a positive duration such as 60s, got %s", im.PullStallTimeout)
	}
	return errs
}
