package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/jsonscan"
)

// maxIDLen bounds a request id: ids are echoed back and used as map keys.
const maxIDLen = 256

// maxExactID is the largest integer every JSON implementation (float64)
// holds exactly: 2^53-1.
const maxExactID = 1<<53 - 1

// rpcMessage is one client message, decoded only as far as routing needs.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (m *rpcMessage) isNotification() bool { return m != nil && len(m.ID) == 0 }

func (m *rpcMessage) idOrNil() json.RawMessage {
	if m == nil || !validID(m.ID) {
		return nil
	}
	return m.ID
}

// validID accepts what JSON-RPC allows as an id: a string or a number.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	switch id[0] {
	case '"':
		var s string
		return json.Unmarshal(id, &s) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		// Only integers a float64 holds exactly: mcp-go (ping,
		// initialize) decodes ids into float64 and would echo others
		// changed (123456789012345678901234567890 comes back as
		// 1.2345678901234568e+29, 1e400 as a parse error).
		n, err := strconv.ParseInt(string(id), 10, 64)
		return err == nil && n >= -maxExactID && n <= maxExactID
	}
	return false
}

// parseMessage decodes one JSON-RPC 2.0 message. The error carries the
// JSON-RPC code and a message that says what to fix; the returned message
// is non-nil whenever an id could be read, so the error can carry it.
func parseMessage(body []byte) (*rpcMessage, *switchboard.RPCError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, &switchboard.RPCError{Code: switchboard.CodeParseError, Message: "empty body; send one JSON-RPC 2.0 message"}
	}
	if !utf8.Valid(trimmed) {
		return nil, &switchboard.RPCError{Code: switchboard.CodeParseError, Message: "body is not valid UTF-8"}
	}
	if trimmed[0] == '[' {
		if !json.Valid(trimmed) {
			return nil, &switchboard.RPCError{Code: switchboard.CodeParseError, Message: "body is not valid JSON"}
		}
		return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: "batch requests are not supported (removed in MCP 2025-06-18); send one message per POST"}
	}
	if !json.Valid(trimmed) {
		return nil, &switchboard.RPCError{Code: switchboard.CodeParseError, Message: "body is not valid JSON"}
	}
	var m rpcMessage
	if err := decodeRPC(trimmed, &m); err != nil {
		return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: "body must be a JSON-RPC 2.0 object with jsonrpc, method and (for requests) id"}
	}
	if m.JSONRPC != "2.0" {
		return &m, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: `"jsonrpc" must be "2.0"`}
	}
	if len(m.ID) > 0 && string(m.ID) != "null" && !validID(m.ID) {
		return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: "id must be a string or a number of at most 256 characters"}
	}
	if string(m.ID) == "null" {
		m.ID = nil
		if m.Method != "" {
			// MCP: a request id MUST NOT be null, and a notification has
			// no id member at all; taking it as a notification would run
			// nothing and answer nothing.
			return &m, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: `"id" must not be null: give a request a string or number id, and a notification none`}
		}
	}
	if m.Method == "" && m.Result == nil && m.Error == nil {
		return &m, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: `"method" is required`}
	}
	return &m, nil
}

// decodeRPC is json.Unmarshal(b, m) for valid JSON b, without reflection
// on the common path (jsonscan; anything it cannot tell goes to
// encoding/json). The raw members share b's bytes.
func decodeRPC(b []byte, m *rpcMessage) error {
	var e jsonscan.Envelope
	ok, err := jsonscan.DecodeEnvelope(b, &e, func(v []byte) error {
		m.Error = v
		return nil
	})
	if !ok {
		*m = rpcMessage{}
		return json.Unmarshal(b, m)
	}
	m.JSONRPC, m.Method, m.ID, m.Params, m.Result = e.JSONRPC, e.Method, e.ID, e.Params, e.Result
	return err
}

