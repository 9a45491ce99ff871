package switchboard

import "time"

// WorkspaceInfo describes one sandbox workspace or snapshot, as the admin
// API (/api/v1/projects/{p}/workspaces) and the sandbox report it.
type WorkspaceInfo struct {
	WorkspaceID    string    `json:"workspace_id"`
	Status         string    `json:"status"`
	Volume         string    `json:"volume"`
	AgentSessionID string    `json:"agent_session_id"`
	SessionID      string    `json:"session_id,omitempty"` // the live sandbox session on it
	SnapshotOf     string    `json:"snapshot_of,omitempty"`
	LastUsedAt     time.Time `json:"last_used_at"`
	CreatedAt      time.Time `json:"created_at"`
	// Anonymous: made by an execution without session_id and never
	// attached, detached or snapshotted; ExpiresAt is when the retention
	// rule deletes it (set once its session has ended).
	Anonymous     bool          `json:"anonymous,omitempty"`
	ExpiresAt     *time.Time    `json:"expires_at,omitempty"`
	AttachHistory []AttachEvent `json:"attach_history,omitempty"`
}

// AttachEvent is one attach of a workspace: who held it before (the
// agent session attached, or that used it last; "" none) and who took it.
type AttachEvent struct {
	Previous string    `json:"previous_agent_session_id"`
	Holder   string    `json:"agent_session_id"`
	At       time.Time `json:"at"`
}

// SandboxSession describes one sandbox session, as get_sessions lists it
// and as attaching a workspace through the admin API answers.
type SandboxSession struct {
	SessionID      string    `json:"session_id"`
	Project        string    `json:"-"`
	Template       string    `json:"template"`
	Flavor         string    `json:"flavor"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	LastUsedAt     time.Time `json:"last_used_at"`
	AgentSessionID string    `json:"agent_session_id"`
	WorkspaceID    string    `json:"workspace_id"`
	Volume         string    `json:"volume"`
	// Runtime is what the session's container runs under ("runc",
	// "runsc").
	Runtime string `json:"runtime,omitempty"`
}
