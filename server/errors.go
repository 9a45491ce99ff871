package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard"
)

// rpcCodes maps domain errors to JSON-RPC codes: the one table the MCP
// edge uses. An upstream's own *switchboard.RPCError bypasses it and
// travels unchanged; anything not listed is an internal error.
var rpcCodes = []struct {
	kind error
	code int
}{
	{switchboard.ErrNotFound, switchboard.CodeMethodNotFound},
	{switchboard.ErrInvalid, switchboard.CodeInvalidParams},
	{switchboard.ErrResourceLimit, switchboard.CodeInvalidRequest},
	{switchboard.ErrUnavailable, switchboard.CodeInternalError},
	{switchboard.ErrTimeout, switchboard.CodeInternalError},
	{switchboard.ErrCanceled, switchboard.CodeInternalError},
	{switchboard.ErrConfig, switchboard.CodeInternalError},
}

// toRPCError turns any error into the JSON-RPC error a client sees. The
// message is client-safe (switchboard.Message); internal causes stay in
// the logs.
func toRPCError(err error) *switchboard.RPCError {
	var rpc *switchboard.RPCError
	if errors.As(err, &rpc) {
		return rpc
	}
	for _, c := range rpcCodes {
		if errors.Is(err, c.kind) {
			return &switchboard.RPCError{Code: c.code, Message: switchboard.Message(err)}
		}
	}
	return &switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "internal error"}
}

// response renders a complete JSON-RPC response. id is the request's id
// exactly as the client sent it.
func response(id json.RawMessage, result json.RawMessage) []byte {
	b := make([]byte, 0, len(result)+len(id)+41) // +1: finish appends the newline without a copy
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

func errorResponse(id json.RawMessage, e *switchboard.RPCError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(e)
	b := make([]byte, 0, len(body)+len(id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, body...)
	return append(b, '}')
}

// writeRPCError answers an HTTP request with a JSON-RPC error body.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(errorResponse(id, &switchboard.RPCError{Code: code, Message: msg}), '\n'))
}
