// Package apiclient is the Go client of Switchboard's admin API (/api/v1)
// and the home of its wire types: server/api encodes the types declared
// here, and the CLI and the console call the API through Client. It
// depends on the standard library and the root package only.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard"
)

// Doer sends one HTTP request: an *http.Client, or a handler served in
// process (the console's).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// Client calls one gateway's admin API. The zero value is not usable;
// fill URL (or leave it "" with a Doer that serves paths in process).
type Client struct {
	// URL is the gateway's base URL without a trailing slash, such as
	// http://127.0.0.1:8080; "" sends path-only requests to HTTP.
	URL string
	// Token is sent as a bearer token when set.
	Token string
	// HTTP sends the requests; nil is http.DefaultClient.
	HTTP Doer
	// UserAgent, when set, is sent as User-Agent.
	UserAgent string
	// Header, when set, is added to every request (a request id).
	Header http.Header
	// MaxReply bounds what is read of one answer; 0 is 64 MiB.
	MaxReply int64
}

// Error is an HTTP error answer of the API (or of anything else at its
// address: Code and Message are then empty or the start of the body).
type Error struct {
	Method  string
	Path    string // the request path, below the gateway's URL
	Status  int    // HTTP status
	Code    string // the API's error code ("not_found"), or a JSON-RPC code
	Message string // the API's message, or the start of a body that was not JSON
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// RequestError is a request that got no HTTP answer (refused, timed
// out, cancelled); Err says why.
type RequestError struct {
	Method, Path string
	Err          error
}

func (e *RequestError) Error() string { return fmt.Sprintf("%s %s: %v", e.Method, e.Path, e.Err) }
func (e *RequestError) Unwrap() error { return e.Err }

// Do sends method to path (below /api/v1, query included) with in
// JSON-encoded as the body when not nil, and decodes a JSON answer into
// out when out is not nil. Errors: *Error for an HTTP error answer,
// *RequestError when there was no answer.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	full := "/api/v1" + path
	req, err := http.NewRequestWithContext(ctx, method, c.URL+full, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	h := c.HTTP
	if h == nil {
		h = http.DefaultClient
	}
	resp, err := h.Do(req)
	if err != nil {
		return &RequestError{Method: method, Path: full, Err: err}
	}
	defer resp.Body.Close()
	limit := c.MaxReply
	if limit <= 0 {
		limit = 64 << 20
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return &RequestError{Method: method, Path: full, Err: err}
	}
	if resp.StatusCode >= 300 {
		return DecodeError(method, full, resp.StatusCode, raw)
	}
	if out != nil && len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: unexpected answer (%v): %s", method, full, err, Snippet(raw))
		}
	}
	return nil
}

// DecodeError reads an error answer: the API's {"error": {"code",
// "message"}}, a JSON-RPC error (numeric code) or anything else.
func DecodeError(method, path string, status int, raw []byte) *Error {
	e := &Error{Method: method, Path: path, Status: status}
	var body struct {
		Error struct {
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && (body.Error.Message != "" || len(body.Error.Code) > 0) {
		e.Message = body.Error.Message
		if json.Unmarshal(body.Error.Code, &e.Code) != nil {
			e.Code = string(body.Error.Code)
		}
		return e
	}
	e.Message = Snippet(raw)
	return e
}

// Snippet is the start of a body for an error message.
func Snippet(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "..."
	}
	return s
}

// path joins escaped segments into an API path.
func path(segs ...string) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString("/" + url.PathEscape(s))
	}
	return b.String()
}

func projectPath(p string, rest ...string) string {
	return path(append([]string{"projects", p}, rest...)...)
}

func with(p string, q url.Values) string {
	if len(q) == 0 {
		return p
	}
	return p + "?" + q.Encode()
}

// ---- projects

// Projects lists the projects (admin).
func (c *Client) Projects(ctx context.Context) (Projects, error) {
	var out Projects
	return out, c.Do(ctx, http.MethodGet, "/projects", nil, &out)
}

// Project reads one project.
func (c *Client) Project(ctx context.Context, id string) (Project, error) {
	var out Project
	return out, c.Do(ctx, http.MethodGet, projectPath(id), nil, &out)
}

// CreateProject creates a project (admin).
func (c *Client) CreateProject(ctx context.Context, in NewProject) (Project, error) {
	var out Project
	return out, c.Do(ctx, http.MethodPost, "/projects", in, &out)
}

