package secrets_test

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/secrets"
)

func TestNewToken(t *testing.T) {
	seen := make(map[string]bool)
	hashes := make(map[string]bool)
	for range 1000 {
		tok, hash := secrets.NewToken()
		if !strings.HasPrefix(tok, "sbt_") || len(tok) != 4+43 || !secrets.ValidTokenFormat(tok) {
			t.Fatalf("NewToken() = %q, want sbt_ and 43 base64url characters", tok)
		}
		if sum := sha256.Sum256([]byte(tok)); !bytes.Equal(hash, sum[:]) || !bytes.Equal(secrets.HashToken(tok), hash) {
			t.Fatalf("hash of %q is not its SHA-256", tok)
		}
		if seen[tok] || hashes[string(hash)] {
			t.Fatalf("token %q generated twice", tok)
		}
		seen[tok], hashes[string(hash)] = true, true
	}
}

func TestValidTokenFormat(t *testing.T) {
	tok, _ := secrets.NewToken()
	body := tok[4:]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	// The last character carries 4 bits and 2 zero bits; setting one of
	// those decodes to the same bytes but is not a token NewToken makes.
	last := body[42]
	stray := body[:42] + string(alphabet[strings.IndexByte(alphabet, last)|1])
	tests := map[string]string{
		"empty":            "",
		"prefix only":      "sbt_",
		"no prefix":        body,
		"other prefix":     "sbx_" + body,
		"upper prefix":     "SBT_" + body,
		"one short":        "sbt_" + body[:42],
		"one long":         tok + "A",
		"padded":           tok + "=",
		"std alphabet +":   "sbt_+" + body[1:],
		"std alphabet /":   "sbt_/" + body[1:],
		"space":            "sbt_ " + body[1:],
		"inner newline":    "sbt_" + body[:20] + "\n" + body[21:],
		"trailing newline": "sbt_" + body[:42] + "\n",
		"stray bits":       "sbt_" + stray,
		"bearer prefix":    "Bearer " + tok,
		"non-ASCII":        "sbt_" + body[:41] + "é",
		"dot":              "sbt_" + body[:42] + ".",
	}
	for name, s := range tests {
		if secrets.ValidTokenFormat(s) {
			t.Errorf("%s: ValidTokenFormat(%q) = true", name, s)
		}
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"admin-token-1234", "admin-token-1234", true},
		{"admin-token-1234", "admin-token-1235", false},
		{"admin-token-1234", "admin-token-123", false},
		{"admin-token-1234", "admin-token-12345", false},
		{"admin-token-1234", "", false},
		{"", "admin-token-1234", false},
		{"", "", false}, // an unset admin token lets no one in
		{"a", "a", true},
	}
	for _, tt := range tests {
		if got := secrets.Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
