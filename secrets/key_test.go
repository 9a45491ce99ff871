package secrets_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
)

func TestLoadKeyValue(t *testing.T) {
	// 0xfb bytes encode to both '+' and '/' in base64, so the standard and
	// URL alphabets differ.
	key := bytes.Repeat([]byte{0xfb}, secrets.KeySize)
	std := base64.StdEncoding.EncodeToString(key)
	url := base64.URLEncoding.EncodeToString(key)
	if !strings.ContainsAny(std, "+/") || std == url {
		t.Fatal("test key does not exercise both alphabets")
	}
	for name, value := range map[string]string{
		"hex":               hex.EncodeToString(key),
		"HEX":               strings.ToUpper(hex.EncodeToString(key)),
		"base64":            std,
		"base64 unpadded":   strings.TrimRight(std, "="),
		"base64url":         url,
		"base64url raw":     strings.TrimRight(url, "="),
		"trailing newline":  std + "\n",
		"surrounding space": "  " + hex.EncodeToString(key) + "\t",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			k, err := secrets.LoadKey(value, dir)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(k.Bytes, key) || k.Source != "MCP_SERVER_SECRET_KEY" || k.Generated || len(k.Warnings) != 0 {
				t.Errorf("LoadKey = %x from %q (generated %v, warnings %q)", k.Bytes, k.Source, k.Generated, k.Warnings)
			}
			if _, err := os.Stat(filepath.Join(dir, secrets.KeyFile)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a key file was written although the key was given: %v", err)
			}
		})
	}
}

func TestLoadKeyBadValue(t *testing.T) {
	key := bytes.Repeat([]byte{0x5a}, secrets.KeySize)
	hexKey := hex.EncodeToString(key)
	tests := map[string]string{
		"word":             "zzzz-not-a-key-zzzz",
		"password":         "correct horse battery staple",
		"hex 63":           hexKey[:63],
		"hex 62":           hexKey[:62],
		"hex 66":           hexKey + "5a",
		"hex bad digit":    hexKey[:63] + "g",
		"hex 16 bytes":     hexKey[:32],
		"base64 16 bytes":  base64.StdEncoding.EncodeToString(key[:16]),
		"base64 31 bytes":  base64.StdEncoding.EncodeToString(key[:31]),
		"base64 33 bytes":  base64.StdEncoding.EncodeToString(append(key, 0x5a)),
		"base64 64 bytes":  base64.StdEncoding.EncodeToString(append(key, key...)),
		"base64 bad char":  "!" + base64.StdEncoding.EncodeToString(key)[1:],
		"base64 inner gap": base64.StdEncoding.EncodeToString(key)[:20] + " " + base64.StdEncoding.EncodeToString(key)[20:],
		"mixed alphabets":  "+_" + base64.RawStdEncoding.EncodeToString(key)[2:],
		"non-ASCII":        "ключ-ключ-ключ-ключ",
		"quoted":           `"` + hexKey + `"`,
	}
	for name, value := range tests {
		t.Run(name, func(t *testing.T) {
			k, err := secrets.LoadKey(value, t.TempDir())
			if !errors.Is(err, switchboard.ErrConfig) {
				t.Fatalf("LoadKey error = %v, want ErrConfig", err)
			}
			if k.Bytes != nil {
				t.Error("LoadKey returned a key with its error")
			}
			msg := err.Error()
			if strings.Contains(msg, strings.TrimSpace(value)) {
				t.Errorf("error echoes the value: %s", msg)
			}
			for _, want := range []string{"MCP_SERVER_SECRET_KEY", "64 hex characters", "base64", "head -c 32 /dev/urandom | base64"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error does not say %q: %s", want, msg)
				}
			}
		})
	}
}

func TestLoadKeyGenerates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "nested")
	k, err := secrets.LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, secrets.KeyFile)
	if !k.Generated || k.Source != path || len(k.Bytes) != secrets.KeySize {
		t.Fatalf("LoadKey = %d bytes from %q, generated %v; want a new key in %s", len(k.Bytes), k.Source, k.Generated, path)
	}
	if len(k.Warnings) != 1 || !strings.Contains(k.Warnings[0], "back this file up") {
		t.Errorf("warnings = %q, want one asking for a backup", k.Warnings)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode = %04o, want %04o", p, got, want)
		}
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.StdEncoding.EncodeToString(k.Bytes) + "\n"; string(text) != want {
		t.Errorf("key file holds %d bytes, want the key in base64 and a newline", len(text))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("data directory holds %d entries, want only the key file", len(entries))
	}

	again, err := secrets.LoadKey("", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes, k.Bytes) || again.Generated || len(again.Warnings) != 0 {
		t.Errorf("second LoadKey: same key %v, generated %v, warnings %q; want the same key, quietly", bytes.Equal(again.Bytes, k.Bytes), again.Generated, again.Warnings)
	}
}

func TestLoadKeyConcurrentStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	keys := make([]secrets.Key, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = secrets.LoadKey("", dir) })
	}
	wg.Wait()
	generated := 0
	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("LoadKey %d: %v", i, errs[i])
		}
		if !bytes.Equal(k.Bytes, keys[0].Bytes) {
			t.Errorf("LoadKey %d returned a different key", i)
		}
		if k.Generated {
			generated++
		}
	}
	if generated != 1 {
		t.Errorf("%d callers generated the key, want exactly 1", generated)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("data directory holds %d entries, want only the key file (temporary files left behind?)", len(entries))
	}
}

func TestLoadKeyFile(t *testing.T) {
	key := bytes.Repeat([]byte{0x42}, secrets.KeySize)
	b64 := base64.StdEncoding.EncodeToString(key)
	tests := []struct {
		name    string
		text    string
		mode    os.FileMode
		want    error // nil: loads the key
		warning string
	}{
		{"base64 and newline", b64 + "\n", 0o600, nil, ""},
		{"base64 without newline", b64, 0o400, nil, ""},
		{"group readable", b64 + "\n", 0o640, nil, "(mode 0640); restricted it to 0600"},
		{"world readable", b64 + "\n", 0o644, nil, "(mode 0644); restricted it to 0600"},
		{"world writable", b64 + "\n", 0o602, nil, "(mode 0602); restricted it to 0600"},
		{"read-only and group readable", b64 + "\n", 0o440, nil, "(mode 0440); restricted it to 0400"},
		{"empty", "", 0o600, switchboard.ErrConfig, ""},
		{"garbage", "zzzz-not-a-key-zzzz\n", 0o600, switchboard.ErrConfig, ""},
		{"short", base64.StdEncoding.EncodeToString(key[:16]), 0o600, switchboard.ErrConfig, ""},
		{"huge", strings.Repeat(b64, 100), 0o600, switchboard.ErrConfig, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, secrets.KeyFile)
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			k, err := secrets.LoadKey("", dir)
			if tt.want != nil {
				if !errors.Is(err, tt.want) {
					t.Fatalf("LoadKey error = %v, want %v", err, tt.want)
				}
				if tt.text != "" && strings.Contains(err.Error(), strings.TrimSpace(tt.text)) {
					t.Errorf("error echoes the file: %v", err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
					t.Errorf("error does not name the file and the backup: %v", err)
				}
				if after, _ := os.ReadFile(path); string(after) != tt.text {
					t.Error("LoadKey replaced a malformed key file")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(k.Bytes, key) || k.Source != path || k.Generated {
				t.Errorf("LoadKey = %x from %q, generated %v", k.Bytes, k.Source, k.Generated)
			}
			switch {
			case tt.warning == "" && len(k.Warnings) != 0:
				t.Errorf("unexpected warnings %q", k.Warnings)
			case tt.warning != "" && (len(k.Warnings) != 1 || !strings.Contains(k.Warnings[0], tt.warning)):
				t.Errorf("warnings = %q, want one saying %q", k.Warnings, tt.warning)
			}
			// A key file others can access is made owner-only, keeping
			// the owner's own bits.
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := fi.Mode().Perm(), tt.mode&^0o077; got != want {
				t.Errorf("key file mode %04o after LoadKey, want %04o", got, want)
			}
		})
	}
}

func TestLoadKeyUnusableDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"no data dir": "", "data dir is a file": file, "below a file": filepath.Join(file, "data")} {
		t.Run(name, func(t *testing.T) {
			if _, err := secrets.LoadKey("", dir); !errors.Is(err, switchboard.ErrConfig) {
				t.Errorf("LoadKey error = %v, want ErrConfig", err)
			}
		})
	}
}

// A Key printed by mistake shows where it came from, not what it is.
func TestKeyNotPrinted(t *testing.T) {
	k, err := secrets.LoadKey("", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slogJSON(&buf).Info("loaded", "key", k)
	for _, s := range []string{buf.String(), k.String()} {
		if strings.Contains(s, base64.StdEncoding.EncodeToString(k.Bytes)) || strings.Contains(s, hex.EncodeToString(k.Bytes)) || !strings.Contains(s, k.Source) {
			t.Errorf("printed key %q: want its source and not its bytes", s)
		}
	}
}
