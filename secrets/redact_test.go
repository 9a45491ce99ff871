package secrets_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/secrets"
)

func TestRedact(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		in     string
		want   string
	}{
		{"empty set", nil, "token hunter22", "token hunter22"},
		{"no match", []string{"hunter22"}, "token hunter23", "token hunter23"},
		{"one", []string{"hunter22"}, "token=hunter22 ok", "token=[redacted] ok"},
		{"every occurrence", []string{"hunter22"}, "hunter22 and hunter22", "[redacted] and [redacted]"},
		{"several values", []string{"hunter22", "sk-1234"}, "a=hunter22 b=sk-1234", "a=[redacted] b=[redacted]"},
		{"whole string", []string{"hunter22"}, "hunter22", "[redacted]"},
		{"too short to redact", []string{"abc", "on", "x", ""}, "abc on x", "abc on x"},
		{"four bytes", []string{"abcd"}, "xabcdx", "x[redacted]x"},
		{"value inside a longer value", []string{"secret", "secret123"}, "x secret123 y secret z", "x [redacted] y [redacted] z"},
		{"longer value listed first", []string{"secret123", "secret"}, "x secret123 y", "x [redacted] y"},
		{"partial overlap", []string{"abcdef", "defghi"}, "-abcdefghi-", "-[redacted]-"},
		{"partial overlap reversed", []string{"defghi", "abcdef"}, "-abcdefghi-", "-[redacted]-"},
		{"self overlap", []string{"abab"}, "xababab", "x[redacted]"},
		{"adjacent", []string{"hunter22"}, "hunter22hunter22", "[redacted]"},
		{"marker not re-redacted", []string{"dact", "hunter22"}, "hunter22", "[redacted]"},
		{"duplicate values", []string{"hunter22", "hunter22"}, "hunter22", "[redacted]"},
		{"multi-byte", []string{"пароль"}, "ключ=пароль.", "ключ=[redacted]."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r secrets.Redactor
			r.Set(tt.values)
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestRedactorSetReplaces(t *testing.T) {
	var r secrets.Redactor
	if got := r.Redact("hunter22"); got != "hunter22" {
		t.Errorf("zero Redactor changed %q", got)
	}
	values := []string{"hunter22"}
	r.Set(values)
	values[0] = "other-value"
	if got := r.Redact("hunter22 other-value"); got != "[redacted] other-value" {
		t.Errorf("after changing the caller's slice: %q", got)
	}
	r.Set([]string{"sk-1234"})
	if got := r.Redact("hunter22 sk-1234"); got != "hunter22 [redacted]" {
		t.Errorf("after Set: %q", got)
	}
	r.Set(nil)
	if got := r.Redact("hunter22 sk-1234"); got != "hunter22 sk-1234" {
		t.Errorf("after Set(nil): %q", got)
	}
}

func TestRedactNoMatchDoesNotAllocate(t *testing.T) {
	var r secrets.Redactor
	s := strings.Repeat("an ordinary log line ", 10)
	if n := testing.AllocsPerRun(100, func() { r.Redact(s) }); n != 0 {
		t.Errorf("empty set: %v allocations per Redact, want 0", n)
	}
	r.Set([]string{"hunter22", "sk-1234"})
	if n := testing.AllocsPerRun(100, func() { r.Redact(s) }); n != 0 {
		t.Errorf("no match: %v allocations per Redact, want 0", n)
	}
}

// Every Redact sees one whole set: never both values, never neither.
func TestRedactorConcurrent(t *testing.T) {
	var r secrets.Redactor
	a, b := []string{"aaaa-secret"}, []string{"bbbb-secret"}
	r.Set(a)
	const in = "aaaa-secret bbbb-secret"
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 1000 {
			if i%2 == 0 {
				r.Set(b)
			} else {
				r.Set(a)
			}
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 1000 {
				if got := r.Redact(in); got != "[redacted] bbbb-secret" && got != "aaaa-secret [redacted]" {
					t.Errorf("Redact = %q, want exactly one value redacted", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		// Drop the time so that two outputs can be compared.
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

type stringer string

func (s stringer) String() string { return "stringer(" + string(s) + ")" }

type valuer string

func (v valuer) LogValue() slog.Value { return slog.StringValue(string(v)) }

type nilErr struct{ msg string }

func (e *nilErr) Error() string { return e.msg }

func TestHandlerRedacts(t *testing.T) {
	const secret = "sk-live-4f3c2b1a"
	tests := []struct {
		name string
		log  func(*slog.Logger)
		want string // a fragment of the JSON line
	}{
		{"message", func(l *slog.Logger) { l.Info("token is " + secret) }, `"msg":"token is [redacted]"`},
		{"string", func(l *slog.Logger) { l.Info("m", "k", "v="+secret) }, `"k":"v=[redacted]"`},
		{"error", func(l *slog.Logger) { l.Info("m", "err", errors.New("auth "+secret+" refused")) }, `"err":"auth [redacted] refused"`},
		{"wrapped error", func(l *slog.Logger) { l.Info("m", "err", fmt.Errorf("call: %w", errors.New(secret))) }, `"err":"call: [redacted]"`},
		{"stringer", func(l *slog.Logger) { l.Info("m", "k", stringer(secret)) }, `"k":"stringer([redacted])"`},
		{"bytes", func(l *slog.Logger) { l.Info("m", "k", []byte("b="+secret)) }, `"k":"b=[redacted]"`},
		{"raw JSON", func(l *slog.Logger) { l.Info("m", "args", json.RawMessage(`{"key":"`+secret+`"}`)) }, `"args":"{\"key\":\"[redacted]\"}"`},
		{"map", func(l *slog.Logger) { l.Info("m", "args", map[string]string{"key": secret}) }, `"args":"map[key:[redacted]]"`},
		{"log valuer", func(l *slog.Logger) { l.Info("m", "k", valuer(secret)) }, `"k":"[redacted]"`},
		{"group attr", func(l *slog.Logger) { l.Info("m", slog.Group("g", "k", secret, slog.Group("h", "k", secret))) }, `"g":{"k":"[redacted]","h":{"k":"[redacted]"}}`},
		{"With", func(l *slog.Logger) { l.With("k", secret).Info("m") }, `"k":"[redacted]"`},
		{"WithGroup", func(l *slog.Logger) { l.WithGroup("g").With("k", secret).WithGroup("h").Info("m", "k", secret) }, `"g":{"k":"[redacted]","h":{"k":"[redacted]"}}`},
		{"With group attr", func(l *slog.Logger) { l.With(slog.Group("g", "err", errors.New(secret))).Info("m") }, `"g":{"err":"[redacted]"}`},
		{"key kept", func(l *slog.Logger) { l.Info("m", secret, 1) }, `"` + secret + `":1`},
		{"other kinds untouched", func(l *slog.Logger) { l.Info("m", "n", 7, "ok", true, "s", "plain") }, `"n":7,"ok":true,"s":"plain"`},
		{"nil receiver", func(l *slog.Logger) { l.Info("m", "err", (*nilErr)(nil)) }, `"err":"<nil>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r secrets.Redactor
			r.Set([]string{secret, "another-secret"})
			var buf bytes.Buffer
			tt.log(slog.New(r.Handler(slogJSON(&buf).Handler())))
			out := buf.String()
			if !json.Valid(buf.Bytes()) {
				t.Fatalf("not one JSON line: %s", out)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output %s\nlacks %s", out, tt.want)
			}
			if tt.name != "key kept" && strings.Contains(out, secret) {
				t.Errorf("output leaks the secret: %s", out)
			}
		})
	}
}

// With attributes are redacted with the set current at log time, in both
// directions, including for a logger built before the set changed.
func TestHandlerUsesCurrentSet(t *testing.T) {
	var r secrets.Redactor
	var buf bytes.Buffer
	l := slog.New(r.Handler(slogJSON(&buf).Handler())).With("k", "hunter22").WithGroup("g")
	lines := func() []string {
		defer buf.Reset()
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}

	l.Info("m", "x", "hunter22")
	r.Set([]string{"hunter22"})
	l.Info("m", "x", "hunter22")
	r.Set([]string{"other-value"})
	l.Info("m", "x", "hunter22")
	want := []string{
		`{"level":"INFO","msg":"m","k":"hunter22","g":{"x":"hunter22"}}`,
		`{"level":"INFO","msg":"m","k":"[redacted]","g":{"x":"[redacted]"}}`,
		`{"level":"INFO","msg":"m","k":"hunter22","g":{"x":"hunter22"}}`,
	}
	got := lines()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Without a match the wrapper is invisible: same output as the handler it
// wraps, for the same calls.
func TestHandlerTransparent(t *testing.T) {
	logAll := func(l *slog.Logger) {
		l = l.With("a", 1, slog.Group("g", "b", "two")).WithGroup("h")
		l.Info("hello", "err", errors.New("boom"), "s", stringer("x"), "bytes", []byte("raw"), slog.Group("i", "c", 3.5))
		l.Debug("not enabled")
		l.WithGroup("empty").Warn("w")
	}
	var plain, wrapped bytes.Buffer
	logAll(slogJSON(&plain))
	for _, values := range [][]string{nil, {"not-in-any-line"}} {
		var r secrets.Redactor
		r.Set(values)
		wrapped.Reset()
		logAll(slog.New(r.Handler(slogJSON(&wrapped).Handler())))
		if plain.String() != wrapped.String() {
			t.Errorf("set %q: wrapped output\n%s\ndiffers from\n%s", values, wrapped.String(), plain.String())
		}
	}
}

func TestHandlerConcurrent(t *testing.T) {
	var r secrets.Redactor
	r.Set([]string{"hunter22"})
	var buf testenv.Buffer
	l := slog.New(r.Handler(slogJSON(&buf).Handler())).With("k", "hunter22")
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 200 {
			r.Set([]string{"hunter22"})
			r.Set([]string{"hunter22", "other-value"})
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 200 {
				l.With("j", "hunter22").Info("hunter22")
			}
		})
	}
	wg.Wait()
	if strings.Contains(buf.String(), "hunter22") {
		t.Error("a record leaked the secret while the set changed")
	}
}

// No fragment of the input that contains a value survives: with each
// marker turned into a NUL, the text left between markers is original text
// that must hold no value.
func FuzzRedact(f *testing.F) {
	f.Add("abcdef", "defghi", "-abcdefghi-")
	f.Add("abab", "dact", "xababab[redacted]")
	f.Add("secret", "secret123", "secret12secret123")
	f.Add("p@ss/word 100%", "back\\slash\"", "x%2")
	f.Add("пароль \u2028", "\xff\xfe+~", "\\u")
	f.Fuzz(func(t *testing.T, v1, v2, s string) {
		var r secrets.Redactor
		r.Set([]string{v1, v2})
		left := strings.ReplaceAll(r.Redact(s), secrets.Redacted, "\x00")
		for _, v := range []string{v1, v2} {
			if len(v) >= secrets.MinRedactLen && !strings.ContainsRune(v, 0) && strings.Contains(left, v) {
				t.Errorf("Redact(%q) with %q left %q", s, v, left)
			}
		}
		if len(v1) < secrets.MinRedactLen {
			return
		}
		// v1 encoded, between two copies of s, is found whole.
		for _, enc := range encodings(v1) {
			left := strings.ReplaceAll(r.Redact(s+enc+s), secrets.Redacted, "\x00")
			if strings.Contains(left, enc) {
				t.Errorf("Redact(%q) with %q left its encoding %q: %q", s+enc+s, v1, enc, left)
			}
		}
		// A cut through v1 leaves no piece of MinRedactLen bytes at
		// either edge.
		if strings.ContainsRune(v1, 0) {
			return
		}
		n := 1 + len(s)%(len(v1)-1)
		if head := v1[n:]; len(head) >= secrets.MinRedactLen {
			if left := strings.ReplaceAll(r.RedactTail(head+s), secrets.Redacted, "\x00"); strings.HasPrefix(left, head) {
				t.Errorf("RedactTail(%q) with %q left %q", head+s, v1, left)
			}
		}
		if end := v1[:len(v1)-n]; len(end) >= secrets.MinRedactLen {
			if left := strings.ReplaceAll(r.RedactTail(s+end), secrets.Redacted, "\x00"); strings.HasSuffix(left, end) {
				t.Errorf("RedactTail(%q) with %q left %q", s+end, v1, left)
			}
		}
	})
}

// encodings are the ways a program commonly writes v: percent-encoded
// for a query and a path, JSON-escaped (HTML-safe, as encoding/json does),
// and base64 in both alphabets, padded and not.
func encodings(v string) []string {
	out := []string{url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))}
	if utf8.ValidString(v) {
		b, _ := json.Marshal(v)
		out = append(out, string(b[1:len(b)-1]))
	}
	return out
}

// A value is found in the encodings a program gives it on its way to a
// log line, a URL or a JSON document, however much of it is escaped.
func TestRedactEncoded(t *testing.T) {
	var r secrets.Redactor
	r.Set([]string{"p@ss/word", "correct horse+battery", `say "hi"\now`, "пароль-😀"})
	tests := []struct{ name, in, want string }{
		{"percent, upper-case hex", "dsn=postgres://u:p%40ss%2Fword@db/x", "dsn=postgres://u:[redacted]@db/x"},
		{"percent, lower-case hex", "pw=p%40ss%2fword&x=1", "pw=[redacted]&x=1"},
		{"percent, every byte", "pw=%70%40%73%73%2F%77%6f%72%64.", "pw=[redacted]."},
		{"percent, only some", "pw=p@ss%2Fword.", "pw=[redacted]."},
		{"query, + for space and %2B", "q=correct+horse%2Bbattery;", "q=[redacted];"},
		{"path, %20 for space", "/correct%20horse+battery/", "/[redacted]/"},
		{"percent, UTF-8 bytes", "x=%D0%BF%D0%B0%D1%80%D0%BE%D0%BB%D1%8C-%F0%9F%98%80!", "x=[redacted]!"},
		{"JSON, short escapes", `{"a":"say \"hi\"\\now"}`, `{"a":"[redacted]"}`},
		{"JSON, escaped solidus", `"p@ss\/word"`, `"[redacted]"`},
		{"JSON, \\u escapes in either case", `"\u0070\u0040ss\u002fword"`, `"[redacted]"`},
		{"JSON, non-ASCII and a surrogate pair", `"\u043f\u0430\u0440\u043e\u043b\u044c-\ud83d\ude00"`, `"[redacted]"`},
		{"JSON, HTML-safe", `"say \u0022hi\u0022\u005cnow"`, `"[redacted]"`},
		{"percent sign alone is not a match", "p%4", "p%4"},
		{"broken escape is not a match", `p\u00`, `p\u00`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Base64 of text that holds a value hides every character that encodes
// only the value's bits, whatever came before it (three alignments) or
// after it, in both alphabets, padded or not: what stays is at most the
// characters that mix in the neighbouring bytes.
func TestRedactBase64(t *testing.T) {
	const v = "p@ss/word?~~>" // ? and ~ put + and / in the standard alphabet
	var r secrets.Redactor
	r.Set([]string{v})
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding,
		"raw std": base64.RawStdEncoding, "raw url": base64.RawURLEncoding}
	for name, enc := range encs {
		for before := range 3 {
			for after := range 3 {
				text := "user:"[:before] + v + "!!"[:after]
				b64 := enc.EncodeToString([]byte(text))
				got := r.Redact("Basic " + b64 + ".")
				pre, post, ok := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(got, "Basic "), "."), secrets.Redacted)
				if !ok || strings.Contains(post, secrets.Redacted) || !strings.HasPrefix(b64, pre) || !strings.HasSuffix(b64, post) {
					t.Errorf("%s of %q: Redact(%q) = %q, want one marker in it", name, text, b64, got)
					continue
				}
				// Characters with a bit of the bytes before or after.
				maxPre := (8*before + 5) / 6
				maxPost := 0
				if after > 0 {
					maxPost = len(b64) - 8*(before+len(v))/6
				}
				if len(pre) > maxPre || len(post) > maxPost {
					t.Errorf("%s of %q: Redact(%q) = %q, keeps %d and %d characters, want at most %d and %d", name, text, b64, got, len(pre), len(post), maxPre, maxPost)
				}
			}
		}
	}
}

// RedactTail also hides a piece of a value cut by the start or the end of
// the text: a stderr tail's buffer starts anywhere, and a child's last
// write may end anywhere.
func TestRedactTail(t *testing.T) {
	const v = "sk-live-0123456789abcdefghijklmnopqrstuvwxyzABCDE" // 49 bytes
	const pct = "p@ss/word-0123456789"                            // its percent-encoding: p%40ss%2Fword-...
	var r secrets.Redactor
	r.Set([]string{v, "short", pct})
	b64 := base64.StdEncoding.EncodeToString([]byte(v))
	tests := []struct{ name, in, want string }{
		{"suffix at the start", v[20:] + "\nnext line", "[redacted]\nnext line"},
		{"prefix at the end", "token=" + v[:12], "token=[redacted]"},
		{"both", v[45:] + " and " + v[:4], "[redacted] and [redacted]"},
		{"whole value too", v[30:] + " " + v + ".", "[redacted] [redacted]."},
		{"base64 piece at the start", b64[40:] + "\n", "[redacted]\n"},
		{"piece shorter than MinRedactLen stays", v[46:] + " x " + v[:3], v[46:] + " x " + v[:3]},
		{"piece in the middle is not a cut", "x " + v[20:] + " y", "x " + v[20:] + " y"},
		{"short value's piece", "hort shor", "[redacted] [redacted]"},
		// Escaped forms cut at an edge, even through an escape.
		{"percent-encoded suffix at the start", url.QueryEscape(pct)[7:] + " next", "[redacted] next"},
		{"percent-encoded suffix after a cut escape", url.QueryEscape(pct)[10:] + " next", "[redacted] next"},
		{"percent-encoded prefix at the end", "url=" + url.QueryEscape(pct)[:14], "url=[redacted]"},
		{"percent-encoded prefix cut in an escape", "url=" + url.QueryEscape(pct)[:13], "url=[redacted]"},
		{"JSON-escaped prefix cut in an escape", `{"k":"` + `p\u0040ss\u002fwo\u00`, `{"k":"[redacted]`},
		// Split over lines.
		{"split over two lines", "a " + v[:20] + "\n" + v[20:] + " b", "a [redacted] b"},
		{"split over three lines", "a " + v[:10] + "\r\n" + v[10:30] + "\n" + v[30:] + "\nb", "a [redacted]\nb"},
		{"lines that only touch are kept", "x\n" + v[:3] + "\ny", "x\n" + v[:3] + "\ny"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.RedactTail(tt.in); got != tt.want {
				t.Errorf("RedactTail(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	// Redact leaves the edges alone: its text is not a cut.
	if got := r.Redact(v[20:]); got != v[20:] {
		t.Errorf("Redact(%q) = %q, want it unchanged", v[20:], got)
	}
}

// RedactJSON removes secret values from the strings of a JSON document,
// however the client escaped them, and leaves everything else alone.
func TestRedactJSON(t *testing.T) {
	var r secrets.Redactor
	if got := string(r.RedactJSON(json.RawMessage(`{"a":"hunter22"}`))); got != `{"a":"hunter22"}` {
		t.Errorf("empty set changed the document: %s", got)
	}
	r.Set([]string{"hunter22", "sk-live/42"})
	tests := []struct{ in, want string }{
		{`{"text":"my hunter22 here","n":12345678901234567890}`, `{"n":12345678901234567890,"text":"my [redacted] here"}`},
		{`{"deep":[{"x":["\u0068unter22"]}]}`, `{"deep":[{"x":["[redacted]"]}]}`},
		{`{"url":"https://x/sk-live\/42/y"}`, `{"url":"https://x/[redacted]/y"}`},
		{`{"hunter22":true}`, `{"[redacted]":true}`},
		{`"hunter22"`, `"[redacted]"`},
		{"{ \"keep\" : [1, 2.50, null] }", "{ \"keep\" : [1, 2.50, null] }"}, // nothing secret: the client's bytes
		{`{"a":1} {"b":2}`, `null`},
		{`{"a":`, `null`},
	}
	for _, tt := range tests {
		if got := string(r.RedactJSON(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("RedactJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
