package switchboard

import "errors"

// ErrArgNotFound is the ErrNotFound of something a call's arguments name
// (a sandbox session or workspace id). errors.Is(err, ErrNotFound) holds,
// so it is a 404 over HTTP like any other; over JSON-RPC it is invalid
// params (-32602), because method not found (-32601) would say the tool
// itself is unknown.
var ErrArgNotFound error = &subKind{msg: ErrNotFound.Error(), parent: ErrNotFound}

// subKind is a sentinel that is also its parent kind for errors.Is.
type subKind struct {
	msg    string
	parent error
}

func (k *subKind) Error() string { return k.msg }
func (k *subKind) Unwrap() error { return k.parent }

// rpcCodes is the one table from domain errors to JSON-RPC codes, used by
// every path that answers JSON-RPC (the MCP edge, the sandbox and catalog
// tools). The first match wins; a kind not listed (ErrUnavailable,
// ErrTimeout, ErrCanceled, ErrConfig, ErrInternal, ...) and any other
// error is an internal error.
var rpcCodes = []struct {
	kind error
	code int
}{
	{ErrArgNotFound, CodeInvalidParams}, // before ErrNotFound, which it also is
	{ErrNotFound, CodeMethodNotFound},   // an unknown tool
	{ErrInvalid, CodeInvalidParams},
	{ErrResourceLimit, CodeInvalidRequest},
	{ErrConflict, CodeInvalidRequest}, // a workspace another session holds
}

// RPCCode returns the JSON-RPC code of err: an *RPCError's own code (an
// upstream's error travels unchanged), else the table's, else
// CodeInternalError.
func RPCCode(err error) int {
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return rpc.Code
	}
	for _, c := range rpcCodes {
		if errors.Is(err, c.kind) {
			return c.code
		}
	}
	return CodeInternalError
}

// ToRPCError turns any error into the JSON-RPC error a client sees: an
// *RPCError in err's chain unchanged, otherwise the table's code with the
// client-safe message (Message); internal causes stay in the logs.
func ToRPCError(err error) *RPCError {
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return rpc
	}
	return &RPCError{Code: RPCCode(err), Message: Message(err)}
}
