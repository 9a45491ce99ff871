// Package jsonscan reads the top-level members of a JSON object without
// decoding it: the spans of the values, as encoding/json would hand them
// to json.RawMessage fields, with no reflection and no copies. It exists
// for the hot path, where every request and every upstream answer is a
// small JSON-RPC envelope whose params or result are forwarded as bytes.
//
// It does not reimplement encoding/json's rules for keys (escapes, Unicode
// case folding) or strings (escapes, invalid UTF-8): where those could
// matter it reports that it cannot tell, and the caller decodes with
// encoding/json. Callers match keys as encoding/json matches field names,
// ASCII case-insensitively (KeyIs).
package jsonscan

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"
)

// Members calls fn with each member of the JSON object doc, in order: the
// key (its bytes between the quotes) and the value's bytes, without the
// space around them. doc must be valid JSON (json.Valid); on anything
// else it never panics but may hand out nonsense. It returns false when
// doc is not an object, or when a key holds an escape or a byte beyond
// ASCII; fn may have been called for earlier members then, and the caller
// starts over with encoding/json.
func Members(doc []byte, fn func(key, val []byte)) bool {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return true
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return false
		}
		start := i + 1
		end := start
		for end < len(doc) && doc[end] != '"' {
			if doc[end] == '\\' || doc[end] >= utf8.RuneSelf {
				return false
			}
			end++
		}
		key := doc[start:min(end, len(doc))]
		i = skipSpace(doc, end+1)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		i = skipSpace(doc, i+1)
		if i >= len(doc) {
			return false
		}
		vend := skipValue(doc, i)
		fn(key, doc[i:vend])
		i = skipSpace(doc, vend)
		if i >= len(doc) || doc[i] == '}' {
			return true
		}
		if doc[i] != ',' {
			return false
		}
		i = skipSpace(doc, i+1)
	}
	return true
}

// Envelope is a JSON-RPC 2.0 message as the hot path reads it: the
// strings decoded, the other members raw, sharing the document's bytes.
type Envelope struct {
	JSONRPC, Method    string
	ID, Params, Result []byte
}

// DecodeEnvelope reads the valid JSON doc into e as json.Unmarshal reads
// it into fields tagged jsonrpc, id, method, params and result (keys
// matched without regard to ASCII case, the last of equal keys winning,
// null leaving a string as it was). The error member, null included, is
// handed to onError, since each side keeps it in its own form. ok is
// false when Members cannot tell (then e is incomplete and the caller
// decodes doc with encoding/json); err is what json.Unmarshal would fail
// with, or onError's.
func DecodeEnvelope(doc []byte, e *Envelope, onError func(val []byte) error) (ok bool, err error) {
	ok = Members(doc, func(k, v []byte) {
		switch {
		case KeyIs(k, "jsonrpc"):
			err = cmp.Or(SetString(&e.JSONRPC, v), err)
		case KeyIs(k, "id"):
			e.ID = v
		case KeyIs(k, "method"):
			err = cmp.Or(SetString(&e.Method, v), err)
		case KeyIs(k, "params"):
			e.Params = v
		case KeyIs(k, "result"):
			e.Result = v
		case KeyIs(k, "error"):
			err = cmp.Or(onError(v), err)
		}
	})
	return ok, err
}

// KeyIs reports whether key names field as encoding/json matches it for
// an ASCII field name: equal but for ASCII case.
func KeyIs(key []byte, field string) bool {
	if len(key) != len(field) {
		return false
	}
	for i := range len(key) {
		a, b := key[i], field[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// String decodes val, a value Members handed out, into a Go string as
// encoding/json would into a string field: ok is false when val is not
// a string (null included). Strings with escapes or bytes beyond ASCII go
// through encoding/json.
func String(val []byte) (s string, ok bool) {
	if len(val) < 2 || val[0] != '"' {
		return "", false
	}
	inner := val[1 : len(val)-1]
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			err := json.Unmarshal(val, &s)
			return s, err == nil
		}
	}
	return string(inner), true
}

// ErrNotString is SetString's answer to a member holding another type,
// where encoding/json fails on it.
var ErrNotString = errors.New("json: cannot unmarshal a non-string into a string field")

// SetString stores a member's value into a string field as encoding/json
// does: null leaves it as it was, and anything but a string is an error.
func SetString(dst *string, val []byte) error {
	if IsNull(val) {
		return nil
	}
	s, ok := String(val)
	if !ok {
		return ErrNotString
	}
	*dst = s
	return nil
}

// IsNull reports whether val is the literal null.
func IsNull(val []byte) bool { return string(val) == "null" }

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// UnescapeHTML returns doc, valid JSON, with the escapes that HTML-safe
// encoders write for &, < and > (\u0026, \u003c, \u003e, any case)
// turned back into the characters, which are valid as they are in a JSON
// string: Go's json.Marshal writes them, so a Go client's "a&b" would
// read "a\u0026b" in the call history. Other escapes, and an escaped
// backslash followed by "u0026", are kept. doc itself comes back when it
// holds none.
func UnescapeHTML(doc []byte) []byte {
	if !bytes.Contains(doc, []byte(`\u00`)) {
		return doc
	}
	var out []byte
	last := 0
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' || i+1 >= len(doc) {
			continue
		}
		if doc[i+1] != 'u' || i+6 > len(doc) {
			i++ // a two-character escape such as \\ or \"
			continue
		}
		var c byte
		switch strings.ToLower(string(doc[i+2 : i+6])) {
		case "0026":
			c = '&'
		case "003c":
			c = '<'
		case "003e":
			c = '>'
		default:
			i += 5
			continue
		}
		out = append(append(out, doc[last:i]...), c)
		last = i + 6
		i += 5
	}
	if out == nil {
		return doc
	}
	return append(out, doc[last:]...)
}
