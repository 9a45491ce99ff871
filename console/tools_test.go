package console

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const schema = `{"type":"object","required":["text"],"properties":{
  "text":{"type":"string","description":"what to say"},
  "n":{"type":"integer"},"ratio":{"type":["number","null"]},"loud":{"type":"boolean"},
  "mode":{"type":"string","enum":["a","b"]},"opts":{"type":"object","properties":{"deep":{"type":"string"}}},"tags":{"type":"array"}}}`

func TestSchemaProps(t *testing.T) {
	type p struct{ Name, Type, Kind string }
	var got []p
	props := schemaProps(json.RawMessage(schema), 0)
	for _, x := range props {
		got = append(got, p{x.Name, x.Type, x.Kind})
	}
	want := []p{{"text", "string", "text"}, {"n", "integer", "integer"}, {"ratio", "number | null", "number"}, {"loud", "boolean", "bool"},
		{"mode", "string", "enum"}, {"opts", "object", "json"}, {"tags", "array", "json"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("props in schema order (-want +got):\n%s", d)
	}
	if !props[0].Required || props[1].Required || len(props[5].Nested) != 1 {
		t.Errorf("required or nested properties lost: %+v", props)
	}
}

func TestFormArguments(t *testing.T) {
	props := schemaProps(json.RawMessage(schema), 0)
	for name, tc := range map[string]struct {
		form    url.Values
		want    string
		wantErr string
	}{
		"typed fields": {form: url.Values{"arg.text": {"hi"}, "arg.n": {"42"}, "arg.ratio": {"0.5"}, "arg.loud": {"false"}, "arg.mode": {"b"}, "arg.opts": {`{"deep":"x"}`}},
			want: `{"loud":false,"mode":"b","n":42,"opts":{"deep":"x"},"ratio":0.5,"text":"hi"}`},
		"empty optional fields left out": {form: url.Values{"arg.text": {""}, "arg.n": {""}, "arg.loud": {""}}, want: `{}`},
		"big integers kept exactly":      {form: url.Values{"arg.n": {"9007199254740993"}}, want: `{"n":9007199254740993}`},
		"JSON box wins":                  {form: url.Values{"arg.text": {"ignored"}, "json": {`{"text":"raw"}`}}, want: `{"text":"raw"}`},
		"not an integer":                 {form: url.Values{"arg.n": {"4.5"}}, wantErr: "n must be an integer"},
		"bad JSON field":                 {form: url.Values{"arg.tags": {"[1,"}}, wantErr: "tags must be JSON"},
		"JSON box not an object":         {form: url.Values{"json": {"[1]"}}, wantErr: "must be a JSON object"},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(tc.form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		got, err := formArguments(props, r)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case string(got) != tc.want:
			t.Errorf("%s: %s, want %s", name, got, tc.want)
		}
	}
}

func TestNewTextItem(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want textItem
	}{
		"text kept as it came":       {in: "line one\n  line two\n", want: textItem{Body: "line one\n  line two\n"}},
		"a JSON scalar is text":      {in: "42", want: textItem{Body: "42"}},
		"not quite JSON is text":     {in: `{"a": 1`, want: textItem{Body: `{"a": 1`}},
		"a JSON object is indented":  {in: `{"a":1,"b":[2]}`, want: textItem{Body: "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}", JSON: true}},
		"a JSON array, spaces round": {in: " [1]\n", want: textItem{Body: "[\n  1\n]", JSON: true}},
	} {
		if d := cmp.Diff(tc.want, newTextItem(tc.in)); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

// TestTryResultMarkup: a try-it result shows each text item in its own
// pre.text with its line breaks, a JSON text indented (pre.text.json), and
// the whole result indented in pre.json, the classes style.css gives
// wrapping only between words (text) or none with scrolling (JSON).
func TestTryResultMarkup(t *testing.T) {
	c := New(Options{})
	res := &tryResult{OK: true, Text: []textItem{newTextItem("first line\nsecond line"), newTextItem(`{"stdout":"hi"}`)},
		JSON: "{\n  \"isError\": false\n}"}
	v := &view{Project: "a", CSRF: "x", Data: newToolsData([]toolView{{Name: "t", Server: "s", Result: res}}, "t")}
	rec := httptest.NewRecorder()
	c.render(rec, 200, "tools", v)
	for _, want := range []string{
		"<pre class=\"text\">first line\nsecond line</pre>",
		"<pre class=\"text json\">{\n  &#34;stdout&#34;: &#34;hi&#34;\n}</pre>",
		"<pre class=\"json\">{\n  &#34;isError&#34;: false\n}</pre>",
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("try-it result lacks %q", want)
		}
	}
}
