package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/jsonscan"
)

// MCP 2026-07-28 (SEP-2575, SEP-2243) is stateless: no initialize, no
// Mcp-Session-Id, no GET stream. Every request names its protocol version
// in params._meta and in the MCP-Protocol-Version header, server/discover
// replaces the handshake, subscriptions/listen replaces the GET stream,
// and every result carries resultType. The edge answers such requests
// itself (mcp-go only ever sees 2025 sessions), on /mcp and on every
// project's /mcp, beside the session-based revisions.

const (
	// protocol2026 is the stateless revision the edge speaks.
	protocol2026 = "2026-07-28"
	// metaReserved prefixes the _meta keys MCP reserves for the protocol.
	metaReserved        = "io.modelcontextprotocol/"
	metaProtocolVersion = metaReserved + "protocolVersion"
	metaServerInfo      = metaReserved + "serverInfo"
	metaSubscriptionID  = metaReserved + "subscriptionId"

	// Error codes 2026-07-28 adds.
	codeHeaderMismatch             = -32020
	codeUnsupportedProtocolVersion = -32022
)

// statelessVersions are the stateless revisions the MCP endpoint accepts.
var statelessVersions = []string{protocol2026}

// allVersions is what server/discover advertises, newest first.
var allVersions = append(append([]string{}, statelessVersions...), supportedVersions...)

// isStatelessVersion reports whether v names the stateless era: a
// YYYY-MM-DD date on or after 2026-07-28 (a later revision we do not know
// is still of that era, and is answered with -32022 and our list).
func isStatelessVersion(v string) bool {
	return len(v) == 10 && v[4] == '-' && v[7] == '-' && v >= protocol2026
}

// metaProtocol returns params._meta's protocol version, "" when absent.
func metaProtocol(params json.RawMessage) string {
	if !bytes.Contains(params, []byte(metaProtocolVersion)) {
		return ""
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[metaProtocolVersion], &v)
	return v
}

// isStatelessRequest tells a 2026-07-28 request from the others by the
// request itself: the protocol version in _meta or in the header names
// the stateless era.
func isStatelessRequest(r *http.Request, m *rpcMessage) bool {
	return isStatelessVersion(r.Header.Get("Mcp-Protocol-Version")) || isStatelessVersion(metaProtocol(m.Params))
}

// statusFor is the HTTP status 2026-07-28 prescribes for a JSON-RPC error
// answered before any stream started.
func statusFor(code int) int {
	switch code {
	case switchboard.CodeMethodNotFound:
		return http.StatusNotFound
	case codeHeaderMismatch, codeUnsupportedProtocolVersion, -32021,
		switchboard.CodeInvalidRequest, switchboard.CodeInvalidParams, switchboard.CodeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func writeStatelessError(w http.ResponseWriter, id json.RawMessage, rpc *switchboard.RPCError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(statusFor(rpc.Code))
	_, _ = w.Write(append(errorResponse(id, rpc), '\n'))
}

// checkStateless applies the transport rules of 2026-07-28 to a request:
// the version in the header and in _meta, both present and equal and one
// we speak, and the Mcp-Method and Mcp-Name headers equal to the body.
func checkStateless(r *http.Request, m *rpcMessage) *switchboard.RPCError {
	hv, mv := r.Header.Get("Mcp-Protocol-Version"), metaProtocol(m.Params)
	switch {
	case r.Header.Get("Last-Event-Id") != "":
		return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "Last-Event-ID is not part of MCP " + protocol2026 + ": streams are not resumable; send the request again with a new id"}
	case hv == "":
		return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "MCP-Protocol-Version header is required on requests carrying " + metaProtocolVersion}
	case mv == "" && !m.isNotification():
		return &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: "missing or invalid _meta field " + metaProtocolVersion + " (MCP-Protocol-Version header says " + switchboard.Clip(hv) + ")"}
	case mv != "" && hv != mv:
		return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "MCP-Protocol-Version header " + switchboard.Clip(hv) + " does not match _meta " + metaProtocolVersion + " " + switchboard.Clip(mv)}
	}
	supported := false
	for _, v := range statelessVersions {
		supported = supported || v == hv
	}
	if !supported {
		data, _ := json.Marshal(map[string]any{"supported": allVersions, "requested": hv})
		return &switchboard.RPCError{Code: codeUnsupportedProtocolVersion, Message: "unsupported protocol version " + switchboard.Clip(hv) + "; supported: " + strings.Join(allVersions, ", "), Data: data}
	}
	if m.isNotification() || m.Method == "" {
		return nil
	}
	if h := r.Header.Get("Mcp-Method"); h != m.Method {
		if h == "" {
			return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "missing Mcp-Method header (MCP " + protocol2026 + " requires it, equal to the body's method)"}
		}
		return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "Mcp-Method header " + switchboard.Clip(h) + " does not match the body's method " + switchboard.Clip(m.Method)}
	}
	if field, name, ok := namedBy(m); ok {
		h := r.Header.Get("Mcp-Name")
		if h == "" {
			return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "missing Mcp-Name header (MCP " + protocol2026 + " requires it on " + m.Method + ", equal to params." + field + ")"}
		}
		// A value that is not plain visible ASCII travels as
		// =?base64?...?=; compare what it says, not how it is written.
		if v, decoded := mcp.DecodeHeaderValue(h); !decoded || v != name {
			return &switchboard.RPCError{Code: codeHeaderMismatch, Message: "Mcp-Name header " + switchboard.Clip(h) + " does not match params." + field + " " + switchboard.Clip(name)}
		}
	}
	return nil
}

