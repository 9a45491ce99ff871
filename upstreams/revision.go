package upstreams

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/switchboard-mcp/switchboard"
)

// Revision20260728 is the stateless MCP revision: no initialize and no
// session; every request carries the protocol keys in _meta (and, over
// HTTP, the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers), and
// server/discover tells a client what a server speaks.
const Revision20260728 = "2026-07-28"

// Which revision each upstream speaks is decided once per connection, at
// connect, and kept until the connection is rebuilt:
//
//   - streamable HTTP: server/discover first (bounded by the connect
//     timeout). Supported versions that include 2026-07-28 make the
//     connection stateless; any refusal (a JSON-RPC error such as -32601
//     or -32022, HTTP 400/404/405, a stateful server asking for a session)
//     falls back to initialize on the same transport at once. An HTTP
//     server always answers, so the fallback never waits for a timeout.
//   - stdio and hosted: initialize first, as before. Only a server that
//     refuses initialize with a JSON-RPC error (one that dropped the 2025
//     handshake) is asked server/discover next. Sending server/discover
//     first over a pipe would stall the connect on a server that reads an
//     unknown request and never answers it (some 2025 SDKs drop requests
//     that precede initialize), and a short probe cannot tell such a server
//     from one that is still starting (npx, uvx): both are silent. So a
//     stdio server that speaks both revisions is spoken to in 2025, which
//     costs it nothing there: the gateway owns the process and its one
//     session.
//   - legacy SSE: always initialize (the transport predates 2026-07-28).

// hop is the revision of one connection, embedded in the framer and in
// remoteConn. It is set while the connection is being made, before it is
// shared, and never changes afterwards.
type hop struct {
	rev string // the revision spoken; "" before it is known
	// meta holds the protocol _meta members every request carries on a
	// 2026-07-28 connection, rendered once ("key":value,... without
	// braces); nil on a 2025 connection.
	meta []byte
}

func (h *hop) revision() string { return h.rev }

// protocolMeta returns the protocol _meta members of a 2026-07-28
// connection (nil on 2025).
func (h *hop) protocolMeta() []byte { return h.meta }

// stateless reports whether the connection speaks 2026-07-28.
func (h *hop) stateless() bool { return h.meta != nil }

// setStateless makes the connection speak 2026-07-28, as client version.
func (h *hop) setStateless(version string) {
	h.rev = Revision20260728
	h.meta = hopMeta(version)
}

// setLegacy makes the connection speak the 2025 revision initialize
// negotiated.
func (h *hop) setLegacy(negotiated string) {
	h.rev = negotiated
	h.meta = nil
}

// revisioner is implemented by connections that know their revision.
type revisioner interface {
	revision() string
	stateless() bool
	protocolMeta() []byte
}

// revisionOf returns c's revision ("" for a builtin).
func revisionOf(c conn) string {
	if r, ok := c.(revisioner); ok {
		return r.revision()
	}
	return ""
}

func isStateless(c conn) bool {
	r, ok := c.(revisioner)
	return ok && r.stateless()
}

// hopMeta renders the gateway's own protocol _meta members for a
// 2026-07-28 hop: the revision, no client capabilities (the gateway
// offers none: no sampling, elicitation or roots) and its identity.
func hopMeta(version string) []byte {
	if version == "" {
		version = "dev"
	}
	b := []byte(`"io.modelcontextprotocol/protocolVersion":"` + Revision20260728 + `",` +
		`"io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"switchboard","version":`)
	return append(append(b, mustJSON(version)...), '}')
}

// hopParams are request params that already carry the hop's protocol
// _meta (callTool builds them so), so the connection sends them as they
// are.
type hopParams json.RawMessage

