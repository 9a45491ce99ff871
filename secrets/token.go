package secrets

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// TokenPrefix starts every API token, so that secret scanners and people
// can recognise one.
const TokenPrefix = "sbt_"

const tokenBytes = 32

var tokenEncoding = base64.RawURLEncoding.Strict()

// NewToken returns a new API token and the hash to store for it. The
// token itself is shown to its owner once and never stored. It cannot
// fail: crypto/rand.Read never returns an error.
func NewToken() (token string, hash []byte) {
	b := make([]byte, tokenBytes)
	rand.Read(b)
	token = TokenPrefix + tokenEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken returns the SHA-256 of token, the value the store looks tokens
// up by. A plain hash is enough: tokens carry 256 random bits, so there is
// nothing for a slow hash to protect against.
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// ValidTokenFormat reports whether s has the exact shape of a token from
// NewToken, so that a garbled or foreign credential is refused before any
// store lookup.
func ValidTokenFormat(s string) bool {
	body, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(body) != tokenEncoding.EncodedLen(tokenBytes) {
		return false
	}
	// Strict rejects stray bits in the last character; the decoded length
	// catches the CR and LF that base64 decoding skips.
	b, err := tokenEncoding.DecodeString(body)
	return err == nil && len(b) == tokenBytes
}

// Equal compares a presented credential with the configured one (the
// admin token) in time that depends on neither's content nor length: it
// compares SHA-256 digests. An empty string equals nothing, not even
// another empty string, so an unset token never lets anyone in.
func Equal(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}