// callParams are the params of tools/call as the edge reads them.
type callParams struct {
	Name      *string         `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      json.RawMessage `json:"_meta"`
}

// decodeCallParams is json.Unmarshal(b, p) for params that are part of a
// request parseMessage validated (so valid JSON), as decodeRPC is.
func decodeCallParams(b []byte, p *callParams) error {
	var err error
	ok := jsonscan.Members(b, func(k, v []byte) {
		switch {
		case jsonscan.KeyIs(k, "name"):
			if jsonscan.IsNull(v) {
				p.Name = nil // a pointer, unlike a string, is reset by null
				return
			}
			var s string
			if e := jsonscan.SetString(&s, v); e != nil {
				err = cmp.Or(err, e)
				return
			}
			p.Name = &s
		case jsonscan.KeyIs(k, "arguments"):
			p.Arguments = v
		case jsonscan.KeyIs(k, "_meta"):
			p.Meta = v
		}
	})
	if !ok {
		*p = callParams{}
		return json.Unmarshal(b, p)
	}
	return err
}

// dispatch answers a 2025 client's request (of a session, sessionless or
// on the legacy SSE transport) and returns the complete response message,
// its result shaped for that revision (resultFor2025). progress receives
// progress notification params for this request (with the client's
// token).
//
// It returns nil for a call the client cancelled (notifications/cancelled):
// the MCP specification says the receiver should not answer a cancelled
// request, so each transport sends nothing for it (see postWriter.finish).
func (s *Server) dispatch(ctx context.Context, session string, m *rpcMessage, progress func(json.RawMessage)) []byte {
	res, rpc := s.dispatchResult(ctx, session, m, progress)
	if rpc == errNoResponse {
		return nil
	}
	if rpc != nil {
		return errorResponse(m.ID, rpc)
	}
	return response(m.ID, resultFor2025(m.Method, res))
}

// errClientCancelled is the cause of a call's context when the client
// cancelled it with notifications/cancelled.
var errClientCancelled = errors.New("cancelled by the client (notifications/cancelled)")

// errNoResponse is dispatchResult's answer to a call the client
// cancelled: none. Only a session's calls can be cancelled by id, so a
// sessionless or 2026-07-28 request never gets it.
var errNoResponse = &switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "cancelled by the client"}

// dispatchResult is dispatch's result or error before it is framed as a
// response, so a 2026-07-28 request can add its protocol members first.
func (s *Server) dispatchResult(ctx context.Context, session string, m *rpcMessage, progress func(json.RawMessage)) (json.RawMessage, *switchboard.RPCError) {
	switch m.Method {
	case "tools/list":
		var p struct {
			Cursor *string `json:"cursor"`
		}
		if len(m.Params) > 0 && string(m.Params) != "null" {
			if err := json.Unmarshal(m.Params, &p); err != nil {
				return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: "params must be an object"}
			}
		}
		from := 0
		if p.Cursor != nil && *p.Cursor != "" {
			n, ok := parseCursor(*p.Cursor)
			if !ok {
				return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: "invalid cursor: pass the nextCursor of the previous page as it came"}
			}
			from = n
		}
		c := s.gw.Tools(ctx)
		own := s.sessionCatalog(ctx, session)
		if from == 0 && len(c.Tools) <= s.opts.ListPageSize {
			if own != nil {
				return renderWithSession(c, own), nil
			}
			return s.renderTools(c), nil // the hot path: one cached page
		}
		return toolsPage(c, own, from, s.opts.ListPageSize), nil
	case "tools/call":
		var p callParams
		ctx, span := s.startCallSpan(ctx, session)
		defer func() { s.endCallSpan(span, p.Name) }()
		fail := func(rpc *switchboard.RPCError) (json.RawMessage, *switchboard.RPCError) {
			failCallSpan(span, rpc)
			return nil, rpc
		}
		if err := decodeCallParams(m.Params, &p); err != nil || p.Name == nil {
			return fail(&switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `params must be an object with "name" (string) and optional "arguments" (object)`})
		}
		args := bytes.TrimSpace(p.Arguments)
		if len(args) > 0 && string(args) != "null" && args[0] != '{' {
			return fail(&switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `"arguments" must be a JSON object`})
		}
		if string(args) == "null" {
			args = nil
		}
		meta := bytes.TrimSpace(p.Meta)
		if len(meta) > 0 && string(meta) != "null" && meta[0] != '{' {
			return fail(&switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `"_meta" must be a JSON object`})
		}
		if string(meta) == "null" {
			meta = nil
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		// Ids identify a session's calls for notifications/cancelled; a
		// sessionless call is cancelled only by dropping its request, so
		// its id needs no slot (two scripts may both use id 1).
		if session != "" {
			key := session + "\x00" + string(m.ID)
			if _, taken := s.inflight.LoadOrStore(key, cancel); taken {
				// A reused id would make the earlier call uncancellable.
				return fail(&switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: "request id already in use by a call in flight on this session"})
			}
			defer s.inflight.Delete(key)
		}
		start := time.Now()
		req := switchboard.CallRequest{Project: s.opts.Project, Session: session, Caller: callerOf(ctx, session),
			Person: personOf(ctx).principal, Tool: *p.Name, Arguments: args, Meta: meta, OnProgress: progress, Client: peerOf(ctx), OnLog: s.logSink(ctx, session)}
		var res json.RawMessage
		var err error
		if s.ownsTool(ctx, session, req.Tool) {
			res, err = s.opts.SessionTools.CallSessionTool(ctx, req)
		} else {
			res, err = s.gw.Call(ctx, req)
			if errors.Is(err, switchboard.ErrNotFound) {
				if cc, ok := s.opts.SessionTools.(CatalogCaller); ok && cc.ProvidesTool(req.Tool) {
					res, err = cc.CallCatalogTool(ctx, req)
				}
			}
		}
		if err != nil {
			rpc := switchboard.ToRPCError(err)
			s.reqLog(ctx).Info("tool call failed", "tool", switchboard.Clip(*p.Name), "code", rpc.Code, "err", err, "duration", time.Since(start))
			s.observe(ctx, session, *p.Name, args, switchboard.OutcomeError, rpc.Code, start)
			if errors.Is(context.Cause(ctx), errClientCancelled) {
				failCallSpan(span, rpc)
				return nil, errNoResponse
			}
			return fail(rpc)
		}
		outcome := switchboard.OutcomeOK
		if isToolError(res) {
			outcome = switchboard.OutcomeToolError
			toolErrorCallSpan(span)
		}
		s.observe(ctx, session, *p.Name, args, outcome, 0, start)
		if s.log.Enabled(ctx, slog.LevelDebug) { // no allocation when off
			s.reqLog(ctx).Debug("tool call", "tool", switchboard.Clip(*p.Name), "outcome", outcome, "duration", time.Since(start))
		}
		if errors.Is(context.Cause(ctx), errClientCancelled) {
			// The result came after the client gave up on it: it ignores
			// any answer, and the spec says to send none.
			return nil, errNoResponse
		}
		return res, nil
	}
	if session != "" && featureMethods[m.Method] {
		// As for tools/call: notifications/cancelled with this id
		// cancels it, and a cancelled request gets no answer.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		key := session + "\x00" + string(m.ID)
		if _, taken := s.inflight.LoadOrStore(key, cancel); taken {
			return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidRequest, Message: "request id already in use by a request in flight on this session"}
		}
		defer s.inflight.Delete(key)
		res, rpc := s.feature(ctx, session, m, peerOf(ctx))
		if errors.Is(context.Cause(ctx), errClientCancelled) {
			return nil, errNoResponse
		}
		return res, rpc
	}
	return s.feature(ctx, session, m, peerOf(ctx))
}

type peerKey struct{}

// streamKey carries the response of the request served under ctx, when
// it may become an SSE stream (withStream).
type streamKey struct{}

// withStream makes out the stream of the request served under ctx: the
// messages an upstream sends about that request go on it.
func withStream(ctx context.Context, out *postWriter) context.Context {
	if !out.sse {
		return ctx
	}
	return context.WithValue(ctx, streamKey{}, out)
}

// withPeer makes p the client of the requests served under ctx.
func withPeer(ctx context.Context, p switchboard.ClientPeer) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func peerOf(ctx context.Context) switchboard.ClientPeer {
	p, _ := ctx.Value(peerKey{}).(switchboard.ClientPeer)
	return p
}

// observe reports a call to the Observer. The server label comes from
// the catalog, never from client input.
func (s *Server) observe(ctx context.Context, session, name string, args json.RawMessage, outcome string, code int, start time.Time) {
	if s.opts.Observer == nil {
		return
	}
	server := ""
	if t, ok := s.gw.Catalog().Lookup(name); ok {
		server = t.Server
	} else if t, ok := s.sessionCatalog(ctx, session).Lookup(name); ok {
		server = t.Server
	}
	who := personOf(ctx)
	s.opts.Observer.ObserveCall(switchboard.ToolCallRecord{
		ProjectID: s.opts.Project, Session: session, Server: server, Tool: name, Arguments: args,
		Outcome: outcome, Code: code, Duration: time.Since(start), StartedAt: start,
		Principal: who.principal, PrincipalName: who.name,
	})
}

// isToolError reports whether a tools/call result has isError true,
// decoding only when the bytes could say so.
func isToolError(res json.RawMessage) bool {
	if !bytes.Contains(res, []byte(`"isError"`)) {
		return false
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(res, &r) == nil && r.IsError
}

// cancelled handles notifications/cancelled for a call in flight.
func (s *Server) cancelled(session string, m *rpcMessage) {
	if m.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) != nil || !validID(p.RequestID) {
		return
	}
	if c, ok := s.inflight.Load(session + "\x00" + string(p.RequestID)); ok {
		c.(context.CancelCauseFunc)(errClientCancelled)
	}
}

// sessionCatalog returns the own tools (Options.SessionTools) of session,
// or of the sessionless caller of ctx when there is no session; nil when
// it has none.
func (s *Server) sessionCatalog(ctx context.Context, session string) *switchboard.Catalog {
	if s.opts.SessionTools == nil {
		return nil
	}
	if session == "" {
		if session = callerOf(ctx, ""); session == "" {
			return nil
		}
	}
	return s.opts.SessionTools.SessionCatalog(session)
}

// ownsTool reports whether a call of name on session goes to the
// session's own tools: they have it and the project does not. The
// project's servers connect lazily, so a name the session owns is checked
// against the project's tools after connecting those never tried (as a
// tools/list would): a project tool wins whether or not it was listed yet.
func (s *Server) ownsTool(ctx context.Context, session, name string) bool {
	own := s.sessionCatalog(ctx, session)
	if own == nil {
		return false
	}
	if _, ok := own.Lookup(name); !ok {
		return false
	}
	if _, taken := s.gw.Catalog().Lookup(name); taken {
		return false
	}
	_, taken := s.gw.Tools(ctx).Lookup(name)
	return !taken
}

// renderWithSession is the tools/list result of a session with tools of
// its own: the project's tools, then the session's that no project tool
// shadows. It is rendered per request (sessions with tools of their own
// are few, and their lists change with each mcp-add).
func renderWithSession(c, own *switchboard.Catalog) []byte {
	b := append(make([]byte, 0, 1024), `{"tools":[`...)
	n := 0
	for _, t := range c.Tools {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, t.Raw...)
		n++
	}
	for _, t := range own.Tools {
		if _, taken := c.Lookup(t.Name); taken {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, t.Raw...)
		n++
	}
	return append(b, "]}"...)
}

// toolsPage renders one page of tools/list for a catalog longer than a
// page: the project's tools from offset from, and on the last page the
// session's own that no project tool shadows; nextCursor when more
// follow.
func toolsPage(c, own *switchboard.Catalog, from, size int) []byte {
	all := make([]json.RawMessage, 0, len(c.Tools))
	for _, t := range c.Tools {
		all = append(all, t.Raw)
	}
	if own != nil {
		for _, t := range own.Tools {
			if _, taken := c.Lookup(t.Name); !taken {
				all = append(all, t.Raw)
			}
		}
	}
	from = min(from, len(all))
	to := min(from+size, len(all))
	b := append(make([]byte, 0, 1024), `{"tools":[`...)
	for i, raw := range all[from:to] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, raw...)
	}
	b = append(b, ']')
	if to < len(all) {
		b = append(b, `,"nextCursor":`...)
		b = append(b, mustJSON(formatCursor(to))...)
	}
	return append(b, '}')
}

// A list cursor is an offset, opaque to clients: base64url of "o:<n>"
// (the upstreams' prompts and resources lists use the same form).
func formatCursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("o:" + strconv.Itoa(n)))
}

func parseCursor(c string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !bytes.HasPrefix(b, []byte("o:")) {
		return 0, false
	}
	n, err := strconv.Atoi(string(b[2:]))
	return n, err == nil && n >= 0
}

// renderTools returns the tools/list result for c, rendered once per
// catalog version: the upstream tool objects byte for byte.
func (s *Server) renderTools(c *switchboard.Catalog) []byte {
	if r := s.rendered.Load(); r != nil && r.catalog == c {
		return r.result
	}
	n := 16
	for _, t := range c.Tools {
		n += len(t.Raw) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"tools":[`...)
	for i, t := range c.Tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, t.Raw...)
	}
	b = append(b, "]}"...)
	s.rendered.Store(&renderedList{catalog: c, result: b})
	return b
}