// withHopMeta returns params (a JSON object, or nil) with members added to
// its _meta: any protocol key the params carried is dropped first (it
// described another hop), every other _meta member and every other param
// is kept byte for byte.
func withHopMeta(params any, members []byte) (json.RawMessage, error) {
	var raw []byte
	switch p := params.(type) {
	case nil:
	case json.RawMessage:
		raw = p
	default:
		b, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		out := make([]byte, 0, len(members)+12)
		out = append(out, `{"_meta":{`...)
		out = append(out, members...)
		return append(out, "}}"...), nil
	}
	obj, err := objectMembers(raw)
	if err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	meta := []byte("{" + string(members) + "}")
	if i := obj.index("_meta"); i >= 0 {
		mm := map[string]json.RawMessage{}
		if v := bytes.TrimSpace(obj[i].value); !bytes.Equal(v, []byte("null")) {
			if err := json.Unmarshal(v, &mm); err != nil {
				return nil, errors.New("params._meta must be an object")
			}
		}
		dropProtocolMeta(mm)
		if len(mm) > 0 {
			// Our keys first, then the caller's, sorted (a map has no
			// order to keep); the values are the caller's bytes.
			b, _ := json.Marshal(mm)
			meta = append(append(meta[:len(meta)-1], ','), b[1:]...)
		}
		obj[i].value = meta
	} else {
		obj = append(obj, member{key: []byte(`"_meta"`), value: meta})
	}
	return obj.render(), nil
}

// stripHopResult turns the result of a 2026-07-28 upstream into what a
// 2025 upstream answers: it drops "resultType" (the gateway's edge adds
// its own for 2026 clients, so a result is the same whichever revision the
// upstream speaks) and the protocol keys in the result's _meta (they
// describe the upstream's hop, e.g. its serverInfo). Every other byte is
// kept. A resultType other than "complete" (input_required: the upstream
// asks the client for input) is refused: the gateway does not forward
// multi-round-trip requests.
func stripHopResult(res json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(res, []byte(`"resultType"`)) && !bytes.Contains(res, []byte(protocolMetaPrefix)) {
		return res, nil
	}
	obj, err := objectMembers(res)
	if err != nil {
		return res, nil // not an object: passed on as it came
	}
	changed := false
	if i := obj.index("resultType"); i >= 0 {
		var rt string
		_ = json.Unmarshal(obj[i].value, &rt)
		if rt != "complete" {
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "the server asked for more input (resultType %q), which the gateway does not forward", switchboard.Clip(rt))
		}
		obj = slices.Delete(obj, i, i+1)
		changed = true
	}
	if i := obj.index("_meta"); i >= 0 {
		if mo, err := objectMembers(obj[i].value); err == nil {
			n := len(mo)
			mo = slices.DeleteFunc(mo, func(m member) bool {
				var k string
				return json.Unmarshal(m.key, &k) == nil && len(k) >= len(protocolMetaPrefix) && k[:len(protocolMetaPrefix)] == protocolMetaPrefix
			})
			if len(mo) != n {
				changed = true
				if len(mo) == 0 {
					obj = slices.Delete(obj, i, i+1)
				} else {
					obj[i].value = mo.render()
				}
			}
		}
	}
	if !changed {
		return res, nil
	}
	return obj.render(), nil
}

// member is one member of a JSON object: its key as written (quoted) and
// its value's bytes.
type member struct {
	key, value []byte
}

type object []member

func (o object) index(key string) int {
	for i := len(o) - 1; i >= 0; i-- { // the last of repeated keys wins, as in encoding/json
		var k string
		if bytes.Contains(o[i].key, []byte(key)) && json.Unmarshal(o[i].key, &k) == nil && k == key {
			return i
		}
	}
	return -1
}

func (o object) render() []byte {
	n := 2
	for _, m := range o {
		n += len(m.key) + len(m.value) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, m := range o {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.key...), ':'), m.value...)
	}
	return append(out, '}')
}

// objectMembers splits a JSON object into its members, keeping the bytes
// of every key and value (so numbers and strings pass unchanged).
func objectMembers(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out object
	for dec.More() {
		start := dec.InputOffset()
		if _, err := dec.Token(); err != nil { // the key
			return nil, err
		}
		key := bytes.TrimLeft(b[start:dec.InputOffset()], " \t\r\n,")
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{key: key, value: v})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return out, nil
}

// hopParams returns the params to send on this connection: on a
// 2026-07-28 connection with the hop's protocol _meta added (unless
// they carry it already), otherwise as they are.
func (h *hop) hopParams(params any) (any, error) {
	if p, ok := params.(hopParams); ok {
		return json.RawMessage(p), nil
	}
	if !h.stateless() {
		return params, nil
	}
	return withHopMeta(params, h.meta)
}
