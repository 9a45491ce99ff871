package apiclient

import (
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// The admin API's wire types: server/api encodes exactly these, and the
// client decodes them. Field names are snake_case, as everywhere on the
// admin API; hosted servers and workspaces use the root package's types
// (switchboard.HostedStatus, switchboard.WorkspaceInfo), which are the
// same on the wire.

// Project is one project (GET /api/v1/projects/{id}).
type Project struct {
	ID          string    `json:"id"`
	Description string    `json:"description"`
	MCPURL      string    `json:"mcp_url"` // the project's MCP endpoint path, such as /projects/p1/mcp
	CreatedAt   time.Time `json:"created_at,omitzero"`
	UpdatedAt   time.Time `json:"updated_at,omitzero"`
	// Closed marks, in dev mode, a project its first token closed: listed
	// so it does not vanish, but the rest of it (its times too) needs
	// that token.
	Closed bool `json:"closed,omitempty"`
}

// NewProject is the body of POST /api/v1/projects.
type NewProject struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
}

// ProjectChange is the body of PATCH /api/v1/projects/{p}: a field left
// out (nil) keeps its value.
type ProjectChange struct {
	Description *string `json:"description,omitempty"`
}

// SecretValue is the body of PUT .../secrets/{name}; nil is refused.
type SecretValue struct {
	Value *string `json:"value"`
}

// NewToken is the body of POST .../tokens.
type NewToken struct {
	Name string `json:"name"`
}

// WorkspaceAttach is the body of POST .../workspaces/{id}/attach.
type WorkspaceAttach struct {
	AgentSessionID string `json:"agent_session_id"`
}

// HostedCall is the body of POST .../mcp/servers/{id}/call: one JSON-RPC
// request to a hosted server.
type HostedCall struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Server is one server of a project (GET .../servers).
type Server struct {
	ID          string                    `json:"id"`
	ProjectID   string                    `json:"project_id"`
	ProductID   string                    `json:"product_id,omitempty"`
	Name        string                    `json:"name"`
	Description string                    `json:"description"`
	Transport   switchboard.Transport     `json:"transport"`
	Config      json.RawMessage           `json:"config"`
	Enabled     bool                      `json:"enabled"`
	CreatedAt   time.Time                 `json:"created_at"`
	UpdatedAt   time.Time                 `json:"updated_at"`
	Status      *switchboard.ServerStatus `json:"status,omitempty"`
	// Source says where the server comes from: "api" (a stored row this
	// API manages), "file" (the servers file), "built-in" (the demo or the
	// gateway's own tools) or "hosted" (a container the hosted API
	// manages). Only "api" rows can be changed here (ReadOnly otherwise).
	Source   string `json:"source"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// ServerChange is the body of POST .../servers (Name and Config
// required) and of PATCH .../servers/{name} (every field optional).
type ServerChange struct {
	Name        *string         `json:"name,omitempty"`
	Description *string         `json:"description,omitempty"`
	Enabled     *bool           `json:"enabled,omitempty"`
	Config      json.RawMessage `json:"config,omitempty"`
}

// Tool is one tool a project's endpoint offers (GET .../tools): the name
// clients call, the server that owns it and the server's tool object as
// it sent it.
type Tool struct {
	Name   string          `json:"name"`
	Server string          `json:"server"`
	Tool   json.RawMessage `json:"tool"`
}

// Secret is a secret's name and times; values are never returned.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Token is a project token. Token (the secret itself) is set only in
// the answer to its creation.
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Token     string     `json:"token,omitempty"`
}

// Call is one logged tool call (GET .../tool-calls).
type Call struct {
	ID      int64  `json:"id"`
	Session string `json:"session"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	// Kind is "prompt" for a prompts/get (Tool is the prompt's name) and
	// "resource" for a resources/read (Tool is the URI); absent for a
	// tool call.
	Kind       string          `json:"kind,omitempty"`
	Arguments  json.RawMessage `json:"arguments"`
	Outcome    string          `json:"outcome"` // ok, tool_error or error
	Code       int             `json:"code,omitempty"`
	DurationMS float64         `json:"duration_ms"`
	StartedAt  time.Time       `json:"started_at"`
	// Principal is the person behind the call when an identity
	// provider's token sent it; absent for static tokens.
	Principal *Principal `json:"principal,omitempty"`
}

// Principal names a person: the issuer and subject of their token, and
// their e-mail or name when it had one. Never the token.
type Principal struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	Name    string `json:"name,omitempty"`
}

// CallPage is one page of the call log, newest first; Next continues it.
type CallPage struct {
	Calls []Call `json:"calls"`
	Next  string `json:"next"`
}

// Reloaded answers POST /api/v1/reload.
type Reloaded struct {
	Reloaded bool `json:"reloaded"`
	Servers  int  `json:"servers"`
}

// SandboxSwitch is whether the sandbox tools are served on a project's
// endpoint (GET and PUT .../sandbox).
type SandboxSwitch struct {
	Enabled bool `json:"enabled"`
}

// HostedLogs answers GET .../mcp/servers/{id}/logs.
type HostedLogs struct {
	Logs string `json:"logs"`
}

// ErrorBody is every error answer of the API.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// The list envelopes: each list answer is an object holding the list.
type (
	Projects struct {
		Projects []Project `json:"projects"`
	}
	Servers struct {
		Servers []Server `json:"servers"`
	}
	Tools struct {
		Tools []Tool `json:"tools"`
	}
	Secrets struct {
		Secrets []Secret `json:"secrets"`
	}
	Tokens struct {
		Tokens []Token `json:"tokens"`
	}
	Statuses struct {
		Servers []switchboard.ServerStatus `json:"servers"`
		// Pulls are the image pulls under way that the project waits
		// for, and the sandbox's.
		Pulls []switchboard.PullProgress `json:"pulls"`
	}
	HostedList struct {
		Servers []switchboard.HostedStatus `json:"servers"`
	}
	Workspaces struct {
		Workspaces []switchboard.WorkspaceInfo `json:"workspaces"`
	}
)
