package calllog

import (
	"math/rand/v2"
	"testing"
)

// The fast path must say exactly what the regexp says, or a secret-named
// member could reach the store unredacted.
func checkFastPath(t *testing.T, b []byte) {
	t.Helper()
	if got, want := mayHoldSecretKey(b), secretKey.Match(b); got != want {
		t.Fatalf("mayHoldSecretKey(%q) = %v, secretKey.Match = %v", b, got, want)
	}
}

func TestSecretKeyFastPath(t *testing.T) {
	for _, s := range []string{
		`{"text":"hi"}`, `{"Password":"x"}`, `{"PASSWD":1}`, `{"api_key":1}`, `{"API-Key":1}`, `{"apiKey":1}`,
		`{"api key":1}`, `{"my_access_TOKEN":1}`, `{"Authorization":"b"}`, `{"auth_header":1}`, `{"authheader":1}`,
		`{"privateKey":1}`, `{"private key":1}`, `{"session_id":"s"}`, `{"sessionKey":1}`, `{"cookie":1}`,
		`{"credentials":[]}`, `{"passphrase":1}`, `{"pass":1}`, `{"paſſword":1}`, `{"toKen":1}`, `{"to\u212aen":1}`,
		`{"tokén":1}`, `{"secre":1}`, ``,
	} {
		checkFastPath(t, []byte(s))
	}
	// Random strings over the stems' letters, both cases, separators and
	// a few non-ASCII letters that fold to ASCII.
	alphabet := []rune("passwordhrtkencyiuzlgvmbPASSWORDHRTKENCYIUZLGVMB_- \"{}:ſKé")
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		n := 1 + r.IntN(24)
		rs := make([]rune, n)
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		checkFastPath(t, []byte(string(rs)))
	}
}

func FuzzSecretKeyFastPath(f *testing.F) {
	for _, s := range []string{`{"text":"hi"}`, `{"API-Key":1}`, `{"paſſword":1}`, `{"session_id":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastPath(t, b) })
}

// BenchmarkRedactFastPath: typical arguments with nothing to redact, the
// path every call takes.
func BenchmarkRedactFastPath(b *testing.B) {
	args := []byte(`{"text":"hello, world","session_id":"abc123","count":3,"path":"/tmp/x"}`)
	b.Run("stems", func(b *testing.B) {
		for range b.N {
			if mayHoldSecretKey(args) {
				b.Fatal("match")
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for range b.N {
			if secretKey.Match(args) {
				b.Fatal("match")
			}
		}
	})
}
