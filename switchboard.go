// Package switchboard holds the domain of the Switchboard MCP gateway: the
// tools it routes, the servers it fronts, the errors every layer speaks and
// the JSON-RPC error type that travels unchanged from an upstream to a client.
//
// It imports only the standard library; adapters (upstreams, server, config)
// depend on it, never the other way round.
package switchboard

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Transport names how Switchboard talks to an upstream MCP server.
type Transport string

// The upstream transports Switchboard speaks.
const (
	TransportStdio          Transport = "stdio"
	TransportSSE            Transport = "sse"
	TransportStreamableHTTP Transport = "streamable-http"
	// TransportHosted is a server whose stdio is a container's, opened by
	// hosted/ and handed to upstreams through upstreams.Options.Streams.
	TransportHosted Transport = "hosted"
	// TransportBuiltin is a server that lives inside the gateway (the
	// sandbox tools): there is no connection, only an in-process value.
	TransportBuiltin Transport = "builtin"
)

// HopHeader names the header a gateway adds to every request it sends an
// upstream, holding its own hop id; a gateway that receives its own id
// back refuses the request at once (an upstream that points at the
// gateway itself) instead of waiting on itself until a timeout.
const HopHeader = "X-Switchboard-Hop"

// ReplicaTokenHeader carries the token replicas sharing a store present to
// each other's internal endpoint (/internal/v1/); a request without it, or
// with another value, is refused with 401. Never logged.
const ReplicaTokenHeader = "X-Switchboard-Replica-Token"

// DeadlineHeader carries, on a call handed to another replica, the
// milliseconds left of the call's own deadline; the replica that serves
// it bounds its work by them. A remote upstream whose spec lists this
// header gets it set on every request from the request's context.
const DeadlineHeader = "X-Switchboard-Deadline-Ms"

// DeadlineLeft renders ctx's time left for DeadlineHeader (at least 1
// ms: the time left travels, the clocks of two hosts need not agree); ok
// false when ctx has no deadline.
func DeadlineLeft(ctx context.Context) (ms string, ok bool) {
	d, ok := ctx.Deadline()
	if !ok {
		return "", false
	}
	return strconv.FormatInt(max(time.Until(d).Milliseconds(), 1), 10), true
}

// CallRequest is one tools/call as the edge received it, carried unchanged
// from the edge down to whoever serves the tool (an upstream or a builtin).
type CallRequest struct {
	// Project is the project whose endpoint took the call; Session is the
	// client's MCP session id (the Mcp-Session-Id of a streamable session,
	// the sessionId of a legacy SSE one), "" when there is none. The edge
	// sets both explicitly; nothing downstream guesses them.
	Project, Session string
	// Caller names a request without a session: the token that sent it
	// and the client's identity (its clientInfo), as an opaque key the
	// edge derives; "" with a session. What a sessionless caller
	// activates in the catalog belongs to it.
	Caller string
	// Person is the signed-in person behind the call ("issuer subject"
	// of an identity provider's token), "" for a caller without one (a
	// static project token, the admin token, dev mode). The edge sets it
	// once; the handles a builtin mints for a person (sandbox session
	// ids) are bound to it.
	Person string
	// Tool is the name the client called (any toolPrefix included). A
	// builtin receives its own name for the tool.
	Tool string
	// Arguments are the client's raw arguments bytes (nil when absent).
	Arguments json.RawMessage
	// Meta is the client's raw params._meta (nil when absent).
	Meta json.RawMessage
	// OnProgress, when set, receives the params of each progress
	// notification for this call, carrying the client's own progressToken
	// (from Meta); the edge sends them to the client.
	OnProgress func(params json.RawMessage)
	// Client, when set, is the calling client (see FeatureRequest.Client).
	Client ClientPeer
	// OnLog: see FeatureRequest.OnLog.
	OnLog func(server string, params json.RawMessage)
}

// ProgressToken is the client's progressToken (from Meta) when it asked
// for progress notifications and the edge can send them; nil otherwise.
func (r CallRequest) ProgressToken() json.RawMessage {
	if r.OnProgress == nil || len(r.Meta) == 0 {
		return nil
	}
	var meta struct {
		Token json.RawMessage `json:"progressToken"`
	}
	if json.Unmarshal(r.Meta, &meta) != nil || len(meta.Token) == 0 || string(meta.Token) == "null" {
		return nil
	}
	return meta.Token
}

// ServerSpec is one configured upstream MCP server, after `${VAR}`
// interpolation. Two specs with equal Fingerprint() describe the same
// running connection, which is how a reload keeps unchanged servers.
type ServerSpec struct {
	Name      string            `json:"name"`
	Transport Transport         `json:"transport"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Dir       string            `json:"cwd,omitempty"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	// ToolPrefix, when set, is prepended to every tool name of this server
	// (for example "gh_" turns "search" into "gh_search").
	ToolPrefix string `json:"toolPrefix,omitempty"`
	// CallTimeout overrides the gateway-wide call timeout when positive.
	CallTimeout time.Duration `json:"callTimeout,omitempty"`
	// Err is set when the spec could not be built (for example a missing
	// `${VAR}`); such a server is listed in status but never started.
	Err error `json:"-"`
}

