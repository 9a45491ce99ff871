package server

import (
	"cmp"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard"
)

// Features is what a Gateway implements to serve MCP beyond tools:
// prompts, resources, completion and logging. An edge whose Gateway does
// not implement it answers those methods -32601, as before.
type Features interface {
	// Feature forwards one request (see switchboard.FeatureRequest) and
	// returns the raw result; errors as from Gateway.Call.
	Feature(ctx context.Context, req switchboard.FeatureRequest) (json.RawMessage, error)
	// SetLogLevel sets the level the upstreams are asked to log at: the
	// most verbose any client of the edge asked for ("" when none asks).
	SetLogLevel(ctx context.Context, level string)
}

// featureMethods are the requests passed to Features.Feature.
var featureMethods = map[string]bool{
	"prompts/list": true, "prompts/get": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"completion/complete": true,
}

// sessionOnly are the methods that need a session: a subscription and a
// log level belong to one client's stream.
var sessionOnly = map[string]bool{"resources/subscribe": true, "resources/unsubscribe": true, "logging/setLevel": true}

// servesMethod reports whether the edge answers method itself (rather
// than mcp-go) in a session.
func (s *Server) servesMethod(method string) bool {
	switch method {
	case "tools/list", "tools/call", "notifications/cancelled":
		return true
	}
	if _, ok := s.gw.(Features); !ok {
		return false
	}
	return featureMethods[method] || method == "logging/setLevel"
}

// clientState is what the edge knows of one session's client.
type clientState struct {
	caps  clientCaps
	level atomic.Int32 // logging/setLevel rank + 1; 0: never asked
	onLog func(server string, params json.RawMessage)
}

// clientCaps are the capabilities a client declared in initialize that
// requests back to it need: elicitation by mode (form, url).
type clientCaps struct {
	sampling, elicitForm, elicitURL, roots bool
}

func parseClientCaps(params json.RawMessage) clientCaps {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	_ = json.Unmarshal(params, &p)
	has := func(k string) bool { v, ok := p.Capabilities[k]; return ok && string(v) != "null" }
	c := clientCaps{sampling: has("sampling"), roots: has("roots")}
	if has("elicitation") {
		var modes map[string]json.RawMessage
		_ = json.Unmarshal(p.Capabilities["elicitation"], &modes)
		mode := func(k string) bool { v, ok := modes[k]; return ok && string(v) != "null" }
		c.elicitForm, c.elicitURL = mode("form"), mode("url")
		// An elicitation object naming no mode declares form mode
		// (2025-11-25: "equivalent to declaring support for form mode
		// only"), as 2025-06-18's elicitation:{} did.
		c.elicitForm = c.elicitForm || !c.elicitURL
	}
	return c
}

// check says whether the client declared what a request of method with
// params needs: ErrNotFound when it did not declare the capability at
// all; for elicitation/create in a mode it did not declare, ErrInvalid:
// the -32602 (Invalid params) the specification has a client answer for
// "a mode not declared in client capabilities", so the server gets what
// the client itself would have said.
func (c clientCaps) check(method string, params json.RawMessage) error {
	ok := false
	switch method {
	case "sampling/createMessage":
		ok = c.sampling
	case "elicitation/create":
		if !c.elicitForm && !c.elicitURL {
			break
		}
		var p struct {
			Mode string `json:"mode"`
		}
		_ = json.Unmarshal(params, &p)
		switch mode := cmp.Or(p.Mode, "form"); { // no mode: form (the specification's default)
		case mode == "form" && c.elicitForm, mode == "url" && c.elicitURL:
			return nil
		default:
			return switchboard.Errorf(switchboard.ErrInvalid, "the client did not declare elicitation mode %q in its capabilities", switchboard.Clip(mode))
		}
	case "roots/list":
		ok = c.roots
	}
	if !ok {
		return switchboard.Errorf(switchboard.ErrNotFound, "the client did not declare the capability %s needs", method)
	}
	return nil
}

func (s *Server) client(session string) *clientState {
	if v, ok := s.clients.Load(session); ok {
		return v.(*clientState)
	}
	return nil
}

// sessionStarted records a client's initialize params.
func (s *Server) sessionStarted(session string, params json.RawMessage) {
	s.clients.Store(session, s.newClientState(session, parseClientCaps(params)))
}

