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

// FuzzCatalogRouting: two upstreams list tools (raw tools/list results,
// as hostile as the fuzzer likes), the second with a prefix; the catalog
// built from them must route exactly what clients see. Every listed tool
// a client reads (its exact "name" member, as a JSON parser sees it) is
// found under that name and reaches the server and upstream name that
// listed it, or is shadowed by an earlier server that owns the name; and
// nothing else is found.
func FuzzCatalogRouting(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"echo"},{"name":"a","NAME":"b"}]}`), []byte(`{"tools":[{"name":"echo","x":1}]}`), "p_", "p_echo")
	f.Add([]byte(`{"tools":[{"name":"dup"},{"name":"dup"},{"Name":"hidden"}]}`), []byte(`{"tools":[{"name":"x","name":"y"}]}`), "", "hidden")
	f.Add([]byte(`{"tools":[{"name":"\u0065cho"},{"name":""},{"name":7},[]]}`), []byte(`{}`), "gh_", "echo")
	f.Fuzz(func(t *testing.T, page1, page2 []byte, prefix, probe string) {
		if !utf8.ValidString(prefix) {
			return // prefixes come from a validated servers file
		}
		servers := []struct{ name, prefix string }{{"s1", ""}, {"s2", prefix}}
		seen := map[string]string{}
		var tools []switchboard.Tool
		for i, page := range [][]byte{page1, page2} {
			listed, _, err := parseToolsPage(page)
			if err != nil {
				continue
			}
			for _, lt := range listed {
				tool, owner := catalogEntry(seen, servers[i].name, servers[i].prefix, lt)
				if owner != "" {
					if i == 0 && owner != "s1" || seen[tool.Name] != owner {
						t.Fatalf("%s shadowed by %q, which does not own it", tool.Name, owner)
					}
					continue
				}
				if tool.Name != servers[i].prefix+lt.name || tool.UpstreamName != lt.name {
					t.Fatalf("listed %q of %s became %q -> %q", lt.name, servers[i].name, tool.Name, tool.UpstreamName)
				}
				tools = append(tools, tool)
			}
		}
		cat := switchboard.NewCatalog(1, tools)
		for _, tool := range tools {
			var members map[string]json.RawMessage
			var shown string
			if json.Unmarshal(tool.Raw, &members) != nil || json.Unmarshal(members["name"], &shown) != nil || shown != tool.Name {
				t.Fatalf("clients see the name %s in %s, the catalog routes %q", members["name"], tool.Raw, tool.Name)
			}
			got, ok := cat.Lookup(shown)
			if !ok || got.Server != tool.Server || got.UpstreamName != tool.UpstreamName {
				t.Fatalf("lookup %q = %+v %v, want server %s upstream name %q", shown, got, ok, tool.Server, tool.UpstreamName)
			}
		}
		if _, ok := cat.Lookup(probe); ok != (seen[probe] != "") {
			t.Fatalf("lookup %q found=%v, but the name is taken by %q", probe, ok, seen[probe])
		}
	})
}
