package config

import (
	"strings"
	"testing"
)

func TestAuthConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		bad     string // the variable the error names; "" is valid
		enabled bool
	}{
		{"off by default", nil, "", false},
		{"both set", map[string]string{"MCP_SERVER_PUBLIC_URL": "https://mcp.example.com/", "MCP_SERVER_AUTH_ISSUER": "https://id.example.com"}, "", true},
		{"loopback http issuer", map[string]string{"MCP_SERVER_PUBLIC_URL": "http://127.0.0.1:8080", "MCP_SERVER_AUTH_ISSUER": "http://127.0.0.1:9000"}, "", true},
		{"issuer alone", map[string]string{"MCP_SERVER_AUTH_ISSUER": "https://id.example.com"}, "MCP_SERVER_AUTH_ISSUER", false},
		{"public URL alone", map[string]string{"MCP_SERVER_PUBLIC_URL": "https://mcp.example.com"}, "MCP_SERVER_AUTH_ISSUER", false},
		{"plain http issuer", map[string]string{"MCP_SERVER_PUBLIC_URL": "https://mcp.example.com", "MCP_SERVER_AUTH_ISSUER": "http://id.example.com"}, "MCP_SERVER_AUTH_ISSUER", true},
		{"public URL with query", map[string]string{"MCP_SERVER_PUBLIC_URL": "https://mcp.example.com/?x=1", "MCP_SERVER_AUTH_ISSUER": "https://id.example.com"}, "MCP_SERVER_PUBLIC_URL", true},
		{"admin claim without value", map[string]string{"MCP_SERVER_AUTH_ADMIN_CLAIM": "groups"}, "MCP_SERVER_AUTH_ADMIN_CLAIM", false},
		{"scope with a space", map[string]string{"MCP_SERVER_AUTH_SCOPE": "a b"}, "MCP_SERVER_AUTH_SCOPE", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(envOf(tt.env))
			if tt.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Auth.Enabled() != tt.enabled {
					t.Errorf("Enabled() = %v, want %v", cfg.Auth.Enabled(), tt.enabled)
				}
				if strings.HasSuffix(cfg.Auth.PublicURL, "/") {
					t.Errorf("PublicURL %q keeps its trailing slash", cfg.Auth.PublicURL)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.bad+":") {
				t.Fatalf("Load: %v, want an error naming %s", err, tt.bad)
			}
		})
	}
	cfg, _ := Load(envOf(nil))
	if c, v := cfg.Auth.AdminClaimPair(); c != "scope" || v != "mcp:admin" || cfg.Auth.RequiredScope() != "mcp" {
		t.Errorf("defaults: admin %s=%s, scope %q", c, v, cfg.Auth.RequiredScope())
	}
}