// sessionEnded forgets a session's client state, its log level and its
// subscriptions (unsubscribing upstream those nobody else holds).
func (s *Server) sessionEnded(session string) {
	c := s.client(session)
	s.clients.Delete(session)
	relevel := c != nil && c.level.Load() != 0
	s.subMu.Lock()
	var drop []string
	for uri, set := range s.subs {
		if set[session] {
			delete(set, session)
			if len(set) == 0 {
				delete(s.subs, uri)
				drop = append(drop, uri)
			}
		}
	}
	s.subMu.Unlock()
	f, ok := s.gw.(Features)
	if !ok || (len(drop) == 0 && !relevel) {
		return
	}
	// Upstream requests do not belong on the goroutine that ended the
	// session (Options.OnSessionEnd must not block): they go in the
	// background, bounded.
	s.goMu.Lock()
	defer s.goMu.Unlock()
	if s.closing {
		return
	}
	s.wg.Go(func() {
		if relevel {
			s.applyLogLevel()
		}
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		s.subCall.Lock()
		defer s.subCall.Unlock()
		for _, uri := range drop {
			s.subMu.Lock()
			again := len(s.subs[uri]) > 0 // another session subscribed meanwhile
			s.subMu.Unlock()
			if !again {
				_, _ = f.Feature(ctx, switchboard.FeatureRequest{Project: s.opts.Project, Method: "resources/unsubscribe", Params: mustJSON(map[string]string{"uri": uri})})
			}
		}
	})
}

// feature answers one feature request of session ("" for none).
func (s *Server) feature(ctx context.Context, session string, m *rpcMessage, peer switchboard.ClientPeer) (json.RawMessage, *switchboard.RPCError) {
	f, ok := s.gw.(Features)
	if !ok || (!featureMethods[m.Method] && m.Method != "logging/setLevel") {
		return nil, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound, Message: "method not found: " + m.Method}
	}
	if sessionOnly[m.Method] && session == "" {
		return nil, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound,
			Message: "method " + m.Method + " needs a session (it is about what one client's stream receives): send initialize first"}
	}
	params := m.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	start := time.Now()
	switch m.Method {
	case "logging/setLevel":
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(params, &p) != nil || rankOf(p.Level) < 0 {
			return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `params must be an object with "level": one of debug, info, notice, warning, error, critical, alert, emergency`}
		}
		c := s.client(session)
		if c == nil {
			c = s.newClientState(session, clientCaps{})
			s.clients.Store(session, c)
		}
		c.level.Store(int32(rankOf(p.Level) + 1))
		s.applyLogLevel()
		return json.RawMessage(`{}`), nil
	case "resources/subscribe", "resources/unsubscribe":
		return s.subscribe(ctx, f, session, m.Method, params)
	}
	server := ""
	res, err := f.Feature(ctx, switchboard.FeatureRequest{Project: s.opts.Project, Session: session, Method: m.Method, Params: params, Client: peer,
		OnLog: s.logSink(ctx, session), Routed: func(name string) { server = name }})
	s.observeFeature(ctx, session, server, m.Method, params, err, start)
	if err != nil {
		rpc := switchboard.ToRPCError(err)
		s.reqLog(ctx).Info("request failed", "method", m.Method, "code", rpc.Code, "err", err, "duration", time.Since(start))
		return nil, rpc
	}
	return res, nil
}

// FeatureObserver is an Observer that also records prompt gets and
// resource reads.
type FeatureObserver interface {
	ObserveFeature(rec switchboard.ToolCallRecord, kind string)
}

// observeFeature reports a prompts/get or resources/read to the Observer
// when it records them (FeatureObserver): the prompt's name or the URI
// stands where a tool call's name does.
func (s *Server) observeFeature(ctx context.Context, session, server, method string, params json.RawMessage, err error, start time.Time) {
	fo, ok := s.opts.Observer.(FeatureObserver)
	if !ok || (method != "prompts/get" && method != "resources/read") {
		return
	}
	var p struct {
		Name string          `json:"name"`
		URI  string          `json:"uri"`
		Args json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &p)
	kind, name := "prompt", p.Name
	if method == "resources/read" {
		kind, name = "resource", p.URI
	}
	rec := switchboard.ToolCallRecord{ProjectID: s.opts.Project, Session: session, Server: server, Tool: name, Arguments: p.Args,
		Outcome: switchboard.OutcomeOK, Duration: time.Since(start), StartedAt: start}
	who := personOf(ctx)
	rec.Principal, rec.PrincipalName = who.principal, who.name
	if err != nil {
		rec.Outcome, rec.Code = switchboard.OutcomeError, switchboard.RPCCode(err)
	}
	fo.ObserveFeature(rec, kind)
}

