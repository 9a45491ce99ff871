package secrets

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
)

// Redacted replaces every secret value that Redactor finds.
const Redacted = "[redacted]"

// MinRedactLen is the shortest value a Redactor looks for. A one- to
// three-byte value ("1", "on", "dev") occurs by chance in almost every
// line, so redacting it would shred the logs while protecting nothing: a
// secret that short can be guessed anyway.
const MinRedactLen = 4

// Redactor removes secret values from text. It is safe for concurrent
// use, and its zero value redacts nothing until Set is called.
type Redactor struct {
	values atomic.Pointer[[]string] // nil when there is nothing to redact
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
	r.values.Store(&keep)
}

// Redact returns s with every occurrence of every value replaced by
// Redacted. Occurrences that overlap or touch, of one value or of several,
// merge into one marker, so no fragment of a value survives. When nothing
// matches, s is returned as is, without allocating.
func (r *Redactor) Redact(s string) string {
	out, _ := redact(r.values.Load(), s)
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

func redactTree(values *[]string, v any) (any, bool) {
	switch t := v.(type) {
	case string:
		return redact(values, t)
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
			k2, kc := redact(values, k)
			e2, ec := redactTree(values, e)
			out[k2] = e2
			changed = changed || kc || ec
		}
		return out, changed
	}
	return v, false
}

// redact reports whether it changed s.
func redact(values *[]string, s string) (string, bool) {
	if values == nil {
		return s, false
	}
	var spans [][2]int // [start, end) of each occurrence
	for _, v := range *values {
		// Advance one byte past each match to find overlapping ones too.
		for i := 0; ; {
			j := strings.Index(s[i:], v)
			if j < 0 {
				break
			}
			spans = append(spans, [2]int{i + j, i + j + len(v)})
			i += j + 1
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
	values *[]string
	h      slog.Handler
}

func (h *handler) inner(values *[]string) slog.Handler {
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
	msg, _ := redact(values, rec.Message)
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

func redactAttrs(values *[]string, attrs []slog.Attr) []slog.Attr {
	if values == nil {
		return attrs
	}
	out := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		out[i] = redactAttr(values, a)
	}
	return out
}

func redactAttr(values *[]string, a slog.Attr) slog.Attr {
	// Resolve first: a LogValuer could produce a secret.
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s, ok := redact(values, v.String()); ok {
			v = slog.StringValue(s)
		}
	case slog.KindGroup:
		v = slog.GroupValue(redactAttrs(values, v.Group())...)
	case slog.KindAny:
		if s, ok := redact(values, render(v.Any())); ok {
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
