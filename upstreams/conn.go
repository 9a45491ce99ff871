// Package upstreams holds Switchboard's clients to external MCP servers
// (stdio child processes, legacy HTTP+SSE and streamable HTTP) and the
// Manager that connects them lazily, guards them with circuit breakers,
// keeps their tool lists in memory and routes calls to them.
//
// Everything upstream travels as raw JSON: tool objects, results and
// JSON-RPC errors are forwarded byte for byte, never decoded into typed
// structs that would drop fields or round big numbers.
package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// conn is one live connection to an upstream MCP server speaking JSON-RPC.
type conn interface {
	// call sends a request and waits for its response. A JSON-RPC error
	// from the server comes back as *switchboard.RPCError; any other error
	// means the message could not be exchanged.
	call(ctx context.Context, method string, params any) (json.RawMessage, error)
	// notify sends a notification.
	notify(ctx context.Context, method string, params any) error
	// done is closed when the connection is lost for good.
	done() <-chan struct{}
	// close tears the connection down (stopping a child process).
	close() error
}

// errConnLost reports that the connection died; the upstream is rebuilt on
// next use.
var errConnLost = errors.New("connection lost")

// errSessionLost reports that a streamable HTTP server no longer knows our
// session (HTTP 404): the request never ran upstream, so it may be sent
// again once the connection is re-initialized. It wraps errConnLost.
var errSessionLost = fmt.Errorf("%w: the server no longer knows the session", errConnLost)

// message is any JSON-RPC 2.0 message, decoded only as far as routing
// needs; params, results and error data stay raw.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcErrorWire   `json:"error,omitempty"`
}

type rpcErrorWire struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}