// namedBy returns the params member a 2026-07-28 request names in its
// Mcp-Name header (tools/call and prompts/get: name; resources/read: uri)
// and its value; ok is false for the methods that carry no Mcp-Name.
func namedBy(m *rpcMessage) (field, name string, ok bool) {
	switch m.Method {
	case "tools/call", "prompts/get":
		field = "name"
	case "resources/read":
		field = "uri"
	default:
		return "", "", false
	}
	var p map[string]json.RawMessage
	_ = json.Unmarshal(m.Params, &p)
	_ = json.Unmarshal(p[field], &name)
	return field, name, true
}

// statelessPost answers one 2026-07-28 request. Any Mcp-Session-Id is
// ignored: the revision has no sessions.
func (s *Server) statelessPost(w http.ResponseWriter, r *http.Request, m *rpcMessage) {
	if rpc := checkStateless(r, m); rpc != nil {
		writeStatelessError(w, m.idOrNil(), rpc)
		return
	}
	if m.isNotification() || m.Method == "" {
		// notifications/cancelled included: over HTTP, 2026-07-28 cancels
		// a request by closing its response stream, which cancels the
		// call here; there is no session to find a call by id in.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	ctx := withTraceContext(r.Context(), r.Header)
	switch m.Method {
	case "server/discover":
		s.finishStateless(w, &postWriter{w: w}, m.ID, s.discoverResult(), nil)
	case "ping":
		s.finishStateless(w, &postWriter{w: w}, m.ID, json.RawMessage(`{"resultType":"complete"}`), nil)
	case "tools/list":
		res, rpc := s.dispatchResult(ctx, "", m, nil)
		if rpc == nil && s.sessionCatalog(ctx, "") != nil {
			res = withListMembers(res) // rendered for this caller: not the shared cache's
		} else if rpc == nil {
			res = s.statelessTools(res)
		}
		s.finishStateless(w, &postWriter{w: w}, m.ID, res, rpc)
	case "tools/call", "prompts/get", "resources/read", "completion/complete":
		s.statelessCall(w, r, m, ctx)
	case "prompts/list", "resources/list", "resources/templates/list":
		res, rpc := s.dispatchResult(ctx, "", m, nil)
		if rpc == nil {
			res = withListMembers(res)
		}
		s.finishStateless(w, &postWriter{w: w}, m.ID, res, rpc)
	case "subscriptions/listen":
		s.listen(w, r, m)
	default:
		writeStatelessError(w, m.ID, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound,
			Message: "method " + switchboard.Clip(m.Method) + " is not served; this gateway serves server/discover, tools/list, tools/call, prompts/list, prompts/get, resources/list, resources/templates/list, resources/read, completion/complete and subscriptions/listen"})
	}
}

// finishStateless writes the answer: an error that comes before any
// stream gets the HTTP status 2026-07-28 prescribes for its code.
func (s *Server) finishStateless(w http.ResponseWriter, out *postWriter, id json.RawMessage, res json.RawMessage, rpc *switchboard.RPCError) {
	if rpc == nil {
		out.finish(response(id, res))
		return
	}
	out.mu.Lock()
	streamed := out.streamed
	out.finished = true
	out.mu.Unlock()
	if streamed {
		out.finish(errorResponse(id, rpc))
		return
	}
	writeStatelessError(w, id, rpc)
}