// DeleteProject deletes a project; force also when it runs sandbox
// sessions or hosted servers or keeps workspaces.
func (c *Client) DeleteProject(ctx context.Context, id string, force bool) error {
	return c.Do(ctx, http.MethodDelete, with(projectPath(id), forceQuery(force)), nil, nil)
}

// ---- servers, tools, status

// Servers lists a project's servers with their live status.
func (c *Client) Servers(ctx context.Context, project string) (Servers, error) {
	var out Servers
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "servers"), nil, &out)
}

// CreateServer adds a server to a project.
func (c *Client) CreateServer(ctx context.Context, project string, in ServerChange) (Server, error) {
	var out Server
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "servers"), in, &out)
}

// UpdateServer changes the fields of in that are set.
func (c *Client) UpdateServer(ctx context.Context, project, name string, in ServerChange) (Server, error) {
	var out Server
	return out, c.Do(ctx, http.MethodPatch, projectPath(project, "servers", name), in, &out)
}

// DeleteServer removes a server from a project.
func (c *Client) DeleteServer(ctx context.Context, project, name string) error {
	return c.Do(ctx, http.MethodDelete, projectPath(project, "servers", name), nil, nil)
}

// PutProduct imports a product's manifest (a JSON object with an
// "mcp": {"servers": {...}} block) as the project's servers of product.
func (c *Client) PutProduct(ctx context.Context, project, product string, manifest json.RawMessage) (Servers, error) {
	var out Servers
	return out, c.Do(ctx, http.MethodPut, projectPath(project, "products", product), manifest, &out)
}

// DeleteProduct removes the servers a product's manifest brought.
func (c *Client) DeleteProduct(ctx context.Context, project, product string) error {
	return c.Do(ctx, http.MethodDelete, projectPath(project, "products", product), nil, nil)
}

// Tools lists the tools a project's endpoint offers.
func (c *Client) Tools(ctx context.Context, project string) (Tools, error) {
	var out Tools
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "tools"), nil, &out)
}

// Reload re-reads the gateway's servers file (admin).
func (c *Client) Reload(ctx context.Context) (Reloaded, error) {
	var out Reloaded
	return out, c.Do(ctx, http.MethodPost, "/reload", struct{}{}, &out)
}

// ---- secrets and tokens

// Secrets lists a project's secret names.
func (c *Client) Secrets(ctx context.Context, project string) (Secrets, error) {
	var out Secrets
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "secrets"), nil, &out)
}

// SetSecret sets a secret's value.
func (c *Client) SetSecret(ctx context.Context, project, name, value string) (Secret, error) {
	var out Secret
	return out, c.Do(ctx, http.MethodPut, projectPath(project, "secrets", name), SecretValue{Value: &value}, &out)
}

// DeleteSecret deletes a secret.
func (c *Client) DeleteSecret(ctx context.Context, project, name string) error {
	return c.Do(ctx, http.MethodDelete, projectPath(project, "secrets", name), nil, nil)
}

// Tokens lists a project's tokens (admin).
func (c *Client) Tokens(ctx context.Context, project string) (Tokens, error) {
	var out Tokens
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "tokens"), nil, &out)
}

// CreateToken creates a project token; the answer holds it, only this once.
func (c *Client) CreateToken(ctx context.Context, project, name string) (Token, error) {
	var out Token
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "tokens"), NewToken{Name: name}, &out)
}

// RevokeToken revokes a project token.
func (c *Client) RevokeToken(ctx context.Context, project, id string) (Token, error) {
	var out Token
	return out, c.Do(ctx, http.MethodDelete, projectPath(project, "tokens", id), nil, &out)
}

// ---- the call log

// CallQuery selects calls; empty fields match everything.
type CallQuery struct {
	Server, Tool, Outcome string
	Since                 string // RFC 3339
	Until                 string // RFC 3339
	Limit                 int
	Cursor                string
}

// Calls lists a project's logged tool calls, newest first.
func (c *Client) Calls(ctx context.Context, project string, q CallQuery) (CallPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"server": q.Server, "tool": q.Tool, "outcome": q.Outcome, "since": q.Since, "until": q.Until, "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out CallPage
	return out, c.Do(ctx, http.MethodGet, with(projectPath(project, "tool-calls"), v), nil, &out)
}

// ---- hosted servers

// HostedServers lists a project's hosted servers.
func (c *Client) HostedServers(ctx context.Context, project string) (HostedList, error) {
	var out HostedList
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "mcp", "servers"), nil, &out)
}

