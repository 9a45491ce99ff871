package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestIDLooks (issue 20, item 6) pins the look of each kind of id a client
// or operator reads, each made by the code that makes it: an MCP session
// (Mcp-Session-Id), a 2026-07-28 input request's key, a sandbox session
// (session_id), the gateway instance on the engine (kept in the store, or
// derived from where the store is). Each matches its own form and no
// other's, and none starts with another kind's prefix: "sb-" was once all
// of them.
func TestIDLooks(t *testing.T) {
	_, clash := fixtures(t)
	g := startGateway(t, [][2]any{{"clash", map[string]any{"command": clash}}}, nil)

	c := newRaw(t, g.url+"/mcp")
	c.initialize()

	r := newRaw(t, g.url+"/mcp")
	for k, v := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "ask"} {
		r.header.Set(k, v)
	}
	call := func(extra string) *rpcReply {
		return r.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"name":"q"},` + extra +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`)
	}
	rep := call("")
	var round struct {
		RequestState  string                     `json:"requestState"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	if err := json.Unmarshal(rep.msg.Result, &round); err != nil || len(round.InputRequests) != 1 {
		t.Fatalf("no input request: %d %s", rep.Status, rep.Body)
	}
	inputKey := ""
	for k := range round.InputRequests {
		inputKey = k
	}
	// Answer it, so that no call is left waiting when the gateway stops.
	if rep := call(`"requestState":"` + round.RequestState + `","inputResponses":{"` + inputKey + `":{"role":"assistant","model":"m","content":{"type":"text","text":"a"}}},`); rep.code() != 0 {
		t.Errorf("answering the input request: %d %s", rep.Status, rep.Body)
	}

	st, err := sqlite.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	stored, err := instanceName(t.Context(), config.Config{DataDir: "/data"}, st)
	if err != nil {
		t.Fatal(err)
	}

	kinds := []struct {
		kind, prefix string
		look         *regexp.Regexp
		id           string
	}{
		{"MCP session", "mcp-", regexp.MustCompile(`^mcp-[0-9a-f]{32}$`), c.session},
		{"input request key", "input-", regexp.MustCompile(`^input-[1-9][0-9]*$`), inputKey},
		{"sandbox session", "sbx-", regexp.MustCompile(`^sbx-[0-9a-f]{16}$`), sandbox.NewSessionID()},
		{"instance (stored)", "sb-", regexp.MustCompile(`^sb-[0-9a-f]{12}$`), stored},
		{"instance (derived)", "sb-", regexp.MustCompile(`^sb-[0-9a-f]{12}$`), derivedInstanceName(config.Config{DataDir: "/data"})},
	}
	for _, k := range kinds {
		if !k.look.MatchString(k.id) {
			t.Errorf("%s id %q does not look like %s", k.kind, k.id, k.look)
		}
		for _, o := range kinds {
			if o.prefix == k.prefix {
				continue
			}
			if o.look.MatchString(k.id) || strings.HasPrefix(k.id, o.prefix) {
				t.Errorf("%s id %q could be taken for the other kind %s (%s)", k.kind, k.id, o.kind, o.prefix)
			}
		}
	}
}
