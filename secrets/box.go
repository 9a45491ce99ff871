package secrets

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/switchboard-mcp/switchboard"
)

// KeySize is the length of a secret key in bytes (AES-256).
const KeySize = 32

// Ciphertext layout: version (1) || key id (4) || nonce (12) || sealed
// value and tag. The key id lets Open tell "wrong key" from "tampered".
const (
	version   = 1
	idLen     = 4
	headerLen = 1 + idLen
	// idLabel separates the key id hash from any other use of the key, so
	// the id reveals nothing reusable about it.
	idLabel = "switchboard secret key id v1\x00"
)

// Errors from Open. Each wraps a root sentinel, so errors.Is works with
// either; the *switchboard.Error around them carries the secret's name.
var (
	// ErrWrongKey wraps switchboard.ErrConfig: the data is intact, the
	// fix is to restore the key it was sealed with.
	ErrWrongKey = fmt.Errorf("%w: sealed with a different MCP_SERVER_SECRET_KEY", switchboard.ErrConfig)
	// ErrCorrupt wraps switchboard.ErrInternal: the ciphertext is
	// truncated, in an unknown format, altered, or belongs to another slot.
	ErrCorrupt = fmt.Errorf("%w: secret ciphertext is unreadable", switchboard.ErrInternal)
)

// Box seals and opens secret values under one key. It is safe for
// concurrent use.
type Box struct {
	aead cipher.AEAD // draws a fresh random nonce for every Seal
	id   [idLen]byte
}

// NewBox returns a Box for key. Errors: ErrConfig when key is not KeySize
// bytes long.
func NewBox(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "secret key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInternal, "secret key: %v", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInternal, "secret key: %v", err)
	}
	b := &Box{aead: aead}
	sum := sha256.Sum256(append([]byte(idLabel), key...))
	copy(b.id[:], sum[:])
	return b, nil
}

// KeyID names the key in logs (8 hex digits) without revealing it, so an
// operator can tell which key sealed what.
func (b *Box) KeyID() string { return hex.EncodeToString(b.id[:]) }

// Seal encrypts plaintext for the secret name of project projectID. Only
// Open with the same key, project and name recovers it.
// Errors: ErrInvalid when projectID or name contains NUL.
func (b *Box) Seal(projectID, name string, plaintext []byte) ([]byte, error) {
	ad, err := slot(projectID, name)
	if err != nil {
		return nil, err
	}
	out := make([]byte, headerLen, headerLen+b.aead.Overhead()+len(plaintext))
	out[0] = version
	copy(out[1:], b.id[:])
	return b.aead.Seal(out, nil, plaintext, ad), nil
}

// Open decrypts a ciphertext made by Seal for the same project and name.
// Errors: ErrInvalid (NUL in projectID or name), ErrWrongKey (sealed under
// another key), ErrCorrupt (truncated, unknown version, altered, or
// sealed for another secret or project). No error includes the plaintext
// or the key.
func (b *Box) Open(projectID, name string, ciphertext []byte) ([]byte, error) {
	ad, err := slot(projectID, name)
	if err != nil {
		return nil, err
	}
	n := switchboard.Clip(name)
	if least := headerLen + b.aead.Overhead(); len(ciphertext) < least {
		return nil, switchboard.Errorf(ErrCorrupt, "secret %q: ciphertext truncated (%d bytes, at least %d expected)", n, len(ciphertext), least)
	}
	if v := ciphertext[0]; v != version {
		return nil, switchboard.Errorf(ErrCorrupt, "secret %q: unknown ciphertext version %d (this build reads version %d)", n, v, version)
	}
	if id := ciphertext[1:headerLen]; !bytes.Equal(id, b.id[:]) {
		return nil, switchboard.Errorf(ErrWrongKey, "secret %q was encrypted with a different MCP_SERVER_SECRET_KEY (key id %x, this server's is %s): restore that key or set the secret again", n, id, b.KeyID())
	}
	plaintext, err := b.aead.Open(nil, nil, ciphertext[headerLen:], ad)
	if err != nil {
		return nil, switchboard.Errorf(ErrCorrupt, "secret %q of project %q is corrupted or moved: its ciphertext was altered or sealed for another secret or project", n, switchboard.Clip(projectID))
	}
	return plaintext, nil
}

// slot is the additional data that binds a ciphertext to one secret. NUL
// separates the parts, so neither may contain one: ("a\x00b", "c") and
// ("a", "b\x00c") would otherwise share a slot. The store refuses NUL in
// both anyway.
func slot(projectID, name string) ([]byte, error) {
	if strings.ContainsRune(projectID, 0) || strings.ContainsRune(name, 0) {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "secret %q: project and name must not contain NUL characters", switchboard.Clip(name))
	}
	return []byte(projectID + "\x00" + name), nil
}
