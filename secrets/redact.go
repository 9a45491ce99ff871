package secrets

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
)

// Redacted replaces every secret value that Redactor finds.
const Redacted = "[redacted]"

// MinRedactLen is the shortest value a Redactor looks for. A one- to
// three-byte value ("1", "on", "dev") occurs by chance in almost every
// line, so redacting it would shred the logs while protecting nothing: a
// secret that short can be guessed anyway. It is also the shortest piece
// of a value that RedactTail hides at the edges of a cut.
const MinRedactLen = 4

// minBase64 is the shortest base64 piece looked for: shorter ones (of a
// value of a few bytes, at an awkward alignment) would match by chance in
// any long base64 text.
const minBase64 = 6

// Redactor removes secret values from text. It is safe for concurrent
// use, and its zero value redacts nothing until Set is called.
//
// A value is found as is and in the encodings a program commonly gives
// it on the way to a log line or a URL:
//   - percent-encoded, any of its bytes as %XX (hex in either case), a
//     space also as "+" (p%40ss%2Fword for p@ss/word);
//   - JSON-escaped, any of its characters as \uXXXX (surrogate pairs
//     too) or a short escape (\" \\ \/ \b \f \n \r \t);
//     the two escapings may mix, one level deep (a %2540 or \\u0041
//     that was escaped twice is not decoded);
//   - base64, standard and URL alphabets, padded or not, at each of the
//     three alignments the value can have inside the encoded text: the
//     characters that encode only the value's bits are found, so one or
//     two characters either side, which mix in the neighbouring bytes,
//     stay (of a value at the end of the encoded text, its last
//     character and padding are found too). Pieces shorter than six
//     characters, from values of a few bytes, are not looked for.
type Redactor struct {
	values atomic.Pointer[set] // nil when there is nothing to redact
}

// set is what a Redactor looks for.
type set struct {
	values []string // as Set was given them, sorted
	forms  []string // values and their base64 pieces, found as they are
}

// Set replaces the values to redact; every later Redact sees either the
// old set or the new one, never a mix. Values shorter than MinRedactLen
// are ignored. Set keeps its own copy of values.
func (r *Redactor) Set(values []string) {
	var keep []string
	for _, v := range values {
		if len(v) >= MinRedactLen {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		r.values.Store(nil)
		return
	}
	slices.Sort(keep)
	keep = slices.Compact(keep)
	forms := slices.Clone(keep)
	for _, v := range keep {
		forms = append(forms, base64Forms(v)...)
	}
	slices.Sort(forms)
	r.values.Store(&set{values: keep, forms: slices.Compact(forms)})
}

// base64Forms returns the pieces of base64 text that encode v, whatever
// bytes surround it: for each alignment k (k bytes of the encoded text
// before v, modulo 3), the characters whose six bits all come from v, and
// the same run continued to the end of the text when v ends it (its last
// character zero-filled, with and without padding); each in the standard
// and the URL alphabet.
func base64Forms(v string) []string {
	var out []string
	add := func(piece string) {
		if len(piece) >= minBase64 {
			out = append(out, piece, strings.NewReplacer("+", "-", "/", "_").Replace(piece))
		}
	}
	for k := range 3 {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, k), v...))
		first := (8*k + 5) / 6       // the first character with none of the k bytes' bits
		last := 8 * (k + len(v)) / 6 // the characters before it hold only v's bits
		add(enc[first:last])
		add(enc[first:])
		add(strings.TrimRight(enc[first:], "="))
	}
	return out
}

// Redact returns s with every occurrence of every value, in any of the
// forms the Redactor knows, replaced by Redacted. Occurrences that overlap
// or touch, of one value or of several, merge into one marker, so no
// fragment of a value survives. When nothing matches, s is returned as
// is, without allocating.
func (r *Redactor) Redact(s string) string {
	out, _ := redact(r.values.Load(), s, false)
	return out
}

// RedactTail is Redact for text that may have been cut from a longer
// stream, at either end: the tail of a child's stderr starts wherever its
// buffer began, and ends wherever the child's last write did. Besides
// what Redact hides, a piece of at least MinRedactLen bytes that starts
// the text and ends a value (or its base64), or ends the text and starts
// one, is replaced too: the rest of that value lies beyond the cut, and
// what is shown of it must not be enough to guess it. Smaller pieces
// stay; a cut through an escaped form is not recognised.
func (r *Redactor) RedactTail(s string) string {
	out, _ := redact(r.values.Load(), s, true)
	return out
}