// discoverResult answers server/discover: every revision the endpoint
// speaks, its capabilities and identity.
func (s *Server) discoverResult() json.RawMessage {
	caps := map[string]any{"tools": map[string]any{"listChanged": true}}
	if _, ok := s.gw.(Features); ok {
		caps["prompts"] = map[string]any{"listChanged": true}
		caps["resources"] = map[string]any{"listChanged": true}
		caps["completions"] = map[string]any{}
	}
	b, _ := json.Marshal(map[string]any{
		"supportedVersions": allVersions,
		"capabilities":      caps,
		"resultType":        "complete",
		"ttlMs":             0,
		"cacheScope":        "private",
		"_meta":             map[string]any{metaServerInfo: map[string]string{"name": "switchboard", "version": s.opts.Version}},
	})
	return b
}

// statelessTools adds the members 2026-07-28 requires on a tools/list
// result: resultType and the cache hints (ttlMs 0: always revalidate;
// private: the list depends on the project and token). renderTools hands
// out one slice per catalog, so its identity says when to render again.
func (s *Server) statelessTools(list json.RawMessage) json.RawMessage {
	if r := s.renderedStateless.Load(); r != nil && &r.catalog[0] == &list[0] {
		return r.result
	}
	out := make([]byte, 0, len(list)+64)
	out = append(out, list[:len(list)-1]...)
	out = append(out, `,"resultType":"complete","ttlMs":0,"cacheScope":"private"}`...)
	s.renderedStateless.Store(&renderedStateless{catalog: list, result: out})
	return out
}

type renderedStateless struct {
	catalog []byte // the rendered list this was derived from
	result  []byte
}

// withListMembers adds the members 2026-07-28 requires on a list result
// (as statelessTools does for tools/list).
func withListMembers(list json.RawMessage) json.RawMessage {
	t := bytes.TrimRight(list, " \t\r\n")
	if len(t) < 2 || t[len(t)-1] != '}' {
		return list
	}
	out := make([]byte, 0, len(t)+64)
	out = append(out, t[:len(t)-1]...)
	return append(out, `,"resultType":"complete","ttlMs":0,"cacheScope":"private"}`...)
}

// A result reaches a client shaped as the client's revision says,
// whichever revision the upstream spoke: resultFor2026 and resultFor2025
// are the two shapes of an upstream's result of method, as it came (the
// upstreams package has already dropped a 2026-07-28 hop's resultType
// and protocol _meta). Lists are rendered by the gateway, not passed on,
// so only resources/read carries an upstream's cache hints.

// cacheHints are the members 2026-07-28 requires on a cacheable result
// (resources/read here) and which 2025 results do not have.
var cacheHints = []string{"ttlMs", "cacheScope"}

// resultFor2026 adds "resultType":"complete" and, on resources/read, the
// cache hints the upstream gave none of (a 2025 upstream): ttlMs 0 (stale
// at once: the gateway knows nothing of how long the contents stay
// valid) and cacheScope private (they may depend on the project and
// token; public is only the revision's default for an absent member).
// The upstream's bytes are kept; members it set are left alone.
func resultFor2026(method string, res json.RawMessage) json.RawMessage {
	add := [][2]string{{"resultType", `"complete"`}}
	if method == "resources/read" {
		add = append(add, [2]string{"ttlMs", "0"}, [2]string{"cacheScope", `"private"`})
	}
	return withMembers(res, add)
}

// resultFor2025 drops what a 2026-07-28 upstream's resources/read result
// carries that 2025 results do not: the cache hints. Every other byte
// is kept.
func resultFor2025(method string, res json.RawMessage) json.RawMessage {
	if method != "resources/read" || !bytes.Contains(res, []byte(`"ttlMs"`)) && !bytes.Contains(res, []byte(`"cacheScope"`)) {
		return res
	}
	return withoutMembers(res, cacheHints)
}

// withMembers appends each member (key, value as JSON) that the object
// res does not have, after its last member; anything else is returned
// as it came.
func withMembers(res json.RawMessage, add [][2]string) json.RawMessage {
	t := bytes.TrimRight(res, " \t\r\n")
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return res
	}
	var out []byte
	empty := len(bytes.TrimSpace(t[1:len(t)-1])) == 0
	for _, kv := range add {
		if hasTopLevelKey(t, kv[0]) {
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(t)+64)
			out = append(out, t[:len(t)-1]...)
		}
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = append(append(append(append(out, '"'), kv[0]...), `":`...), kv[1]...)
	}
	if out == nil {
		return res
	}
	return append(out, '}')
}

