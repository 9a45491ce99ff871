package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard"
)

// Requests back to a 2026-07-28 client use the revision's multi-round-trip
// requests (SEP-2322): there is no stream to send a request on, so the
// client's request is answered with resultType "input_required", the
// requests (inputRequests) and an opaque requestState, and the client
// sends its request again with inputResponses and that requestState. The
// upstream call keeps running on the gateway meanwhile (bounded by its
// call timeout), waiting for the answer; the retry picks it up.

// rounds are the 2026-07-28 calls waiting for a client's retry, by
// requestState.
type rounds struct {
	mu    sync.Mutex
	calls map[string]*roundCall
}

// roundCall is one 2026-07-28 request served over several HTTP requests.
type roundCall struct {
	owner  string // the principal it belongs to
	method string
	asks   chan *ask // the upstream's requests, taken by the round that waits
	done   chan struct{}
	res    json.RawMessage
	rpc    *switchboard.RPCError
	cancel context.CancelFunc
	// out is the current round's answer, where progress goes.
	out atomic.Pointer[postWriter]

	mu      sync.Mutex
	waiting map[string]*ask // sent to the client, not answered yet
}

type ask struct {
	key    string
	method string
	params json.RawMessage
	reply  chan clientAnswer
}

func (r *rounds) put(token string, c *roundCall) {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string]*roundCall{}
	}
	r.calls[token] = c
	r.mu.Unlock()
}

// take removes and returns the call of token when owner holds it.
func (r *rounds) take(token, owner string) *roundCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[token]
	if c == nil || c.owner != owner {
		return nil
	}
	delete(r.calls, token)
	return c
}

// drop forgets every token of c (the call ended).
func (r *rounds) drop(c *roundCall) {
	r.mu.Lock()
	for k, v := range r.calls {
		if v == c {
			delete(r.calls, k)
		}
	}
	r.mu.Unlock()
}

// metaClientCaps reads the client capabilities a 2026-07-28 request
// carries in its _meta.
func metaClientCaps(params json.RawMessage) clientCaps {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return clientCaps{}
	}
	return parseClientCaps(mustJSON(map[string]json.RawMessage{"capabilities": p.Meta[metaReserved+"clientCapabilities"]}))
}

// roundPeer passes an upstream's requests to a 2026-07-28 client as input
// requests of the call's next round.
type roundPeer struct {
	s    *Server
	call *roundCall
	caps clientCaps
}

func (p *roundPeer) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if err := p.caps.check(method, params); err != nil {
		return nil, err
	}
	a := &ask{key: "input-" + strconv.FormatInt(p.s.out.seq.Add(1), 10), method: method, params: params, reply: make(chan clientAnswer, 1)}
	select {
	case p.call.asks <- a:
	case <-ctx.Done():
		return nil, switchboard.Errorf(switchboard.ErrTimeout, "the client did not come back for %s in time", method)
	}
	select {
	case ans := <-a.reply:
		if ans.err != nil {
			return nil, ans.err
		}
		return ans.result, nil
	case <-ctx.Done():
		return nil, switchboard.Errorf(switchboard.ErrTimeout, "the client did not answer %s in time", method)
	}
}