// HostedServer reads one hosted server by id or name.
func (c *Client) HostedServer(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	var out switchboard.HostedStatus
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "mcp", "servers", ref), nil, &out)
}

// RegisterHosted registers (and starts) a hosted server.
func (c *Client) RegisterHosted(ctx context.Context, project string, reg any) (switchboard.HostedStatus, error) {
	var out switchboard.HostedStatus
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "mcp", "servers"), reg, &out)
}

// RestartHosted replaces a hosted server's container.
func (c *Client) RestartHosted(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	var out switchboard.HostedStatus
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "mcp", "servers", ref, "restart"), nil, &out)
}

// HostedLogs reads the tail of a hosted server's log.
func (c *Client) HostedLogs(ctx context.Context, project, ref string, tail int) (HostedLogs, error) {
	var out HostedLogs
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "mcp", "servers", ref, "logs")+"?tail="+strconv.Itoa(tail), nil, &out)
}

// DeleteHosted deletes a hosted server, and its volumes unless keepVolumes.
func (c *Client) DeleteHosted(ctx context.Context, project, ref string, keepVolumes bool) error {
	q := url.Values{}
	if keepVolumes {
		q.Set("keep_volumes", "true")
	}
	return c.Do(ctx, http.MethodDelete, with(projectPath(project, "mcp", "servers", ref), q), nil, nil)
}

// ---- the sandbox

// Sandbox reads whether a project serves the sandbox tools.
func (c *Client) Sandbox(ctx context.Context, project string) (SandboxSwitch, error) {
	var out SandboxSwitch
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "sandbox"), nil, &out)
}

// SetSandbox switches a project's sandbox tools on or off.
func (c *Client) SetSandbox(ctx context.Context, project string, on bool) (SandboxSwitch, error) {
	var out SandboxSwitch
	return out, c.Do(ctx, http.MethodPut, projectPath(project, "sandbox"), SandboxSwitch{Enabled: on}, &out)
}

// Workspaces lists a project's workspaces and snapshots.
func (c *Client) Workspaces(ctx context.Context, project string) (Workspaces, error) {
	var out Workspaces
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "workspaces"), nil, &out)
}

// Workspace reads one workspace or snapshot.
func (c *Client) Workspace(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error) {
	var out switchboard.WorkspaceInfo
	return out, c.Do(ctx, http.MethodGet, projectPath(project, "workspaces", id), nil, &out)
}

// DeleteWorkspace deletes a workspace or snapshot for good; force (admin)
// also when another agent session holds it.
func (c *Client) DeleteWorkspace(ctx context.Context, project, id string, force bool) error {
	return c.Do(ctx, http.MethodDelete, with(projectPath(project, "workspaces", id), forceQuery(force)), nil, nil)
}

// forceQuery is ?force=true when force.
func forceQuery(force bool) url.Values {
	q := url.Values{}
	if force {
		q.Set("force", "true")
	}
	return q
}

// AttachWorkspace attaches a workspace to an agent session, exclusively,
// and answers the sandbox session on it.
func (c *Client) AttachWorkspace(ctx context.Context, project, id, agent string) (switchboard.SandboxSession, error) {
	var out switchboard.SandboxSession
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "workspaces", id, "attach"), WorkspaceAttach{AgentSessionID: agent}, &out)
}

// DetachWorkspace detaches a workspace: its session stops, its files
// stay; force (admin) also when another agent session holds it.
func (c *Client) DetachWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error) {
	var out switchboard.WorkspaceInfo
	return out, c.Do(ctx, http.MethodPost, with(projectPath(project, "workspaces", id, "detach"), forceQuery(force)), nil, &out)
}

// SnapshotWorkspace snapshots a workspace and answers the snapshot; force
// (admin) also when another agent session holds it.
func (c *Client) SnapshotWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error) {
	var out switchboard.WorkspaceInfo
	return out, c.Do(ctx, http.MethodPost, with(projectPath(project, "workspaces", id, "snapshot"), forceQuery(force)), nil, &out)
}

// RestoreSnapshot restores a snapshot into a new workspace.
func (c *Client) RestoreSnapshot(ctx context.Context, project, snapshot string) (switchboard.WorkspaceInfo, error) {
	var out switchboard.WorkspaceInfo
	return out, c.Do(ctx, http.MethodPost, projectPath(project, "snapshots", snapshot, "restore"), nil, &out)
}