// subscribe keeps the edge's table of who holds which URI: the upstream
// is subscribed once, for the first client, and unsubscribed when the
// last one leaves (or its session ends); notifications/resources/updated
// reaches the subscribed sessions only.
func (s *Server) subscribe(ctx context.Context, f Features, session, method string, params json.RawMessage) (json.RawMessage, *switchboard.RPCError) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `params must be an object with "uri" (string)`}
	}
	// subCall orders the upstream (un)subscriptions; subMu guards the
	// table only, never across an upstream request: the upstream's reader
	// delivers resources/updated through ResourceUpdated, which takes
	// subMu, and must not wait for an answer it has yet to read.
	s.subCall.Lock()
	defer s.subCall.Unlock()
	upstream := func() *switchboard.RPCError {
		if _, err := f.Feature(ctx, switchboard.FeatureRequest{Project: s.opts.Project, Session: session, Method: method, Params: params, OnLog: s.logSink(ctx, session)}); err != nil {
			return switchboard.ToRPCError(err)
		}
		return nil
	}
	s.subMu.Lock()
	set := s.subs[p.URI]
	if method == "resources/subscribe" {
		first := len(set) == 0
		if first {
			set = map[string]bool{}
			s.subs[p.URI] = set
		}
		set[session] = true
		s.subMu.Unlock()
		if first {
			if rpc := upstream(); rpc != nil {
				s.subMu.Lock()
				delete(s.subs[p.URI], session)
				if len(s.subs[p.URI]) == 0 {
					delete(s.subs, p.URI)
				}
				s.subMu.Unlock()
				return nil, rpc
			}
		}
		return json.RawMessage(`{}`), nil
	}
	held := set[session]
	delete(set, session)
	last := held && len(set) == 0
	if last {
		delete(s.subs, p.URI)
	}
	s.subMu.Unlock()
	if last {
		if rpc := upstream(); rpc != nil {
			return nil, rpc
		}
	}
	return json.RawMessage(`{}`), nil
}

// ResourceUpdated delivers an upstream's notifications/resources/updated
// to the sessions subscribed to its URI, and to no other.
func (s *Server) ResourceUpdated(server string, params json.RawMessage) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	s.subMu.Lock()
	var to []string
	for session := range s.subs[p.URI] {
		to = append(to, session)
	}
	s.subMu.Unlock()
	for _, session := range to {
		s.notifySession(session, "notifications/resources/updated", params)
	}
}

// LogMessage delivers an upstream's notifications/message that belongs to
// no client's request to every session that asked for messages of its
// level (logging/setLevel). One that came while serving a request goes
// to that request's client only (switchboard.FeatureRequest.OnLog, set
// to logSink).
func (s *Server) LogMessage(server string, params json.RawMessage) {
	rank, tagged := taggedLog(server, params)
	if tagged == nil {
		return
	}
	s.clients.Range(func(k, v any) bool {
		if v.(*clientState).wants(rank) {
			s.notifySession(k.(string), "notifications/message", tagged)
		}
		return true
	})
}

// logSink is what receives the log messages of session's requests: the
// session's own, filtered by its level when they arrive; nil for none.
// A message that came while serving the request under ctx goes on that
// request's own stream when it has one (a POST answered as SSE), as the
// server would have sent it to a client reached directly: a client need
// not keep the session's GET stream open to see it. Otherwise it goes on
// the session's stream.
func (s *Server) logSink(ctx context.Context, session string) func(server string, params json.RawMessage) {
	c := s.client(session)
	if c == nil {
		return nil
	}
	out, _ := ctx.Value(streamKey{}).(*postWriter)
	if out == nil {
		return c.onLog // no allocation on the hot path
	}
	return func(server string, params json.RawMessage) {
		rank, tagged := taggedLog(server, params)
		if tagged == nil || !c.wants(rank) {
			return
		}
		if !out.notify(notification("notifications/message", tagged)) {
			s.notifySession(session, "notifications/message", tagged)
		}
	}
}

// newClientState makes session's state, with its log sink.
func (s *Server) newClientState(session string, caps clientCaps) *clientState {
	c := &clientState{caps: caps}
	c.onLog = func(server string, params json.RawMessage) {
		if rank, tagged := taggedLog(server, params); tagged != nil && c.wants(rank) {
			s.notifySession(session, "notifications/message", tagged)
		}
	}
	return c
}

// wants reports whether the client asked for messages of level rank.
func (c *clientState) wants(rank int) bool {
	want := c.level.Load()
	return want != 0 && int32(rank) >= want-1
}

// taggedLog returns a notifications/message's level and its params with
// the server's name in front of its logger ("server" alone when it named
// none), so a client can tell where it came from; nil when the params are
// not an object.
func taggedLog(server string, params json.RawMessage) (int, json.RawMessage) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return 0, nil
	}
	var level, logger string
	_ = json.Unmarshal(p["level"], &level)
	_ = json.Unmarshal(p["logger"], &logger)
	if logger == "" {
		logger = server
	} else {
		logger = server + "/" + logger
	}
	p["logger"] = mustJSON(logger)
	return rankOf(level), mustJSON(p)
}

