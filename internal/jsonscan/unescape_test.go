package jsonscan

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

func TestUnescapeHTML(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"q":"a\u0026b"}`, `{"q":"a&b"}`},
		{`{"q":"\u003cb\u003E"}`, `{"q":"<b>"}`},
		{`{"q":"a\\u0026b"}`, `{"q":"a\\u0026b"}`},           // an escaped backslash, then text
		{`{"q":"\\\u0026"}`, `{"q":"\\&"}`},                  // an escaped backslash, then an escape
		{`{"q":"\u00e9\u0027\n"}`, `{"q":"\u00e9\u0027\n"}`}, // other escapes kept
		{`{"a\u0026":1}`, `{"a&":1}`},
		{`[1,2]`, `[1,2]`},
	} {
		got := UnescapeHTML([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("UnescapeHTML(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestUnescapeHTMLRoundTrip: for random strings, what an HTML-escaping
// encoder wrote comes back as a non-escaping encoder writes it, and
// still decodes to the same string.
func TestUnescapeHTMLRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', '&', '<', '>', '\\', '"', 'u', '0', '2', '6', '\n', 'é', '\u2028', '\x01'}
	for range 5000 {
		rs := make([]rune, r.IntN(12))
		for i := range rs {
			rs[i] = alphabet[r.IntN(len(alphabet))]
		}
		s := string(rs)
		escaped, _ := json.Marshal(map[string]string{s: s})
		var plain bytes.Buffer
		enc := json.NewEncoder(&plain)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(map[string]string{s: s})
		got := UnescapeHTML(escaped)
		if string(got) != string(bytes.TrimSpace(plain.Bytes())) {
			t.Fatalf("%q: UnescapeHTML(%s) = %s, want %s", s, escaped, got, plain.Bytes())
		}
		var back map[string]string
		if err := json.Unmarshal(got, &back); err != nil || back[s] != s {
			t.Fatalf("%q: %s decodes to %v, %v", s, got, back, err)
		}
	}
}
