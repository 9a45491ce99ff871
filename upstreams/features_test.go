package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
)

func TestTemplateRegexp(t *testing.T) {
	for _, tc := range []struct {
		tmpl, uri string
		match     bool
	}{
		{"clash:item/{id}", "clash:item/42", true},
		{"clash:item/{id}", "clash:item/4/2", false},
		{"clash:item/{id}", "clash:item/", true},
		{"file:///{+path}", "file:///a/b/c.txt", true},
		{"http://example.com/~{resource_name}/", "http://example.com/~r/", true},
		{"http://example.com/~{resource_name}/", "http://example.com/r/", false},
		{"db://{table}{?limit}", "db://users?limit=3", true},
		{"a.b/{x}", "aXb/1", false}, // literal parts are literal
	} {
		re := templateRegexp(tc.tmpl)
		if re == nil {
			t.Fatalf("%s did not compile", tc.tmpl)
		}
		if got := re.MatchString(tc.uri); got != tc.match {
			t.Errorf("%s ~ %s = %v, want %v", tc.tmpl, tc.uri, got, tc.match)
		}
	}
	if templateRegexp("broken{x") != nil {
		t.Error("an unclosed expression compiled")
	}
}

func TestListPage(t *testing.T) {
	m := New(Options{PageSize: 2})
	fc := &featureCatalog{}
	for _, n := range []string{"a", "b", "c"} {
		fc.prompts = append(fc.prompts, featureEntry{key: n, raw: json.RawMessage(`{"name":"` + n + `"}`)})
	}
	m.features.Store(fc)
	ctx := context.Background()
	pick := func(fc *featureCatalog) []featureEntry { return fc.prompts }
	var got []string
	var params json.RawMessage
	for range 3 {
		res, err := m.listPage(ctx, params, "prompts", pick)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Prompts    []struct{ Name string }
			NextCursor string
		}
		if err := json.Unmarshal(res, &page); err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		for _, p := range page.Prompts {
			got = append(got, p.Name)
		}
		if page.NextCursor == "" {
			break
		}
		params = mustJSON(map[string]string{"cursor": page.NextCursor})
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, got); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}
	if _, err := m.listPage(ctx, json.RawMessage(`{"cursor":"not-ours"}`), "prompts", pick); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("a foreign cursor: %v, want ErrInvalid", err)
	}
}

func TestSetMember(t *testing.T) {
	got, err := setMember(json.RawMessage(`{"name":"p_greet","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":7}}`), "name", mustJSON("greet"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"_meta":{"progressToken":7},"arguments":{"x":1},"name":"greet"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	got, _ = setMember(json.RawMessage(`{"uri":"x:y","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), "", nil)
	if want := `{"uri":"x:y"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
