package secrets

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/switchboard-mcp/switchboard"
)

// KeyFile is the name of the generated key file in the data directory.
const KeyFile = "secret.key"

const makeKey = "make one with: head -c 32 /dev/urandom | base64"

// Key is the gateway's secret key and where it came from.
type Key struct {
	Bytes  []byte // KeySize bytes; never log them
	Source string // "MCP_SERVER_SECRET_KEY" or the key file's path
	// Generated reports that the key file was created just now.
	Generated bool
	// Warnings are for the operator's log: a freshly generated key that
	// needs a backup, or a key file that others can read. None is fatal.
	Warnings []string
}

// LogValue shows where the key came from, never the key itself.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(slog.String("source", k.Source), slog.Bool("generated", k.Generated))
}

// String keeps the key out of fmt output as LogValue does for slog.
func (k Key) String() string { return "secret key from " + k.Source }

// LoadKey returns the secret key. value is MCP_SERVER_SECRET_KEY: 64 hex
// characters or base64 (standard or URL alphabet, padded or not) of
// KeySize bytes; surrounding space is ignored. When value is empty the key
// comes from KeyFile in dataDir, which is created (directory 0700, file
// 0600) with a random key if absent; two processes starting at once end up
// with the same key. An existing key file that group or others can access
// is restricted to its owner (a warning says so). Errors: ErrConfig,
// naming what is wrong and what is expected, but never quoting the key;
// also when a loose key file cannot be restricted.
func LoadKey(value, dataDir string) (Key, error) {
	if value = strings.TrimSpace(value); value != "" {
		b, err := decodeKey(value)
		if err != nil {
			return Key{}, switchboard.Errorf(switchboard.ErrConfig, "MCP_SERVER_SECRET_KEY is not a valid key: %v; it must be %d random bytes as 64 hex characters or as base64 (%s)", err, KeySize, makeKey)
		}
		return Key{Bytes: b, Source: "MCP_SERVER_SECRET_KEY"}, nil
	}
	if dataDir == "" {
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "MCP_SERVER_SECRET_KEY is not set and there is no data directory to keep a generated key in; set it (%s)", makeKey)
	}
	path := filepath.Join(dataDir, KeyFile)
	k, err := readKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key: %v", err)
	}
	k, won, err := createKeyFile(path)
	if err != nil || won {
		return k, err
	}
	return readKeyFile(path) // another process created it first: use theirs
}

// readKeyFile returns the error of opening path unchanged, so that the
// caller can tell a missing file from a bad one.
func readKeyFile(path string) (Key, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Key{}, err
		}
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key file: %v", err)
	}
	// A key file is a few dozen bytes; the limit keeps a wrong path from
	// reading a big file into memory.
	text, err := io.ReadAll(io.LimitReader(f, 1024))
	if err != nil {
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key file: %v", err)
	}
	b, err := decodeKey(string(text))
	if err != nil {
		return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key file %s is not a valid key: %v; restore it from a backup (a new key cannot decrypt the secrets already stored)", path, err)
	}
	k := Key{Bytes: b, Source: path}
	// As the database files: a key others can read is made owner-only,
	// and a key that cannot be is refused rather than used. Windows
	// reports a synthetic mode that Chmod cannot change.
	if mode := fi.Mode().Perm(); mode&0o077 != 0 && runtime.GOOS != "windows" {
		if err := f.Chmod(mode &^ 0o077); err != nil {
			return Key{}, switchboard.Errorf(switchboard.ErrConfig, "secret key file %s is accessible to group or others (mode %04o) and cannot be restricted: %v; run chmod 600 on it as its owner", path, mode, errors.Unwrap(err))
		}
		k.Warnings = append(k.Warnings, fmt.Sprintf("secret key file %s was accessible to group or others (mode %04o); restricted it to %04o", path, mode, mode&^0o077))
	}
	return k, nil
}

// createKeyFile writes a new key to a temporary file and links it into
// place, so that path never exists half-written and, of two processes
// racing, exactly one wins. won is false when path already existed.
func createKeyFile(path string) (k Key, won bool, err error) {
	fail := func(err error) (Key, bool, error) {
		return Key{}, false, switchboard.Errorf(switchboard.ErrConfig, "secret key: %v", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+KeyFile+"-*") // mode 0600
	if err != nil {
		return fail(err)
	}
	defer os.Remove(tmp.Name())
	key := make([]byte, KeySize)
	rand.Read(key)
	_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return Key{}, false, nil
	} else if err != nil {
		return fail(err)
	}
	// Losing the key loses every secret, so make the new name durable
	// before anything is sealed with it. Some filesystems cannot sync a
	// directory; the file itself is already synced.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return Key{
		Bytes:     key,
		Source:    path,
		Generated: true,
		Warnings:  []string{fmt.Sprintf("generated a new secret key in %s: back this file up; without it secrets cannot be decrypted", path)},
	}, true, nil
}

// decodeKey accepts 64 hex characters or base64 of KeySize bytes. Its
// error says what the text decodes to, never what the text is.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("it is empty")
	}
	if b, err := hex.DecodeString(s); err == nil {
		if len(b) == KeySize {
			return b, nil
		}
		return nil, fmt.Errorf("it is hex for %d bytes", len(b))
	}
	n := -1
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) == KeySize {
				return b, nil
			}
			n = len(b)
		}
	}
	if n >= 0 {
		return nil, fmt.Errorf("it is base64 for %d bytes", n)
	}
	return nil, fmt.Errorf("it is %d characters that are neither hex nor base64", len(s))
}

// ReplicaToken is the token replicas sharing a store present to each
// other's internal endpoint: HMAC-SHA256 of a fixed label under the
// secret key, which every replica must share to read project secrets and
// no client has. The key itself never leaves the process.
func (k Key) ReplicaToken() string {
	m := hmac.New(sha256.New, k.Bytes)
	m.Write([]byte("switchboard replica token v1"))
	return hex.EncodeToString(m.Sum(nil))
}
