package upstreams

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

func TestWithHopMeta(t *testing.T) {
	members := hopMeta("1.2")
	ours := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"switchboard","version":"1.2"}`
	for _, tc := range []struct {
		name   string
		params any
		want   string
	}{
		{"none", nil, `{"_meta":{` + ours + `}}`},
		{"null", json.RawMessage(`null`), `{"_meta":{` + ours + `}}`},
		{"no meta", json.RawMessage(`{"cursor":"c1","big":9007199254740993}`), `{"cursor":"c1","big":9007199254740993,"_meta":{` + ours + `}}`},
		{"a map", map[string]string{"cursor": "c"}, `{"cursor":"c","_meta":{` + ours + `}}`},
		{"user keys kept, client protocol keys dropped",
			json.RawMessage(`{"_meta":{"progressToken":7,"io.modelcontextprotocol/clientInfo":{"name":"client"},"u/k":9007199254740993},"name":"x"}`),
			`{"_meta":{` + ours + `,"progressToken":7,"u/k":9007199254740993},"name":"x"}`},
		{"meta null", json.RawMessage(`{"_meta":null}`), `{"_meta":{` + ours + `}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withHopMeta(tc.params, members)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := withHopMeta(json.RawMessage(`{"_meta":[1]}`), members); err == nil {
		t.Error("a _meta that is not an object was accepted")
	}
}

func TestStripHopResult(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"2025 shape unchanged", `{"content":[{"type":"text","text":"resultType"}],"isError":false}`, `{"content":[{"type":"text","text":"resultType"}],"isError":false}`},
		{"resultType dropped", `{"content":[],"resultType":"complete","structuredContent":{"n":9007199254740993}}`, `{"content":[],"structuredContent":{"n":9007199254740993}}`},
		{"protocol meta dropped, user meta kept",
			`{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s"},"big":9007199254740993},"resultType":"complete"}`,
			`{"content":[],"_meta":{"big":9007199254740993}}`},
		{"meta of protocol keys only dropped", `{"_meta":{"io.modelcontextprotocol/serverInfo":{}},"content":[]}`, `{"content":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stripHopResult(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	_, err := stripHopResult(json.RawMessage(`{"resultType":"input_required","inputRequests":{}}`))
	if !errors.Is(err, switchboard.ErrUnavailable) {
		t.Errorf("input_required: err = %v, want ErrUnavailable", err)
	}
}
