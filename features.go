package switchboard

import (
	"context"
	"encoding/json"
)

// FeatureRequest is one client request of MCP beyond tools that the edge
// passes to the upstream side: prompts/list, prompts/get, resources/list,
// resources/templates/list, resources/read, resources/subscribe,
// resources/unsubscribe and completion/complete.
type FeatureRequest struct {
	// Project and Session are as in CallRequest.
	Project, Session string
	// Method is the JSON-RPC method; Params the client's raw params (nil
	// when absent).
	Method string
	Params json.RawMessage
	// Client, when set, is the client that sent the request: requests the
	// upstream makes while serving it (sampling, elicitation, roots) go
	// to it and to no one else.
	Client ClientPeer
	// OnLog, when set, receives the notifications/message (params raw)
	// that server sends while serving this request, for the client that
	// sent it; nil drops them: the client did not ask for log messages.
	// It must not block.
	OnLog func(server string, params json.RawMessage)
	// Routed, when set, is told which server the request goes to (for
	// the call log), before it is sent.
	Routed func(server string)
}

// ClientPeer is the client whose request is being served, as far as an
// upstream may reach it: requests back to that client (sampling/
// createMessage, elicitation/create, roots/list), on the transport the
// client uses.
type ClientPeer interface {
	// Request sends method to the client and returns its raw result, a
	// *RPCError with the client's own error, or an error wrapping
	// ErrNotFound (the client did not declare the capability the method
	// needs), ErrUnavailable (its stream is gone), ErrTimeout or
	// ErrCanceled (ctx ended first). It is bounded by ctx.
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
}

// FeatureStatus counts what a server offers besides tools and lists what
// of it another server, configured earlier, shadows (first wins: prompts
// by name, resources by URI).
type FeatureStatus struct {
	Prompts           int      `json:"prompts"`
	Resources         int      `json:"resources"`
	ResourceTemplates int      `json:"resource_templates"`
	ShadowedPrompts   []string `json:"shadowed_prompts,omitempty"`
	ShadowedResources []string `json:"shadowed_resources,omitempty"`
}

// CodeResourceNotFound is MCP's JSON-RPC code for resources/read of a URI
// no server offers.
const CodeResourceNotFound = -32002
