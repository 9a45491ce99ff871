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
