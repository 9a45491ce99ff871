package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// scriptStream is a Stream whose server writes out (in chunks of chunk
// bytes) and then goes away; what the gateway writes is kept.
type scriptStream struct {
	mu      sync.Mutex
	out     []byte
	chunk   int
	written bytes.Buffer
}

func (s *scriptStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.out) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), s.chunk)], s.out)
	s.out = s.out[n:]
	return n, nil
}

func (s *scriptStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written.Write(p)
}

func (s *scriptStream) Close() error { return nil }

// FuzzStreamFraming: whatever a hosted server writes on its stream (any
// bytes, cut anywhere), a call over the shared framing returns (the
// server's answer to its id, or connection lost once the stream ends),
// never hangs or panics, and every line the gateway wrote is one valid
// JSON-RPC message.
func FuzzStreamFraming(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`+"\n"), uint8(7))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"ping","id":"x"}`+"\n"+`{"jsonrpc":"2.0","method":"roots/list","id":2}`+"\n"+`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":[1]}}`+"\n"), uint8(3))
	f.Add([]byte("garbage\n\n{\"id\":1}\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}"), uint8(0))
	f.Fuzz(func(t *testing.T, out []byte, chunk uint8) {
		st := &scriptStream{out: out, chunk: int(chunk) + 1}
		var notes atomic.Int64
		c := newStreamConn(st, 5*time.Second, lineLimits{}, func(string, json.RawMessage) { notes.Add(1) }, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := c.call(ctx, "tools/call", json.RawMessage(`{"name":"x"}`))
		var rpc *switchboard.RPCError
		switch {
		case err == nil:
			if !json.Valid(res) {
				t.Fatalf("result is not JSON: %q", res)
			}
		case errors.Is(err, errConnLost), errors.As(err, &rpc):
		default:
			t.Fatalf("call ended with %v, want a result, an RPC error or connection lost", err)
		}
		_ = c.close()
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, line := range bytes.Split(bytes.TrimSuffix(st.written.Bytes(), []byte("\n")), []byte("\n")) {
			var m message
			if len(line) > 0 && (json.Unmarshal(line, &m) != nil || m.JSONRPC != "2.0") {
				t.Fatalf("gateway wrote %q", line)
			}
		}
	})
}
