package secrets_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
)

func testKey(fill byte) []byte { return bytes.Repeat([]byte{fill}, secrets.KeySize) }

func newBox(t *testing.T, fill byte) *secrets.Box {
	t.Helper()
	b, err := secrets.NewBox(testKey(fill))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBoxRoundTrip(t *testing.T) {
	box := newBox(t, 1)
	for _, plain := range [][]byte{nil, []byte("x"), []byte("ghp_16C7e42F292c6912E7710c838347Ae178B4a"), bytes.Repeat([]byte{0, 0xff}, 1<<16)} {
		ct, err := box.Seal("proj", "GITHUB_TOKEN", plain)
		if err != nil {
			t.Fatal(err)
		}
		if want := 1 + 4 + 12 + len(plain) + 16; len(ct) != want {
			t.Errorf("len(ciphertext) = %d, want %d", len(ct), want)
		}
		if len(plain) >= 4 && bytes.Contains(ct, plain) {
			t.Error("ciphertext contains the plaintext")
		}
		got, err := box.Open("proj", "GITHUB_TOKEN", ct)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("Open returned %d bytes, want the %d sealed", len(got), len(plain))
		}
	}
}

func TestBoxFormat(t *testing.T) {
	key := testKey(7)
	box := newBox(t, 7)
	a, _ := box.Seal("p", "n", []byte("value"))
	b, _ := box.Seal("p", "n", []byte("value"))
	if bytes.Equal(a, b) {
		t.Error("two seals of one value are equal: the nonce is not random")
	}
	if a[0] != 1 {
		t.Errorf("version byte = %d, want 1", a[0])
	}
	id := box.KeyID()
	if len(id) != 8 || hex.EncodeToString(a[1:5]) != id {
		t.Errorf("KeyID() = %q, ciphertext key id = %x; want the same 8 hex digits", id, a[1:5])
	}
	if id == hex.EncodeToString(key[:4]) {
		t.Error("the key id is the raw key's first bytes")
	}
	if newBox(t, 8).KeyID() == id {
		t.Error("two keys share a key id")
	}
	if !bytes.Equal(a[1:5], b[1:5]) || bytes.Equal(a[5:17], b[5:17]) {
		t.Error("want one key id and two nonces")
	}
}

func TestNewBoxKeyLength(t *testing.T) {
	for _, n := range []int{0, 1, 16, 24, 31, 33, 64} {
		_, err := secrets.NewBox(make([]byte, n))
		if !errors.Is(err, switchboard.ErrConfig) {
			t.Errorf("NewBox(%d bytes) error = %v, want ErrConfig", n, err)
		}
	}
}

func TestBoxOpenErrors(t *testing.T) {
	const plain = "sk-live-4f3c2b1a0987"
	box := newBox(t, 1)
	ct, err := box.Seal("proj", "API_KEY", []byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(c []byte) []byte) []byte { return f(bytes.Clone(ct)) }
	tests := []struct {
		name          string
		box           *secrets.Box
		project, slot string
		ct            []byte
		want          error
		msg           string
	}{
		{"other key", newBox(t, 2), "proj", "API_KEY", ct, secrets.ErrWrongKey, "different MCP_SERVER_SECRET_KEY"},
		{"moved to another secret", box, "proj", "OTHER", ct, secrets.ErrCorrupt, "corrupted or moved"},
		{"moved to another project", box, "proj2", "API_KEY", ct, secrets.ErrCorrupt, "corrupted or moved"},
		{"slot boundary shifted", box, "pro", "jAPI_KEY", ct, secrets.ErrCorrupt, "corrupted or moved"},
		{"body altered", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[len(c)/2] ^= 1; return c }), secrets.ErrCorrupt, "corrupted or moved"},
		{"nonce altered", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[5] ^= 1; return c }), secrets.ErrCorrupt, "corrupted or moved"},
		{"tag cut", box, "proj", "API_KEY", ct[:len(ct)-1], secrets.ErrCorrupt, "corrupted or moved"},
		{"empty", box, "proj", "API_KEY", nil, secrets.ErrCorrupt, "truncated"},
		{"version only", box, "proj", "API_KEY", ct[:1], secrets.ErrCorrupt, "truncated"},
		{"header only", box, "proj", "API_KEY", ct[:5], secrets.ErrCorrupt, "truncated"},
		{"header and nonce", box, "proj", "API_KEY", ct[:17], secrets.ErrCorrupt, "truncated"},
		{"one byte short of the minimum", box, "proj", "API_KEY", ct[:32], secrets.ErrCorrupt, "truncated"},
		{"version 0", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[0] = 0; return c }), secrets.ErrCorrupt, "unknown ciphertext version 0"},
		{"version 2", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[0] = 2; return c }), secrets.ErrCorrupt, "unknown ciphertext version 2"},
		{"version 255", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[0] = 0xff; return c }), secrets.ErrCorrupt, "unknown ciphertext version 255"},
		{"key id altered", box, "proj", "API_KEY", edit(func(c []byte) []byte { c[1] ^= 1; return c }), secrets.ErrWrongKey, "different MCP_SERVER_SECRET_KEY"},
		{"NUL in project", box, "pr\x00oj", "API_KEY", ct, switchboard.ErrInvalid, "NUL"},
		{"NUL in name", box, "proj", "API\x00KEY", ct, switchboard.ErrInvalid, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.box.Open(tt.project, tt.slot, tt.ct)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open error = %v, want %v", err, tt.want)
			}
			if got != nil {
				t.Errorf("Open returned %d bytes with its error", len(got))
			}
			msg := switchboard.Message(err)
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q does not say %q", msg, tt.msg)
			}
			key := testKey(1)
			for _, leak := range []string{plain, string(key), hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key)} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q leaks a secret", err)
				}
			}
		})
	}
}

// The sentinels also answer to the root kinds the edges map.
func TestBoxErrorKinds(t *testing.T) {
	if !errors.Is(secrets.ErrWrongKey, switchboard.ErrConfig) || !errors.Is(secrets.ErrCorrupt, switchboard.ErrInternal) {
		t.Error("ErrWrongKey must wrap ErrConfig and ErrCorrupt ErrInternal")
	}
}

func TestBoxSealRefusesNUL(t *testing.T) {
	box := newBox(t, 1)
	for _, slot := range [][2]string{{"a\x00b", "c"}, {"a", "b\x00c"}} {
		if _, err := box.Seal(slot[0], slot[1], []byte("v")); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("Seal(%q, %q) error = %v, want ErrInvalid", slot[0], slot[1], err)
		}
	}
}

func TestBoxConcurrent(t *testing.T) {
	box := newBox(t, 3)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := strings.Repeat("n", i+1)
			for range 100 {
				ct, err := box.Seal("p", name, []byte(name))
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := box.Open("p", name, ct); err != nil || string(got) != name {
					t.Errorf("Open = %q, %v; want %q", got, err, name)
					return
				}
			}
		})
	}
	wg.Wait()
}
