package switchboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors shared by every layer. Edges map them to HTTP statuses and
// JSON-RPC codes in one table each; anything else is an internal error.
var (
	ErrNotFound      = errors.New("not found")        // unknown tool, server or session
	ErrConflict      = errors.New("conflict")         // a write clashes with what is stored (duplicate name)
	ErrInvalid       = errors.New("invalid input")    // malformed arguments or configuration
	ErrUnavailable   = errors.New("unavailable")      // upstream down or circuit open
	ErrTimeout       = errors.New("timed out")        // call exceeded its deadline
	ErrResourceLimit = errors.New("resource limit")   // body too large, too many sessions
	ErrConfig        = errors.New("misconfigured")    // server cannot start as configured
	ErrInternal      = errors.New("internal error")   // a bug or an unexpected failure
	ErrCanceled      = errors.New("request canceled") // the client cancelled the call
	ErrUnauthorized  = errors.New("unauthorized")     // no valid token
	ErrForbidden     = errors.New("forbidden")        // a valid token without the right to do this
)

// JSON-RPC 2.0 and MCP error codes used on the wire.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// RPCError is a JSON-RPC error object. An upstream's own error travels to
// the client as an *RPCError with its code, message and data unchanged.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Error is a domain error with a message that is safe to show a client: it
// names what went wrong and what to fix but never carries secrets or host
// paths. Kind is one of the sentinels above, so errors.Is works on it.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap makes errors.Is(err, ErrUnavailable) and friends work.
func (e *Error) Unwrap() error { return e.Kind }

// Errorf builds an *Error of the given kind with a client-safe message.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Message returns the client-safe text of err: the *Error or *RPCError
// message when there is one, otherwise the generic text of its kind.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Msg
	}
	var r *RPCError
	if errors.As(err, &r) {
		return r.Message
	}
	for _, k := range []error{ErrNotFound, ErrConflict, ErrInvalid, ErrUnavailable, ErrTimeout, ErrResourceLimit, ErrConfig, ErrCanceled, ErrUnauthorized, ErrForbidden} {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	return ErrInternal.Error()
}

// Clip shortens a client-supplied name (a tool name, say) before it goes
// into a message or a log line, so a huge name is not echoed back whole.
func Clip(s string) string {
	const max = 128
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "…"
}

// KindOf is the sentinel err was made with (Errorf's kind), so it can be
// rewrapped with a message of the caller's; ErrInternal for any other
// error.
func KindOf(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind != nil {
		return e.Kind
	}
	return ErrInternal
}