// RedactJSON returns doc with every secret value removed from its strings
// (member names and string values, at any depth; numbers, literals and
// layout untouched when nothing matches). The values are looked for in
// the decoded strings, so a secret the client escaped (\u0041, \/) is
// found too. A document that is not JSON comes back as null: what cannot
// be inspected is not kept.
func (r *Redactor) RedactJSON(doc json.RawMessage) json.RawMessage {
	values := r.values.Load()
	if values == nil || len(doc) == 0 {
		return doc
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return json.RawMessage("null")
	}
	v, changed := redactTree(values, v)
	if !changed {
		return doc
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return out
}

func redactTree(values *set, v any) (any, bool) {
	switch t := v.(type) {
	case string:
		return redact(values, t, false)
	case []any:
		changed := false
		for i, e := range t {
			var c bool
			t[i], c = redactTree(values, e)
			changed = changed || c
		}
		return t, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(t))
		for k, e := range t {
			k2, kc := redact(values, k, false)
			e2, ec := redactTree(values, e)
			out[k2] = e2
			changed = changed || kc || ec
		}
		return out, changed
	}
	return v, false
}

// redact reports whether it changed s. With cut, pieces of a value at
// the edges of s are redacted too (RedactTail).
func redact(values *set, s string, cut bool) (string, bool) {
	if values == nil {
		return s, false
	}
	spans := spansOf(values, s, cut)
	// A value split over lines (a program that wraps a long token, or
	// writes it in two lines): looked for again with the line breaks
	// left out, and each occurrence that crosses one is hidden whole.
	if strings.ContainsAny(s, "\r\n") {
		joined, at := withoutBreaks(s)
		for _, sp := range spansOf(values, joined, cut) {
			start, end := at[sp[0]], at[sp[1]-1]+1
			if end-start != sp[1]-sp[0] { // it crosses a break
				spans = append(spans, [2]int{start, end})
			}
		}
	}
	if spans == nil {
		return s, false
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	done := 0 // s[:done] is written or covered
	for k := 0; k < len(spans); {
		start, end := spans[k][0], spans[k][1]
		for k++; k < len(spans) && spans[k][0] <= end; k++ {
			end = max(end, spans[k][1])
		}
		b.WriteString(s[done:start])
		b.WriteString(Redacted)
		done = end
	}
	b.WriteString(s[done:])
	return b.String(), true
}

// withoutBreaks returns s without its \r and \n bytes, and where each
// byte of the result is in s.
func withoutBreaks(s string) (string, []int) {
	var b strings.Builder
	at := make([]int, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '\r' || s[i] == '\n' {
			continue
		}
		b.WriteByte(s[i])
		at = append(at, i)
	}
	return b.String(), at
}

// spansOf returns the [start, end) of every occurrence in s of every
// value, in every form, and with cut of the pieces at its edges.
func spansOf(values *set, s string, cut bool) [][2]int {
	var spans [][2]int
	for _, v := range values.forms {
		// Advance one byte past each match to find overlapping ones too.
		for i := 0; ; {
			j := strings.Index(s[i:], v)
			if j < 0 {
				break
			}
			spans = append(spans, [2]int{i + j, i + j + len(v)})
			i += j + 1
		}
		if cut {
			if n := headPiece(s, v); n > 0 {
				spans = append(spans, [2]int{0, n})
			}
			if n := endPiece(s, v); n > 0 {
				spans = append(spans, [2]int{len(s) - n, len(s)})
			}
		}
	}
	// Escaped forms can only be there when an escape character is.
	if strings.ContainsAny(s, "%+\\") {
		for _, v := range values.values {
			for i := 0; i < len(s); i++ {
				if c := s[i]; c != v[0] && c != '%' && c != '+' && c != '\\' {
					continue
				}
				if n := matchEscaped(s[i:], v); n > 0 {
					spans = append(spans, [2]int{i, i + n})
				}
			}
		}
	}
	if cut {
		for _, v := range values.values {
			if n := escapedHead(s, v); n > 0 {
				spans = append(spans, [2]int{0, n})
			}
			if n := escapedEnd(s, v); n > 0 {
				spans = append(spans, [2]int{len(s) - n, len(s)})
			}
		}
	}
	return spans
}

// maxEscape is the longest escape matchEscaped decodes in one step (a
// JSON surrogate pair); a cut leaves less than that of one at an edge.
const maxEscape = 12

// escapedHead is headPiece for escaped forms: the length of the text that
// starts s and decodes to a proper suffix of v of at least MinRedactLen
// bytes, after what a cut left of an escape (up to maxEscape-1 bytes), or 0.
func escapedHead(s, v string) int {
	for skip := 0; skip < maxEscape && skip < len(s); skip++ {
		if skip > 0 && !strings.ContainsRune("0123456789abcdefABCDEFu\\", rune(s[skip-1])) {
			break // not what a cut leaves of an escape
		}
		for n := len(v) - 1; n >= MinRedactLen; n-- {
			if m := matchEscaped(s[skip:], v[len(v)-n:]); m > 0 {
				return skip + m
			}
		}
	}
	return 0
}

// escapedEnd is endPiece for escaped forms: the length of the text that
// ends s and decodes to a proper prefix of v of at least MinRedactLen
// bytes, and then at most the start of one more escape, or 0.
func escapedEnd(s, v string) int {
	lo := max(0, len(s)-maxEscape*len(v))
	for i := lo; i < len(s); i++ {
		if c := s[i]; c != v[0] && c != '%' && c != '+' && c != '\\' {
			continue
		}
		if n := prefixTo(s[i:], v); n >= MinRedactLen {
			return len(s) - i
		}
	}
	return 0
}

// prefixTo returns how many bytes of v all of s decodes to (as
// matchEscaped reads escapes), when s is an escaped prefix of v (a proper
// one) followed by at most an escape cut short; -1 when it is not.
func prefixTo(s, v string) int {
	i, j := 0, 0
	for i < len(s) {
		if j >= len(v) {
			return -1
		}
		if n, m := escapedStep(s[i:], v[j:]); n > 0 {
			i, j = i+n, j+m
			continue
		}
		if len(s)-i < maxEscape && cutEscape(s[i:]) {
			return j
		}
		return -1
	}
	if j >= len(v) {
		return -1 // the whole value: matchEscaped finds it
	}
	return j
}

// cutEscape reports whether s is the start of an escape and nothing
// more: "%", "%4", "\\", "\\u", "\\u00", "\\ud83d\\u".
func cutEscape(s string) bool {
	switch {
	case s[0] == '%':
		return len(s) <= 2 && (len(s) == 1 || unhex(s[1]) >= 0)
	case s[0] == '\\':
		if len(s) == 1 {
			return true
		}
		if s[1] != 'u' {
			return false
		}
		for k := 2; k < len(s); k++ {
			if (k == 6 && s[k] == '\\') || (k == 7 && s[k] == 'u') {
				continue
			}
			if unhex(s[k]) < 0 {
				return false
			}
		}
		return true
	}
	return false
}

// headPiece returns the length of the longest proper suffix of v, of at
// least MinRedactLen bytes, that s starts with, or 0.
func headPiece(s, v string) int {
	for n := min(len(v)-1, len(s)); n >= MinRedactLen; n-- {
		if s[:n] == v[len(v)-n:] {
			return n
		}
	}
	return 0
}

// endPiece returns the length of the longest proper prefix of v, of at
// least MinRedactLen bytes, that s ends with, or 0.
func endPiece(s, v string) int {
	for n := min(len(v)-1, len(s)); n >= MinRedactLen; n-- {
		if s[len(s)-n:] == v[:n] {
			return n
		}
	}
	return 0
}

// matchEscaped returns the length of the text at the start of s that
// decodes to v, each of v's bytes as is, percent-encoded or (a space)
// "+", and each of its characters as is or JSON-escaped; 0 when there is
// none. An escape that decodes to what v holds next is always taken as
// one, so a value holding "%25" or a backslash is found written as is or
// fully escaped, not in every mix of the two.
func matchEscaped(s, v string) int {
	i, j := 0, 0
	for j < len(v) {
		n, m := escapedStep(s[i:], v[j:])
		if n == 0 {
			return 0
		}
		i, j = i+n, j+m
	}
	return i
}

// escapedStep reads the start of s as the start of v: one byte of v as
// is, percent-encoded or (a space) "+", or one character JSON-escaped. It
// returns the bytes read of s and of v, or 0, 0 when s does not start
// with v's next byte or character in any of these forms. An escape that
// decodes to what v holds next is always taken as one.
func escapedStep(s, v string) (n, m int) {
	if len(s) == 0 || len(v) == 0 {
		return 0, 0
	}
	c := v[0]
	if s[0] == '%' && len(s) > 2 {
		if hi, lo := unhex(s[1]), unhex(s[2]); hi >= 0 && lo >= 0 && hi<<4|lo == int(c) {
			return 3, 1
		}
	}
	if s[0] == '\\' {
		if r, n := jsonUnescape(s); n > 0 {
			var buf [utf8.UTFMax]byte
			m := utf8.EncodeRune(buf[:], r)
			if strings.HasPrefix(v, string(buf[:m])) {
				return n, m
			}
		}
	}
	if s[0] == c || (s[0] == '+' && c == ' ') {
		return 1, 1
	}
	return 0, 0
}

// jsonUnescape decodes the JSON escape that starts s (a backslash),
// a surrogate pair as one character; n is 0 when there is none.
func jsonUnescape(s string) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return rune(s[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r) && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if r2, ok := hex4(s[8:]); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return r, 6
	}
	return 0, 0
}

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for i := range 4 {
		d := unhex(s[i])
		if d < 0 {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// Handler wraps h so that each record reaches it with the current values
// redacted from the message and from every attribute value, inside groups
// too: strings, errors, fmt.Stringers and byte slices by their text, and
// any other slog.KindAny value as slog's text handler prints it (%+v), so
// that a map of tool arguments is covered too. A value that holds a secret
// becomes a string; the others pass unchanged. Attributes added through
// WithAttrs are redacted with the set current when a record is logged,
// so a secret Set after a logger was made is still hidden. Keys are not
// redacted.
func (r *Redactor) Handler(h slog.Handler) slog.Handler {
	return &handler{r: r, base: h}
}

// handler keeps its WithAttrs and WithGroup calls rather than passing
// them on, and rebuilds the wrapped handler from them whenever the set of
// values has changed since it last did.
type handler struct {
	r      *Redactor
	base   slog.Handler // at the root only
	parent *handler     // nil at the root
	group  string       // this handler's WithGroup name, or
	attrs  []slog.Attr  // its WithAttrs attributes
	built  atomic.Pointer[built]
}

// built is base with the chain of With calls applied, redacted for values.
type built struct {
	values *set
	h      slog.Handler
}

func (h *handler) inner(values *set) slog.Handler {
	if h.parent == nil {
		return h.base
	}
	if b := h.built.Load(); b != nil && b.values == values {
		return b.h
	}
	in := h.parent.inner(values)
	if h.group != "" {
		in = in.WithGroup(h.group)
	} else {
		in = in.WithAttrs(redactAttrs(values, h.attrs))
	}
	// Racing builders store equal results; a stale one is rebuilt next time.
	h.built.Store(&built{values, in})
	return in
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner(h.r.values.Load()).Enabled(ctx, l)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	values := h.r.values.Load() // one set for the whole record
	in := h.inner(values)
	if values == nil {
		return in.Handle(ctx, rec)
	}
	msg, _ := redact(values, rec.Message, false)
	out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(values, a))
		return true
	})
	return in.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	return &handler{r: h.r, parent: h, attrs: attrs}
}

func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{r: h.r, parent: h, group: name}
}

func redactAttrs(values *set, attrs []slog.Attr) []slog.Attr {
	if values == nil {
		return attrs
	}
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(values, a)
	}
	return out
}

func redactAttr(values *set, a slog.Attr) slog.Attr {
	// Resolve first: a LogValuer could produce a secret.
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s, ok := redact(values, v.String(), false); ok {
			v = slog.StringValue(s)
		}
	case slog.KindGroup:
		v = slog.GroupValue(redactAttrs(values, v.Group())...)
	case slog.KindAny:
		if s, ok := redact(values, render(v.Any()), false); ok {
			v = slog.StringValue(s)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// render prints a value as the text handler does (errors and Stringers
// through their methods, with fmt recovering a panic from a nil
// receiver), and byte slices, json.RawMessage included, as text.
func render(a any) string {
	if rv := reflect.ValueOf(a); rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
		return string(rv.Bytes())
	}
	return fmt.Sprintf("%+v", a)
}