// requestState returns the requestState and inputResponses of a retried
// 2026-07-28 request ("" when it is a first request).
func requestState(params json.RawMessage) (string, map[string]json.RawMessage) {
	if !strings.Contains(string(params), `"requestState"`) {
		return "", nil
	}
	var p struct {
		RequestState   string                     `json:"requestState"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(params, &p)
	return p.RequestState, p.InputResponses
}

// statelessCall serves a 2026-07-28 request that may need the client's
// input: tools/call, prompts/get, resources/read, completion/complete.
func (s *Server) statelessCall(w http.ResponseWriter, r *http.Request, m *rpcMessage, ctx context.Context) {
	out := &postWriter{w: w, sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	owner := ""
	if s.opts.Principal != nil {
		owner = s.opts.Principal(r)
	}
	if token, responses := requestState(m.Params); token != "" {
		call := s.rounds.take(token, owner)
		if call == nil || call.method != m.Method {
			writeStatelessError(w, m.ID, &switchboard.RPCError{Code: switchboard.CodeInvalidParams,
				Message: "unknown or expired requestState: send the request again without it"})
			return
		}
		call.mu.Lock()
		for key, raw := range responses {
			if a := call.waiting[key]; a != nil {
				delete(call.waiting, key)
				a.reply <- clientAnswer{result: raw}
			}
		}
		call.mu.Unlock()
		s.round(w, r, out, m, call, owner)
		return
	}
	caps := metaClientCaps(m.Params)
	if caps == (clientCaps{}) {
		res, rpc := s.dispatchResult(ctx, "", m, out.progress)
		s.finishCall(w, out, m, res, rpc)
		return
	}
	s.goMu.Lock()
	if s.closing {
		s.goMu.Unlock()
		writeStatelessError(w, m.ID, &switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "shutting down"})
		return
	}
	s.calls.Add(1)
	s.goMu.Unlock()
	// The call outlives this HTTP request when it needs the client's
	// input: it runs on its own context, cancelled when a round's
	// request is dropped (the revision's cancellation) or the call ends.
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(s.ctx, cancel) // Shutdown ends it too
	call := &roundCall{owner: owner, method: m.Method, asks: make(chan *ask), done: make(chan struct{}), cancel: cancel, waiting: map[string]*ask{}}
	call.out.Store(out)
	cctx = withPeer(cctx, &roundPeer{s: s, call: call, caps: caps})
	go func() {
		defer s.calls.Done()
		defer stop()
		defer cancel()
		defer s.rounds.drop(call)
		call.res, call.rpc = s.dispatchResult(cctx, "", m, func(p json.RawMessage) {
			if o := call.out.Load(); o != nil {
				o.progress(p)
			}
		})
		close(call.done)
	}()
	s.round(w, r, out, m, call, owner)
}

// round answers one HTTP request of a call: with the result when the call
// ends, or with input_required when the upstream asks the client
// something first.
func (s *Server) round(w http.ResponseWriter, r *http.Request, out *postWriter, m *rpcMessage, call *roundCall, owner string) {
	call.out.Store(out)
	defer call.out.CompareAndSwap(out, nil)
	// Whatever ends this round, nothing is written to its response once
	// the handler returns (a progress notification of the call racing a
	// client that closed the request wrote after it, seen by -race).
	defer out.close()
	select {
	case <-call.done:
		s.finishCall(w, out, m, call.res, call.rpc)
	case a := <-call.asks:
		call.mu.Lock()
		call.waiting[a.key] = a
		asks := []*ask{a}
		// Requests asked together go out together.
		for more := true; more; {
			select {
			case b := <-call.asks:
				call.waiting[b.key] = b
				asks = append(asks, b)
			default:
				more = false
			}
		}
		call.mu.Unlock()
		var b [16]byte
		_, _ = rand.Read(b[:])
		token := hex.EncodeToString(b[:])
		s.rounds.put(token, call)
		res := []byte(`{"inputRequests":{`)
		for i, a := range asks {
			if i > 0 {
				res = append(res, ',')
			}
			res = append(res, mustJSON(a.key)...)
			res = append(res, `:{"method":`...)
			res = append(res, mustJSON(a.method)...)
			params := a.params
			if len(params) == 0 || string(params) == "null" {
				params = json.RawMessage(`{}`) // clients decode params whatever the method
			}
			res = append(res, `,"params":`...)
			res = append(res, params...)
			res = append(res, '}')
		}
		res = append(res, `},"requestState":`...)
		res = append(res, mustJSON(token)...)
		res = append(res, `,"resultType":"input_required"}`...)
		out.finish(response(m.ID, res))
	case <-r.Context().Done():
		// The client closed the request: the revision's cancellation.
		call.cancel()
	}
}

// finishCall writes a 2026-07-28 call's final answer.
func (s *Server) finishCall(w http.ResponseWriter, out *postWriter, m *rpcMessage, res json.RawMessage, rpc *switchboard.RPCError) {
	if rpc == nil {
		res = resultFor2026(m.Method, res)
	}
	if rpc != nil && rpc.Code == switchboard.CodeMethodNotFound {
		// The method is served: an unknown tool, prompt or reference
		// keeps the code this gateway's table gives it, but not the 404
		// the revision attaches to -32601, which clients read as "this
		// endpoint or session is gone" (mcp-go re-initializes and never
		// shows the error). An unserved method is still 404.
		out.finish(errorResponse(m.ID, rpc))
		return
	}
	s.finishStateless(w, out, m.ID, res, rpc)
}