// applyLogLevel tells the upstreams the most verbose level any session
// asked for.
func (s *Server) applyLogLevel() {
	f, ok := s.gw.(Features)
	if !ok {
		return
	}
	best := int32(0)
	s.clients.Range(func(_, v any) bool {
		if l := v.(*clientState).level.Load(); l != 0 && (best == 0 || l < best) {
			best = l
		}
		return true
	})
	level := ""
	if best != 0 {
		level = logLevels[best-1]
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	f.SetLogLevel(ctx, level)
}

var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func rankOf(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// notifySession sends one notification to one session, on its stream.
func (s *Server) notifySession(session, method string, params json.RawMessage) {
	if ls := s.legacy.get(session); ls != nil {
		select {
		case ls.out <- notification(method, params):
		default:
		}
		return
	}
	var fields map[string]any
	var raw map[string]json.RawMessage
	if json.Unmarshal(params, &raw) == nil {
		fields = make(map[string]any, len(raw))
		for k, v := range raw {
			fields[k] = v
		}
	}
	_ = s.mcp.SendNotificationToSpecificClient(session, method, fields)
}

// PromptsChanged tells every client that the prompt list changed.
func (s *Server) PromptsChanged() {
	s.broadcast(string(mcp.MethodNotificationPromptsListChanged), listenPrompts)
}

// ResourcesChanged tells every client that the resource (or template)
// list changed.
func (s *Server) ResourcesChanged() {
	s.broadcast(string(mcp.MethodNotificationResourcesListChanged), listenResources)
}

func (s *Server) broadcast(method string, kind uint32) {
	s.mcp.SendNotificationToAllClients(method, nil)
	s.legacy.broadcast([]byte(`{"jsonrpc":"2.0","method":"` + method + `"}`))
	s.listens.notify(kind)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// outbound are requests the edge sent to clients on an upstream's behalf,
// waiting for the client's response: session + "\x00" + id -> chan.
type outbound struct {
	seq     atomic.Int64
	pending sync.Map
}

type clientAnswer struct {
	result json.RawMessage
	err    *switchboard.RPCError
}

// resolve hands a client's response to the request waiting for it; it
// reports false when no request of that session has that id.
func (o *outbound) resolve(session string, m *rpcMessage) bool {
	if len(m.ID) == 0 || !strings.HasPrefix(string(m.ID), `"req-`) {
		return false
	}
	v, ok := o.pending.LoadAndDelete(session + "\x00" + string(m.ID))
	if !ok {
		return false
	}
	a := clientAnswer{result: m.Result}
	if len(m.Error) > 0 {
		var e switchboard.RPCError
		if json.Unmarshal(m.Error, &e) != nil {
			e = switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "the client answered with a malformed error"}
		}
		a.err = &e
	}
	v.(chan clientAnswer) <- a
	return true
}

// peer is one client request being served, as the upstream side sees it
// (switchboard.ClientPeer): requests go down send, on the transport the
// client's request came on, and only if the client declared what they
// need.
type peer struct {
	s       *Server
	session string
	caps    clientCaps
	send    func(msg []byte) bool
}

// offersRequests reports whether session's client declared any of
// sampling, elicitation and roots, before a peer (and the func it sends
// with) is made for it.
func (s *Server) offersRequests(session string) bool {
	c := s.client(session)
	return c != nil && c.caps != (clientCaps{})
}

func (s *Server) newPeer(session string, send func([]byte) bool) switchboard.ClientPeer {
	if session == "" || send == nil {
		return nil
	}
	c := s.client(session)
	if c == nil || c.caps == (clientCaps{}) {
		return nil // nothing to pass it: no allocation on the hot path
	}
	return &peer{s: s, session: session, caps: c.caps, send: send}
}

func (p *peer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := p.caps.check(method, params); err != nil {
		return nil, err
	}
	id := `"req-` + strconv.FormatInt(p.s.out.seq.Add(1), 10) + `"`
	key := p.session + "\x00" + id
	ch := make(chan clientAnswer, 1)
	p.s.out.pending.Store(key, ch)
	defer p.s.out.pending.Delete(key)
	msg := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":` + strconv.Quote(method))
	if len(params) > 0 {
		msg = append(append(msg, `,"params":`...), params...)
	}
	msg = append(msg, '}')
	if !p.send(msg) {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "the client's stream is gone")
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return nil, a.err
		}
		if len(a.result) == 0 {
			return json.RawMessage(`{}`), nil
		}
		return a.result, nil
	case <-ctx.Done():
		return nil, switchboard.Errorf(switchboard.ErrTimeout, "the client did not answer %s in time", method)
	}
}
