package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// check holds Members to encoding/json on doc: on valid JSON, every
// member it hands out is the one encoding/json decodes (the last of equal
// keys wins), and nothing is missing; on anything else, it must not panic.
func check(t *testing.T, doc []byte) {
	t.Helper()
	got := map[string][]byte{}
	ok := Members(doc, func(k, v []byte) { got[string(k)] = v })
	if !json.Valid(doc) {
		return
	}
	var want map[string]json.RawMessage
	isObject := json.Unmarshal(doc, &want) == nil && bytes.TrimSpace(doc)[0] == '{'
	if !ok {
		// Allowed only for non-objects and keys it leaves to encoding/json.
		if isObject && !bytes.ContainsAny(doc, "\\") && isASCII(doc) {
			t.Fatalf("Members(%q) gave up on a plain object", doc)
		}
		return
	}
	if !isObject {
		t.Fatalf("Members(%q) = true for a non-object", doc)
	}
	if len(got) != len(want) {
		t.Fatalf("Members(%q) found %d members, encoding/json %d", doc, len(got), len(want))
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Fatalf("Members(%q)[%q] = %q, encoding/json %q", doc, k, got[k], v)
		}
	}
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

var seeds = []string{
	`{}`, ` { } `, `{"a":1}`, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
	`{"a" : [1, {"b": "}\"]"}], "c":null , "d":true,"e":-1.5e3,"a":"dup"}`, `{"k\u0065y":1}`, `{"é":1}`, `[1,2]`, `"s"`, `null`,
	`{"a":"\\"}`, `{"a":{"b":{"c":[[[]]]}}}`, `{"a"`, `{"a":`, `{"a":1,`, `{`, `{"a":"unterminated`, "{\"a\":1}\n",
}

func TestMembers(t *testing.T) {
	for _, s := range seeds {
		check(t, []byte(s))
	}
}

func FuzzMembers(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b) })
}

func TestString(t *testing.T) {
	for _, s := range []string{`"plain"`, `"esc\"aped\n"`, `"\u00e9t\u00e9"`, `"été"`, "\"bad \xff utf-8\"", `""`, `1`, `null`, `{"a":1}`} {
		got, ok := String([]byte(s))
		var want string
		wantOK := json.Unmarshal([]byte(s), &want) == nil && s[0] == '"'
		if ok != wantOK || got != want {
			t.Errorf("String(%q) = %q, %v; encoding/json %q, %v", s, got, ok, want, wantOK)
		}
	}
}

func TestKeyIs(t *testing.T) {
	for _, c := range []struct {
		key, field string
		want       bool
	}{{"method", "method", true}, {"METHOD", "method", true}, {"Method", "method", true}, {"_meta", "_META", true},
		{"metho", "method", false}, {"methoe", "method", false}, {"m[thod", "m{thod", false}} {
		if got := KeyIs([]byte(c.key), c.field); got != c.want {
			t.Errorf("KeyIs(%q, %q) = %v", c.key, c.field, got)
		}
	}
}
