package upstreams

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard"
)

// FuzzRenamed: a prefixed tool keeps every member but its name, byte
// for byte.
func FuzzRenamed(f *testing.F) {
	f.Add([]byte(`{"name":"echo","inputSchema":{"type":"object"},"_meta":{"big":9007199254740993}}`), "gh_echo")
	f.Add([]byte(`{"name":1}`), "x")
	f.Add([]byte(`[]`), "y")
	f.Fuzz(func(t *testing.T, raw []byte, name string) {
		if !utf8.ValidString(name) {
			return // names come from JSON strings or validated prefixes
		}
		out := renamed(raw, name)
		var in, got map[string]json.RawMessage
		if json.Unmarshal(raw, &in) != nil || in == nil {
			if !bytes.Equal(out, raw) {
				t.Fatalf("non-object changed: %q -> %q", raw, out)
			}
			return
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("renamed produced invalid JSON: %v", err)
		}
		var gotName string
		if json.Unmarshal(got["name"], &gotName) != nil || gotName != name {
			t.Fatalf("name %s, want %q", got["name"], name)
		}
		for k, v := range in {
			if k == "name" {
				continue
			}
			if !bytes.Equal(v, got[k]) {
				t.Fatalf("member %s changed: %s -> %s", k, v, got[k])
			}
		}
	})
}

// FuzzCatalogRouting: every tool in a catalog is found under its own name
// and unknown names are not found.
func FuzzCatalogRouting(f *testing.F) {
	f.Add("echo", "search", "missing")
	f.Add("", "a\x00b", "a")
	f.Fuzz(func(t *testing.T, a, b, probe string) {
		if a == b {
			return
		}
		c := switchboard.NewCatalog(1, []switchboard.Tool{{Name: a, Server: "s1"}, {Name: b, Server: "s2"}})
		if got, ok := c.Lookup(a); !ok || got.Server != "s1" {
			t.Fatalf("lookup %q: %+v %v", a, got, ok)
		}
		if got, ok := c.Lookup(b); !ok || got.Server != "s2" {
			t.Fatalf("lookup %q: %+v %v", b, got, ok)
		}
		if _, ok := c.Lookup(probe); ok != (probe == a || probe == b) {
			t.Fatalf("lookup %q found=%v", probe, ok)
		}
	})
}