// withoutMembers returns the object res without its top-level members
// named in drop, every other member's bytes and order kept. A key
// jsonscan leaves to encoding/json (an escape, a byte beyond ASCII)
// cannot be one of ours; such an object is re-encoded through a map,
// which keeps the values' bytes but not the members' order.
func withoutMembers(res json.RawMessage, drop []string) json.RawMessage {
	out := make([]byte, 0, len(res))
	out = append(out, '{')
	dropped := false
	ok := jsonscan.Members(res, func(key, val []byte) {
		if slices.Contains(drop, string(key)) {
			dropped = true
			return
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), key...), `":`...), val...)
	})
	if ok {
		if !dropped {
			return res
		}
		return append(out, '}')
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil || m == nil {
		return res
	}
	n := len(m)
	for _, k := range drop {
		delete(m, k)
	}
	if len(m) == n {
		return res
	}
	b, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return b
}

// hasTopLevelKey reports whether the JSON object obj has member key.
func hasTopLevelKey(obj []byte, key string) bool {
	if !bytes.Contains(obj, []byte(`"`+key+`"`)) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return false
	}
	_, ok := m[key]
	return ok
}

// What a listen stream carries: list changes of tools, prompts and
// resources.
const (
	listenTools uint32 = 1 << iota
	listenPrompts
	listenResources
)

// listeners are the open subscriptions/listen streams of one edge.
type listeners struct {
	mu  sync.Mutex
	chs map[*listener]struct{}
}

// listener is one stream: pending holds the kinds of change not sent
// yet, ch wakes the stream; owner is the caller that opened it
// (CallRequest.Caller), for changes of its own tools.
type listener struct {
	want    uint32
	owner   string
	pending atomic.Uint32
	ch      chan struct{}
}

func (l *listeners) add(want uint32, owner string) *listener {
	ch := &listener{want: want, owner: owner, ch: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.chs == nil {
		l.chs = map[*listener]struct{}{}
	}
	l.chs[ch] = struct{}{}
	l.mu.Unlock()
	return ch
}

func (l *listeners) remove(ch *listener) {
	l.mu.Lock()
	delete(l.chs, ch)
	l.mu.Unlock()
}

func (l *listeners) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.chs)
}

// notify wakes every stream; changes that come faster than a stream
// writes them coalesce into one notification (it is a hint to re-list).
func (l *listeners) notify(kind uint32) { l.notifyOwner("", kind) }

// notifyOwner wakes the streams of owner ("": every stream).
func (l *listeners) notifyOwner(owner string, kind uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.chs {
		if ch.want&kind == 0 || (owner != "" && ch.owner != owner) {
			continue
		}
		ch.pending.Or(kind)
		select {
		case ch.ch <- struct{}{}:
		default:
		}
	}
}

