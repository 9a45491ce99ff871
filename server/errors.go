package server

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/switchboard-mcp/switchboard"
)

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

// notification renders a JSON-RPC notification with params (a JSON
// object).
func notification(method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(params)+len(method)+40)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, params...)
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