// Fingerprint identifies everything about a spec that requires a new
// connection when it changes.
func (s ServerSpec) Fingerprint() string {
	errText := ""
	if s.Err != nil {
		errText = s.Err.Error()
	}
	b, _ := json.Marshal(struct {
		ServerSpec
		E string
	}{s, errText})
	return string(b)
}

// Tool is one tool as a client sees it: the name clients call (Name, which
// includes any ToolPrefix), the upstream server that owns it and the
// upstream's own name for it, and the upstream's tool object byte for byte
// (Raw), which is what tools/list returns when no prefix applies.
type Tool struct {
	Name         string
	Server       string
	UpstreamName string
	Raw          json.RawMessage
}

// ServerState is the lifecycle state of an upstream connection.
type ServerState string

// Upstream states reported in status.
const (
	StateIdle        ServerState = "idle"        // configured, not yet needed
	StateConnecting  ServerState = "connecting"  // first connection under way
	StateReady       ServerState = "ready"       // connected, tools listed
	StateFailed      ServerState = "failed"      // last attempt failed; retried on next use
	StateUnavailable ServerState = "unavailable" // circuit breaker open; calls fail at once
	StateInvalid     ServerState = "invalid"     // configuration error; never started
)

// ServerStatus is what status endpoints report about one upstream.
type ServerStatus struct {
	Name      string      `json:"name"`
	Transport Transport   `json:"transport"`
	State     ServerState `json:"state"`
	Tools     int         `json:"tools"`
	LastError string      `json:"last_error,omitempty"`
	// Shadowed lists tool names this server offers that another server,
	// configured earlier, already owns (collision policy: first wins).
	Shadowed []string `json:"shadowed,omitempty"`
	// Stderr is the tail of a stdio child's standard error.
	Stderr string `json:"stderr,omitempty"`
	// Protocol is the MCP revision the gateway speaks to this server on
	// its current (or last) connection: "2026-07-28" (stateless) or the
	// 2025 revision initialize settled on; empty before the first
	// connection and for built-in servers.
	Protocol string `json:"protocol,omitempty"`
	// Features counts its prompts and resources (nil when it has none).
	Features *FeatureStatus `json:"features,omitempty"`
	// SeenAt is set when State and LastError are not this process's own
	// but what the gateway last saw of a server it has not connected yet
	// (before it restarted, or on another replica), and says when; the
	// next use connects it again.
	SeenAt *time.Time `json:"seen_at,omitempty"`
}

// MarshalJSON writes the status in the admin API's snake_case, plus
// last_error's old camelCase name lastError, deprecated: written for one
// release (0.x) for the clients that read it, then dropped.
func (s ServerStatus) MarshalJSON() ([]byte, error) {
	type plain ServerStatus
	return json.Marshal(struct {
		plain
		OldLastError string `json:"lastError,omitempty"`
	}{plain(s), s.LastError})
}

// UnmarshalJSON reads last_error, or lastError from a gateway that wrote
// only the old name.
func (s *ServerStatus) UnmarshalJSON(b []byte) error {
	type plain ServerStatus
	var v struct {
		plain
		OldLastError string `json:"lastError"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = ServerStatus(v.plain)
	if s.LastError == "" {
		s.LastError = v.OldLastError
	}
	return nil
}

// Catalog is an immutable snapshot of the tools clients see, in the order
// tools/list returns them: servers in configured order, each server's tools
// in its own order. Version grows with every change so edges can cache
// what they render from it.
type Catalog struct {
	Version uint64
	Tools   []Tool
	index   map[string]int
}

// NewCatalog builds a catalog; names must already be unique.
func NewCatalog(version uint64, tools []Tool) *Catalog {
	idx := make(map[string]int, len(tools))
	for i, t := range tools {
		idx[t.Name] = i
	}
	return &Catalog{Version: version, Tools: tools, index: idx}
}

// Lookup finds a tool by the name clients call it.
func (c *Catalog) Lookup(name string) (Tool, bool) {
	if c == nil {
		return Tool{}, false
	}
	i, ok := c.index[name]
	if !ok {
		return Tool{}, false
	}
	return c.Tools[i], true
}

// StructuredResult renders v as the tools/call result of a tool the
// gateway serves itself: v's JSON as text content (for clients that read
// only content) and the same value as structuredContent, isError false.
func StructuredResult(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"content":           []map[string]any{{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
		"isError":           false,
	})
}

// ListedTools is how many of s's tools a client lists: its tools but
// those another server's same-named tool shadows. Every count of a
// project's tools (status, the console) is the sum of this, so it is
// what tools/list returns.
func ListedTools(s ServerStatus) int { return max(s.Tools-len(s.Shadowed), 0) }