// listen serves subscriptions/listen: the response is an SSE stream that
// starts with notifications/subscriptions/acknowledged and then carries
// notifications/tools/list_changed, each with the listen request's id in
// _meta, until the client closes it (cancellation) or the gateway shuts
// down (then the result ends it). Only tool-list changes are offered;
// anything else asked for is left out of the acknowledgement.
func (s *Server) listen(w http.ResponseWriter, r *http.Request, m *rpcMessage) {
	var p struct {
		Notifications *struct {
			ToolsListChanged     bool `json:"toolsListChanged"`
			PromptsListChanged   bool `json:"promptsListChanged"`
			ResourcesListChanged bool `json:"resourcesListChanged"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil || p.Notifications == nil {
		writeStatelessError(w, m.ID, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `params must be an object with "notifications" (for example {"toolsListChanged": true})`})
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		writeStatelessError(w, m.ID, &switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "streaming unsupported"})
		return
	}
	if s.listens.count() >= s.opts.MaxSessions {
		writeRPCError(w, http.StatusServiceUnavailable, m.ID, switchboard.CodeInvalidRequest,
			"too many open subscriptions/listen streams (MCP_SERVER_MAX_SESSIONS); close unused ones or try later")
		return
	}
	var want uint32
	var agreedKeys []string
	if p.Notifications.ToolsListChanged {
		want |= listenTools
		agreedKeys = append(agreedKeys, `"toolsListChanged":true`)
	}
	if _, ok := s.gw.(Features); ok {
		if p.Notifications.PromptsListChanged {
			want |= listenPrompts
			agreedKeys = append(agreedKeys, `"promptsListChanged":true`)
		}
		if p.Notifications.ResourcesListChanged {
			want |= listenResources
			agreedKeys = append(agreedKeys, `"resourcesListChanged":true`)
		}
	}
	ch := s.listens.add(want, callerOf(r.Context(), ""))
	defer s.listens.remove(ch)
	subMeta := `{"` + metaSubscriptionID + `":` + string(m.ID) + `}`
	agreed := `{` + strings.Join(agreedKeys, ",") + `}`
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(msg string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
		return writeEvent(w, []byte(msg))
	}
	end := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","_meta":` + subMeta + `}}`
	if !send(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":` + agreed + `,"_meta":` + subMeta + `}}`) {
		return
	}
	if want == 0 {
		send(end)
		return
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	changed := func(method string) string {
		return `{"jsonrpc":"2.0","method":"` + method + `","params":{"_meta":` + subMeta + `}}`
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			send(end)
			return
		case <-ch.ch:
			kinds := ch.pending.Swap(0)
			for _, k := range []struct {
				bit    uint32
				method string
			}{{listenTools, "notifications/tools/list_changed"}, {listenPrompts, "notifications/prompts/list_changed"}, {listenResources, "notifications/resources/list_changed"}} {
				if kinds&k.bit != 0 && !send(changed(k.method)) {
					return
				}
			}
		case <-hb.C:
			_ = rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			fl.Flush()
		}
	}
}

// statelessStreamGone answers GET and DELETE from a 2026-07-28 client:
// neither is part of that revision's transport.
func statelessStreamGone(w http.ResponseWriter, r *http.Request) bool {
	if !isStatelessVersion(r.Header.Get("Mcp-Protocol-Version")) || r.Header.Get("Mcp-Session-Id") != "" {
		return false
	}
	w.Header().Set("Allow", http.MethodPost)
	writeRPCError(w, http.StatusMethodNotAllowed, nil, switchboard.CodeInvalidRequest,
		r.Method+" is not part of MCP "+protocol2026+": send requests with POST and open subscriptions/listen for notifications")
	return true
}

// mcpGoServes lists the requests of a session (2025 streamable or legacy
// SSE) that mcp-go answers; tools/list and tools/call are ours, and any
// other method gets -32601 from sessionMethodNotFound rather than from
// mcp-go's fallback (which would, for one, answer server/discover and
// advertise 2026-07-28 to a session that cannot speak it).
func mcpGoServes(method string) bool { return method == "initialize" || method == "ping" }

func sessionMethodNotFound(method string) *switchboard.RPCError {
	return &switchboard.RPCError{Code: switchboard.CodeMethodNotFound,
		Message: "method " + switchboard.Clip(method) + " is not served; this gateway serves initialize, ping, tools/*, prompts/*, resources/*, completion/complete and logging/setLevel in a session"}
}

// A sessionless caller is who sent a request without a session: the
// principal (Options.Principal, the token) and the client's identity (the
// name and version of the clientInfo a 2026-07-28 request carries in
// _meta), hashed into one opaque key (CallRequest.Caller). What it
// activates in the catalog is its own, as a session's is, and its
// subscriptions/listen streams hear of changes to it. Clients that send no
// clientInfo (a plain POST, curl) share their token's key.
const callerPrefix = "caller-"

type callerCtxKey struct{}

// withCaller returns r's context naming r's sessionless caller.
func (s *Server) withCaller(r *http.Request, m *rpcMessage) context.Context {
	principal := ""
	if s.opts.Principal != nil {
		principal = s.opts.Principal(r)
	}
	var p struct {
		Meta struct {
			Client struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"io.modelcontextprotocol/clientInfo"`
		} `json:"_meta"`
	}
	if bytes.Contains(m.Params, []byte(`clientInfo"`)) {
		_ = json.Unmarshal(m.Params, &p)
	}
	h := sha256.Sum256([]byte(principal + "\x00" + p.Meta.Client.Name + "\x00" + p.Meta.Client.Version))
	return context.WithValue(r.Context(), callerCtxKey{}, callerPrefix+hex.EncodeToString(h[:12]))
}

// callerOf is the sessionless caller of ctx; "" when session is set or
// the request named none.
func callerOf(ctx context.Context, session string) string {
	if session != "" {
		return ""
	}
	c, _ := ctx.Value(callerCtxKey{}).(string)
	return c
}

// isCaller reports whether key names a sessionless caller, not a session.
func isCaller(key string) bool { return strings.HasPrefix(key, callerPrefix) }
