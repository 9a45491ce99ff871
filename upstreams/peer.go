// Requests an upstream makes of the client (sampling/createMessage,
// elicitation/create, roots/list): each goes to the client whose request
// the upstream is serving, and to no one else.
//
// Which client that is: over streamable HTTP the upstream sends the
// request on the response stream of the call it serves, so the call's
// context comes with it. Over a pipe (stdio, hosted) and legacy SSE the
// wire says nothing about it: the request goes to the one client request
// in flight on that connection, and is refused when there are several
// (or none), since guessing could hand one client's question to another.
// A hosted server takes one request at a time, so it is never ambiguous.

package upstreams

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/switchboard-mcp/switchboard"
)

// clientCapabilities are what the gateway declares to upstreams in
// initialize: it passes sampling, elicitation and roots requests on to
// the client that caused them (refusing them for a client that did not
// declare the capability itself).
var clientCapabilities = json.RawMessage(`{"sampling":{},"elicitation":{"form":{},"url":{}},"roots":{}}`)

// origin is the client a request comes from, as far as the server's
// requests and log messages on its behalf need it.
type origin struct {
	peer    switchboard.ClientPeer // nil: the client offers nothing
	session string                 // "" for a sessionless request
	onLog   func(server string, params json.RawMessage)
}

// caller is one client request in flight on an upstream.
type caller struct {
	origin
	ctx context.Context
}

type callerKey struct{}

// track records a client request in flight on u until the returned func
// is called; the returned ctx carries it for transports that tell which
// call a server request belongs to.
func (u *upstream) track(ctx context.Context, from origin) (context.Context, func()) {
	c := &caller{origin: from, ctx: ctx}
	u.mu.Lock()
	if u.callers == nil {
		u.callers = map[*caller]struct{}{}
	}
	u.callers[c] = struct{}{}
	u.mu.Unlock()
	if u.spec.Transport == switchboard.TransportStreamableHTTP {
		// Only this transport hands the call's context to a request.
		ctx = context.WithValue(ctx, callerKey{}, c)
	}
	return ctx, func() {
		u.mu.Lock()
		delete(u.callers, c)
		u.mu.Unlock()
	}
}

// errNoClient is the JSON-RPC error an upstream gets for a request the
// gateway cannot pass to a client.
func errNoClient(method, why string) *switchboard.RPCError {
	return &switchboard.RPCError{Code: switchboard.CodeMethodNotFound, Message: method + " is not available: " + why}
}

// serverRequest passes a server's request to the client it belongs to
// and returns the client's answer. ctx, when it carries a caller, names
// the call (streamable HTTP); otherwise the sole client request in
// flight is the one.
func (u *upstream) serverRequest(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	switch method {
	case "sampling/createMessage", "elicitation/create", "roots/list":
	default:
		return nil, errNoClient(method, "switchboard does not offer it")
	}
	c, _ := ctx.Value(callerKey{}).(*caller)
	if c == nil && u.spec.Transport == switchboard.TransportStreamableHTTP {
		// It came on the session's own stream, not on a call's: no
		// client request caused it.
		return nil, errNoClient(method, "it was not sent on the response stream of a client's request")
	}
	if c == nil {
		u.mu.Lock()
		n := len(u.callers)
		for k := range u.callers {
			c = k
		}
		u.mu.Unlock()
		switch {
		case n == 0:
			return nil, errNoClient(method, "no client request of this server is in flight")
		case n > 1:
			return nil, errNoClient(method, "several client requests of this server are in flight and this transport does not say which one asks")
		}
	}
	if c.peer == nil {
		return nil, errNoClient(method, "the client has no way to receive it")
	}
	// Bounded by the call it belongs to (its call timeout).
	res, err := c.peer.Request(c.ctx, method, params)
	if err != nil {
		var rpc *switchboard.RPCError
		if errors.As(err, &rpc) {
			return nil, rpc
		}
		if errors.Is(err, switchboard.ErrNotFound) {
			return nil, errNoClient(method, "the client did not declare the capability")
		}
		// The one table: ErrInvalid (say, an elicitation mode the
		// client did not declare) is -32602, as the client would answer.
		return nil, switchboard.ToRPCError(err)
	}
	return res, nil
}

// logMessage passes a server's notifications/message to the client whose
// request it came with. No transport says which request that is (mcp-go
// hands a streamable response's notifications over without its call),
// so, as for requests back: the client with requests in flight on this
// server, when there is one (several requests of one session count as
// one client). With none in flight the message belongs to no request and
// goes to every client that asked for messages (Events.Log); with
// requests of several clients in flight it is dropped, rather than shown
// to a client it may not belong to.
func (u *upstream) logMessage(params json.RawMessage) {
	u.mu.Lock()
	var to *caller
	several := false
	for c := range u.callers {
		switch {
		case to == nil:
			to = c
		case c.session == "" || c.session != to.session:
			several = true
		}
	}
	u.mu.Unlock()
	switch {
	case to == nil:
		u.m.mu.Lock()
		fn := u.m.events.Log
		u.m.mu.Unlock()
		if fn != nil {
			fn(u.spec.Name, params)
		}
	case several:
		u.log.Debug("upstream log message dropped: requests of several clients are in flight", "params", string(params))
	case to.onLog != nil:
		to.onLog(u.spec.Name, params)
	}
}

// answerServerRequest runs serverRequest in the upstream's own goroutine
// and hands reply the response message (without a newline).
func (u *upstream) answerServerRequest(ctx context.Context, id json.RawMessage, method string, params json.RawMessage, reply func([]byte)) {
	u.mu.Lock()
	closed := u.closed
	if !closed {
		u.wg.Go(func() {
			res, err := u.serverRequest(ctx, method, params)
			reply(responseMessage(id, res, err))
		})
	}
	u.mu.Unlock()
	if closed {
		reply(responseMessage(id, nil, errNoClient(method, "the server is being removed")))
	}
}

func responseMessage(id json.RawMessage, res json.RawMessage, err error) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), id...)
	if err != nil {
		rpc := switchboard.ToRPCError(err)
		b = append(b, `,"error":`...)
		b = append(b, mustJSON(rpcErrorWire{Code: rpc.Code, Message: rpc.Message, Data: rpc.Data})...)
		return append(b, '}')
	}
	b = append(b, `,"result":`...)
	b = append(b, res...)
	return append(b, '}')
}
