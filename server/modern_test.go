package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResultShapes(t *testing.T) {
	for _, tc := range []struct{ name, method, in, want26, want25 string }{
		{"empty object", "tools/call", `{}`, `{"resultType":"complete"}`, `{}`},
		{"members kept byte for byte", "tools/call", `{"content":[{"type":"text","text":"x"}],"_meta":{"big":9007199254740993}}`,
			`{"content":[{"type":"text","text":"x"}],"_meta":{"big":9007199254740993},"resultType":"complete"}`,
			`{"content":[{"type":"text","text":"x"}],"_meta":{"big":9007199254740993}}`},
		{"trailing space", "tools/call", "{\"a\":1}\n", `{"a":1,"resultType":"complete"}`, "{\"a\":1}\n"},
		{"already there", "tools/call", `{"resultType":"complete","a":1}`, `{"resultType":"complete","a":1}`, `{"resultType":"complete","a":1}`},
		{"only nested", "tools/call", `{"x":{"resultType":"y"}}`, `{"x":{"resultType":"y"},"resultType":"complete"}`, `{"x":{"resultType":"y"}}`},
		{"not an object", "tools/call", `[1]`, `[1]`, `[1]`},
		// A tool's result is the tool's: only resources/read has hints.
		{"tool result with a ttlMs", "tools/call", `{"content":[],"ttlMs":5}`, `{"content":[],"ttlMs":5,"resultType":"complete"}`, `{"content":[],"ttlMs":5}`},
		{"read from a 2025 upstream", "resources/read", `{"contents":[{"uri":"a:b","text":"x"}]}`,
			`{"contents":[{"uri":"a:b","text":"x"}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`,
			`{"contents":[{"uri":"a:b","text":"x"}]}`},
		{"read from a 2026 upstream", "resources/read", `{"contents":[{"uri":"a:b","text":"x"}],"ttlMs":60000,"cacheScope":"public","_meta":{"k":1}}`,
			`{"contents":[{"uri":"a:b","text":"x"}],"ttlMs":60000,"cacheScope":"public","_meta":{"k":1},"resultType":"complete"}`,
			`{"contents":[{"uri":"a:b","text":"x"}],"_meta":{"k":1}}`},
		{"only nested hints", "resources/read", `{"contents":[{"uri":"a:b","text":"\"ttlMs\""}],"_meta":{"ttlMs":1}}`,
			`{"contents":[{"uri":"a:b","text":"\"ttlMs\""}],"_meta":{"ttlMs":1},"resultType":"complete","ttlMs":0,"cacheScope":"private"}`,
			`{"contents":[{"uri":"a:b","text":"\"ttlMs\""}],"_meta":{"ttlMs":1}}`},
	} {
		if got := string(resultFor2026(tc.method, json.RawMessage(tc.in))); got != tc.want26 {
			t.Errorf("%s, 2026: %s, want %s", tc.name, got, tc.want26)
		}
		if got := string(resultFor2025(tc.method, json.RawMessage(tc.in))); got != tc.want25 {
			t.Errorf("%s, 2025: %s, want %s", tc.name, got, tc.want25)
		}
	}
}

func TestStatusFor(t *testing.T) {
	got := map[int]int{}
	for _, c := range []int{-32601, -32600, -32602, -32700, -32020, -32021, -32022, -32603, -32000} {
		got[c] = statusFor(c)
	}
	want := map[int]int{-32601: 404, -32600: 400, -32602: 400, -32700: 400, -32020: 400, -32021: 400, -32022: 400, -32603: 200, -32000: 200}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestCheckStateless(t *testing.T) {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		body string
		code int
	}{
		{"ok", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, 0},
		{"notification needs no method header", map[string]string{"Mcp-Protocol-Version": "2026-07-28"},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, 0},
		{"no version header", map[string]string{"Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, codeHeaderMismatch},
		{"versions differ", map[string]string{"Mcp-Protocol-Version": "2026-08-01", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, codeHeaderMismatch},
		{"no _meta version", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, -32602},
		{"unknown later revision", map[string]string{"Mcp-Protocol-Version": "2030-01-01", "Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2030-01-01"}}}`, codeUnsupportedProtocolVersion},
		{"no name header", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` + meta + `}}`, codeHeaderMismatch},
		{"prompts/get name differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get", "Mcp-Name": "other"},
			`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet",` + meta + `}}`, codeHeaderMismatch},
		{"prompts/get without a name header", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "prompts/get"},
			`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet",` + meta + `}}`, codeHeaderMismatch},
		{"resources/read uri differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "file:///b"},
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a",` + meta + `}}`, codeHeaderMismatch},
		{"resources/read without a name header", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read"},
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a",` + meta + `}}`, codeHeaderMismatch},
		{"resources/read ok", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "file:///a"},
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a",` + meta + `}}`, 0},
		// Not visible ASCII: the header carries it base64-encoded.
		{"base64 name", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "=?base64?ZmlsZTovLy/DqQ==?="},
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///é",` + meta + `}}`, 0},
		{"base64 name differs", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "=?base64?ZmlsZTovLy/DqQ==?="},
			`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///e",` + meta + `}}`, codeHeaderMismatch},
		{"resumption", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list", "Last-Event-Id": "3"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`, codeHeaderMismatch},
	} {
		r := httptest.NewRequest("POST", "/mcp", strings.NewReader(tc.body))
		for k, v := range tc.hdr {
			r.Header.Set(k, v)
		}
		m, rerr := parseMessage([]byte(tc.body))
		if rerr != nil {
			t.Fatalf("%s: %v", tc.name, rerr)
		}
		if !isStatelessRequest(r, m) {
			t.Errorf("%s: not taken as a 2026-07-28 request", tc.name)
		}
		got := 0
		if rpc := checkStateless(r, m); rpc != nil {
			got = rpc.Code
		}
		if got != tc.code {
			t.Errorf("%s: code %d, want %d", tc.name, got, tc.code)
		}
	}
	// Neither header nor _meta names 2026: a plain or session request.
	r := httptest.NewRequest("POST", "/mcp", nil)
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	m, _ := parseMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}`))
	if isStatelessRequest(r, m) {
		t.Error("a 2025 request taken as stateless")
	}
}
