package switchboard

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Store is everything Switchboard keeps across restarts. It has two real
// implementations, store/postgres (shared by replicas) and store/sqlite
// (embedded, zero setup), which pass one conformance suite
// (store/storetest); that is why this contract lives here and is wider
// than the interfaces consumers declare for themselves.
//
// Every method returns only the sentinels listed in its comment, wrapped
// in a *Error with a client-safe message, or, when the database itself
// fails, an error that wraps ErrUnavailable (connection lost, database
// locked too long), ErrTimeout or ErrCanceled (the context ended), or
// ErrInternal (anything else). Driver errors never travel past a store: their
// text is kept for the log, their types are not.
//
// Times are stored with microsecond precision and come back in UTC. JSON
// columns come back semantically equal, not byte-equal (PostgreSQL jsonb
// normalizes spacing and key order). Deleting a project deletes its servers,
// workspaces, secrets, tokens and tool-call records.
type Store interface {
	ProjectStore
	ServerStore
	WorkspaceStore
	ToolCallStore
	SecretStore
	TokenStore
	LeaseStore
	ServerStateStore
	// Close releases the store's connections; it is safe to call twice.
	Close() error
}

// Project is a tenant: its own servers, secrets, tokens and tool-call log.
type Project struct {
	// ID is the name used in URLs (/projects/{ID}/mcp) and metrics labels;
	// "default" serves /mcp. The admin API decides its shape; the store
	// only requires it to be non-empty.
	ID          string
	Description string
	// Sandbox is the project's switch of the gateway's sandbox tools: nil
	// follows MCP_SERVER_SANDBOX, true and false are what the admin API
	// set (SetProjectSandbox). CreateProject stores it; UpdateProject
	// keeps it.
	Sandbox   *bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Validate reports ErrInvalid when no store would accept p.
func (p Project) Validate() error {
	if p.ID == "" {
		return Errorf(ErrInvalid, "project ID is required")
	}
	return checkText("project", "ID", p.ID, "description", p.Description)
}

// ProjectStore keeps projects.
type ProjectStore interface {
	// CreateProject stores p and returns it with its timestamps set.
	// Errors: ErrInvalid (see Project.Validate), ErrConflict (ID taken).
	CreateProject(ctx context.Context, p Project) (Project, error)
	// GetProject returns one project. Errors: ErrNotFound.
	GetProject(ctx context.Context, id string) (Project, error)
	// ListProjects returns every project ordered by ID.
	ListProjects(ctx context.Context) ([]Project, error)
	// UpdateProject replaces the description of project p.ID.
	// Errors: ErrInvalid, ErrNotFound.
	UpdateProject(ctx context.Context, p Project) (Project, error)
	// SetProjectSandbox sets project id's switch of the sandbox tools
	// (nil: follow the gateway's default) and returns the project.
	// Errors: ErrNotFound.
	SetProjectSandbox(ctx context.Context, id string, on *bool) (Project, error)
	// DeleteProject deletes a project and everything that belongs to it,
	// tool-call records included. Errors: ErrNotFound.
	DeleteProject(ctx context.Context, id string) error
}

// ServerRecord is one upstream MCP server of a project, as stored
// (kb.project_mcp_servers). Config holds the transport's settings as JSON
// (command/args/env/cwd for stdio, url/headers for sse and streamable-http)
// with `${VAR}` references left unresolved: secrets never reach this row.
type ServerRecord struct {
	ID        string // assigned by the store
	ProjectID string
	// ProductID names the product manifest that created the row; empty for
	// servers added by hand. ImportManifest only touches its product's rows.
	ProductID   string
	Name        string // unique within the project
	Description string
	Transport   Transport
	Config      json.RawMessage // a JSON object; nil is stored as {}
	Enabled     bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Validate reports ErrInvalid when no store would accept r: a missing
// project or name, an unknown transport, or Config that is not a JSON
// object or holds a NUL character. Name rules stricter than "non-empty"
// belong to the caller.
func (r ServerRecord) Validate() error {
	switch {
	case r.ProjectID == "":
		return Errorf(ErrInvalid, "server %q: project is required", r.Name)
	case r.Name == "":
		return Errorf(ErrInvalid, "server name is required")
	}
	switch r.Transport {
	case TransportStdio, TransportSSE, TransportStreamableHTTP:
	default:
		return Errorf(ErrInvalid, "server %q: unknown transport %q; use %q, %q or %q", r.Name, r.Transport, TransportStdio, TransportSSE, TransportStreamableHTTP)
	}
	if !jsonObject(r.Config) {
		return Errorf(ErrInvalid, "server %q: config must be a JSON object without NUL characters", r.Name)
	}
	return checkText("server", "project", r.ProjectID, "product", r.ProductID, "name", r.Name, "description", r.Description)
}

// ServerStore keeps the servers of each project.
type ServerStore interface {
	// CreateServer stores r, assigning its ID and timestamps.
	// Errors: ErrInvalid (see ServerRecord.Validate), ErrNotFound (no such
	// project), ErrConflict (the project already has a server of that name).
	CreateServer(ctx context.Context, r ServerRecord) (ServerRecord, error)
	// GetServer returns a project's server by name. Errors: ErrNotFound.
	GetServer(ctx context.Context, projectID, name string) (ServerRecord, error)
	// ListServers returns a project's servers ordered by name.
	// Errors: ErrNotFound (no such project).
	ListServers(ctx context.Context, projectID string) ([]ServerRecord, error)
	// UpdateServer replaces name, description, transport, config and
	// enabled of the server r.ID in project r.ProjectID (ProductID and
	// CreatedAt are kept). Errors: ErrInvalid, ErrNotFound, ErrConflict
	// (renamed onto another server's name).
	UpdateServer(ctx context.Context, r ServerRecord) (ServerRecord, error)
	// DeleteServer deletes a project's server by name. Errors: ErrNotFound.
	DeleteServer(ctx context.Context, projectID, name string) error
	// ImportManifest makes the project's servers of product productID
	// exactly servers, in one transaction: missing ones are created,
	// existing ones (matched by name) updated in place, keeping their ID,
	// and the product's rows absent from servers deleted. Re-importing the
	// same manifest changes nothing, not even UpdatedAt. ProjectID and
	// ProductID of the records are ignored. It returns the product's rows
	// ordered by name.
	// Errors: ErrInvalid (empty productID, an invalid record, a name twice),
	// ErrNotFound (no such project), ErrConflict (a name is taken by a
	// server added by hand or by another product; nothing is changed).
	ImportManifest(ctx context.Context, projectID, productID string, servers []ServerRecord) ([]ServerRecord, error)
}

// ContainerType tells hosted MCP servers from agent workspaces in the
// workspace registry.
type ContainerType string

// The kinds of container the registry tracks.
const (
	ContainerMCPServer ContainerType = "mcp_server"
	ContainerWorkspace ContainerType = "workspace"
)

// Workspace is one row of the hosted-server and workspace registry
// (kb.agent_workspaces): a container Switchboard runs, or will run, for a
// project. Status, Provider and the IDs are the hosted layer's vocabulary;
// the store keeps them as given.
type Workspace struct {
	ID             string // assigned by the store
	ProjectID      string
	ContainerType  ContainerType
	Image          string
	Config         json.RawMessage // a JSON object; nil is stored as {}
	Status         string
	Provider       string    // e.g. "docker"
	ContainerID    string    // empty until a container exists
	AgentSessionID string    // empty unless bound to an agent session
	LastUsedAt     time.Time // zero: never used
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Validate reports ErrInvalid when no store would accept w.
func (w Workspace) Validate() error {
	if w.ProjectID == "" {
		return Errorf(ErrInvalid, "workspace: project is required")
	}
	switch w.ContainerType {
	case ContainerMCPServer, ContainerWorkspace:
	default:
		return Errorf(ErrInvalid, "workspace: unknown container type %q; use %q or %q", w.ContainerType, ContainerMCPServer, ContainerWorkspace)
	}
	if !jsonObject(w.Config) {
		return Errorf(ErrInvalid, "workspace: config must be a JSON object without NUL characters")
	}
	return checkText("workspace", "project", w.ProjectID, "image", w.Image, "status", w.Status, "provider", w.Provider,
		"container ID", w.ContainerID, "agent session ID", w.AgentSessionID)
}

// WorkspaceFilter selects workspaces; empty fields match everything.
type WorkspaceFilter struct {
	ProjectID      string
	ContainerType  ContainerType
	Status         string
	Provider       string
	AgentSessionID string
}

// WorkspaceStore keeps the hosted-server and workspace registry.
type WorkspaceStore interface {
	// CreateWorkspace stores w, assigning its ID and timestamps.
	// Errors: ErrInvalid, ErrNotFound (no such project).
	CreateWorkspace(ctx context.Context, w Workspace) (Workspace, error)
	// GetWorkspace returns one workspace. Errors: ErrNotFound.
	GetWorkspace(ctx context.Context, id string) (Workspace, error)
	// ListWorkspaces returns the matching workspaces, oldest first.
	ListWorkspaces(ctx context.Context, f WorkspaceFilter) ([]Workspace, error)
	// UpdateWorkspace replaces every field but CreatedAt of workspace w.ID
	// in project w.ProjectID. Errors: ErrInvalid, ErrNotFound.
	UpdateWorkspace(ctx context.Context, w Workspace) (Workspace, error)
	// DeleteWorkspace deletes one workspace. Errors: ErrNotFound.
	DeleteWorkspace(ctx context.Context, id string) error
}

// Outcomes of a tool call, as in the switchboard_tool_calls_total metric.
const (
	OutcomeOK        = "ok"         // a result without isError
	OutcomeToolError = "tool_error" // a result with isError: true
	OutcomeError     = "error"      // a JSON-RPC error; Code says which
)

// ToolCallRecord is one tool call on record (kb.agent_run_tool_calls).
type ToolCallRecord struct {
	ID        int64 // assigned by the store, grows with insertion
	ProjectID string
	Session   string // the client's MCP session
	Server    string // empty when no server owns the tool
	Tool      string
	// Arguments are the call's arguments with secrets already redacted by
	// the caller; nil is stored as {}.
	Arguments json.RawMessage
	Outcome   string // OutcomeOK, OutcomeToolError or OutcomeError
	Code      int    // the JSON-RPC error code when Outcome is OutcomeError
	Duration  time.Duration
	StartedAt time.Time
	// Kind is what was called: "" (KindTool) a tool, KindPrompt a
	// prompts/get (Tool holds the prompt's name), KindResource a
	// resources/read (Tool holds the URI).
	Kind string
	// RecordID is the writer's own unique name for the record, made
	// before the call is answered (the call log's are 32 hex digits).
	// A store keeps one record per RecordID, so a batch replayed after a
	// crash stores nothing twice. Empty: no such guarantee.
	RecordID string
	// Principal is the person behind the call when an identity
	// provider's token sent it: its issuer and subject, joined by a
	// space (an issuer URL has none). Empty for static tokens. The
	// token itself is never recorded.
	Principal string
	// PrincipalName is that person's e-mail or name, when the token had
	// one.
	PrincipalName string
}

// Kinds of a ToolCallRecord.
const (
	KindTool     = ""
	KindPrompt   = "prompt"
	KindResource = "resource"
)

// MaxRecordIDLen bounds ToolCallRecord.RecordID.
const MaxRecordIDLen = 64

// Validate reports ErrInvalid when no store would accept c.
func (c ToolCallRecord) Validate() error {
	switch {
	case c.ProjectID == "":
		return Errorf(ErrInvalid, "tool call: project is required")
	case c.StartedAt.IsZero():
		return Errorf(ErrInvalid, "tool call: start time is required")
	case c.Duration < 0:
		return Errorf(ErrInvalid, "tool call: negative duration")
	case len(c.RecordID) > MaxRecordIDLen:
		return Errorf(ErrInvalid, "tool call: record id longer than %d bytes", MaxRecordIDLen)
	case c.Arguments != nil && (!json.Valid(c.Arguments) || !utf8.Valid(c.Arguments)):
		return Errorf(ErrInvalid, "tool call: arguments are not valid UTF-8 JSON")
	}
	switch c.Outcome {
	case OutcomeOK, OutcomeToolError, OutcomeError:
	default:
		return Errorf(ErrInvalid, "tool call: unknown outcome %q", c.Outcome)
	}
	switch c.Kind {
	case KindTool, KindPrompt, KindResource:
	default:
		return Errorf(ErrInvalid, "tool call: unknown kind %q", c.Kind)
	}
	return checkText("tool call", "project", c.ProjectID, "session", c.Session, "server", c.Server, "tool", c.Tool, "record id", c.RecordID)
}

// Page sizes of ListToolCalls.
const (
	DefaultToolCallLimit = 50
	MaxToolCallLimit     = 1000
)

// ToolCallFilter selects tool-call records; empty fields match everything.
type ToolCallFilter struct {
	ProjectID string
	Server    string
	Tool      string
	Outcome   string
	Since     time.Time // inclusive; zero: no lower bound
	Until     time.Time // exclusive; zero: no upper bound
	// Limit is the page size: DefaultToolCallLimit when not positive, at
	// most MaxToolCallLimit.
	Limit int
	// Cursor continues a listing: the Next of the previous page, with the
	// same filter. Empty starts at the newest record.
	Cursor string
}

// ToolCallPage is one page of tool-call records, newest first (by
// StartedAt, then ID). Next is the cursor of the following page, empty on
// the last one. Records inserted after the first page was read show up
// on later pages only if they are older than the cursor: paging is
// stable, never repeating or skipping a record.
type ToolCallPage struct {
	Calls []ToolCallRecord
	Next  string
}

// ToolCallStore keeps the tool-call log.
type ToolCallStore interface {
	// InsertToolCalls stores a batch of records in one transaction: all or
	// none. A record whose RecordID is already stored (or repeated in the
	// batch) is skipped, so inserting a batch twice stores it once. The
	// project need not exist: the log never refuses a call because of a
	// concurrent project change. Errors: ErrInvalid (a record fails
	// ToolCallRecord.Validate; nothing is stored).
	InsertToolCalls(ctx context.Context, batch []ToolCallRecord) error
	// ListToolCalls returns one page of the matching records.
	// Errors: ErrInvalid (a malformed cursor).
	ListToolCalls(ctx context.Context, f ToolCallFilter) (ToolCallPage, error)
}

// Secret is one project secret. The store keeps Ciphertext only:
// encryption and decryption happen above it, so neither the database nor
// its backups ever hold a plaintext value.
type Secret struct {
	ProjectID  string
	Name       string // the VAR of `${VAR}`
	Ciphertext []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Validate reports ErrInvalid when no store would accept s.
func (s Secret) Validate() error {
	switch {
	case s.ProjectID == "":
		return Errorf(ErrInvalid, "secret %q: project is required", s.Name)
	case s.Name == "":
		return Errorf(ErrInvalid, "secret name is required")
	case len(s.Ciphertext) == 0:
		return Errorf(ErrInvalid, "secret %q: value is required", s.Name)
	}
	return checkText("secret", "project", s.ProjectID, "name", s.Name)
}

// SecretStore keeps project secrets.
type SecretStore interface {
	// PutSecret creates or overwrites a secret; overwriting keeps
	// CreatedAt. Errors: ErrInvalid (see Secret.Validate),
	// ErrNotFound (no such project).
	PutSecret(ctx context.Context, s Secret) (Secret, error)
	// GetSecret returns one secret. Errors: ErrNotFound.
	GetSecret(ctx context.Context, projectID, name string) (Secret, error)
	// ListSecrets returns a project's secrets ordered by name.
	// Errors: ErrNotFound (no such project).
	ListSecrets(ctx context.Context, projectID string) ([]Secret, error)
	// DeleteSecret deletes one secret. Errors: ErrNotFound.
	DeleteSecret(ctx context.Context, projectID, name string) error
}

// Token is a project's API token. Only a hash of the token is stored; the
// token itself is shown once, when it is created, and never again.
type Token struct {
	ID        string // assigned by the store
	ProjectID string
	Name      string // a label for people; not unique
	Hash      []byte // unique across all projects
	CreatedAt time.Time
	RevokedAt time.Time // zero while the token is valid
}

// Validate reports ErrInvalid when no store would accept t.
func (t Token) Validate() error {
	switch {
	case t.ProjectID == "":
		return Errorf(ErrInvalid, "token %q: project is required", t.Name)
	case len(t.Hash) == 0:
		return Errorf(ErrInvalid, "token %q: hash is required", t.Name)
	}
	return checkText("token", "project", t.ProjectID, "name", t.Name)
}

// TokenStore keeps API tokens.
type TokenStore interface {
	// CreateToken stores t, assigning its ID and CreatedAt.
	// Errors: ErrInvalid (see Token.Validate), ErrNotFound (no such project),
	// ErrConflict (the hash is already stored).
	CreateToken(ctx context.Context, t Token) (Token, error)
	// TokenByHash returns the unrevoked token with this hash.
	// Errors: ErrNotFound (unknown or revoked).
	TokenByHash(ctx context.Context, hash []byte) (Token, error)
	// ListTokens returns a project's tokens, revoked ones included, oldest
	// first. Errors: ErrNotFound (no such project).
	ListTokens(ctx context.Context, projectID string) ([]Token, error)
	// RevokeToken revokes a project's token; revoking it again keeps the
	// first RevokedAt. Errors: ErrNotFound (no such token in the project).
	RevokeToken(ctx context.Context, projectID, id string) (Token, error)
}

// checkText reports ErrInvalid for the first of the (name, value) pairs
// whose value no database stores as text: invalid UTF-8, or a NUL
// character, which PostgreSQL refuses. what names the record.
func checkText(what string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v := pairs[i+1]; !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return Errorf(ErrInvalid, "%s: %s must be UTF-8 text without NUL characters", what, pairs[i])
		}
	}
	return nil
}

// jsonObject reports whether b is nil or a UTF-8 JSON object without NUL
// characters (which PostgreSQL's jsonb cannot hold, and no environment
// variable, argument or header can carry).
func jsonObject(b json.RawMessage) bool {
	if b == nil {
		return true
	}
	var m map[string]any
	return utf8.Valid(b) && json.Unmarshal(b, &m) == nil && m != nil && !hasNUL(m)
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		return slices.ContainsFunc(v, hasNUL)
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// Lease is a named claim that one gateway process holds until ExpiresAt
// unless it renews it: how a process proves, to itself after a restart
// and to replicas sharing the store, that what it runs on the engine is
// still its own.
type Lease struct {
	Name      string // what is claimed: "gateway/<holder>" for a process itself
	Holder    string // the claiming process's owner id
	ExpiresAt time.Time
}

// LeaseStore keeps leases. Expiry is judged by the database's clock, so
// replicas on hosts whose clocks differ agree on it.
type LeaseStore interface {
	// AcquireLease gives name to holder for ttl from now when it is free,
	// expired or already holder's (a renewal), and returns the lease.
	// Errors: ErrInvalid (empty name or holder, ttl not positive),
	// ErrConflict (another holder's unexpired lease; the message names
	// the holder).
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error)
	// ReleaseLease ends holder's lease on name; a lease that is missing
	// or held by another is left as it is, without an error.
	ReleaseLease(ctx context.Context, name, holder string) error
	// ListLeases returns the unexpired leases whose name starts with
	// prefix, ordered by name.
	ListLeases(ctx context.Context, prefix string) ([]Lease, error)
}

// ValidLease reports ErrInvalid when no store would accept a lease on
// name by holder for ttl.
func ValidLease(name, holder string, ttl time.Duration) error {
	if name == "" || holder == "" {
		return Errorf(ErrInvalid, "lease: a name and a holder are required")
	}
	if ttl <= 0 {
		return Errorf(ErrInvalid, "lease: the time to live must be positive")
	}
	return checkText("lease", "name", name, "holder", holder)
}

// ServerStateStore keeps the last state each server of a project was
// seen in (ready, failed, unavailable, invalid) and why, so that a
// gateway that restarted shows what it last knew of a server it has not
// connected yet, instead of "idle" with no error.
type ServerStateStore interface {
	// PutServerState records s, replacing the server's earlier one.
	// Errors: ErrInvalid (see ServerLastState.Validate), ErrNotFound (no
	// such project).
	PutServerState(ctx context.Context, s ServerLastState) error
	// ServerStates returns project's recorded states (none for an
	// unknown project).
	ServerStates(ctx context.Context, project string) ([]ServerLastState, error)
}

// ServerLastState is the last state a server was seen in, and when.
type ServerLastState struct {
	ProjectID string
	Server    string
	State     ServerState
	Error     string // its last error ("" when it was ready)
	At        time.Time
}

// Validate checks the fields the store requires.
func (s ServerLastState) Validate() error {
	if s.ProjectID == "" || s.Server == "" || s.State == "" {
		return Errorf(ErrInvalid, "server state: a project, a server and a state are required")
	}
	return checkText("server state", "project", s.ProjectID, "server", s.Server, "state", string(s.State), "error", s.Error)
}
