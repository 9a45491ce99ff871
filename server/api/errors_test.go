package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// fullSandbox refuses every workspace operation with err.
type fullSandbox struct{ err error }

func (s fullSandbox) Workspaces(context.Context, string) ([]switchboard.WorkspaceInfo, error) {
	return nil, s.err
}
func (s fullSandbox) GetWorkspace(context.Context, string, string) (switchboard.WorkspaceInfo, error) {
	return switchboard.WorkspaceInfo{}, s.err
}
func (s fullSandbox) AttachWorkspace(context.Context, string, string, string) (switchboard.SandboxSession, error) {
	return switchboard.SandboxSession{}, s.err
}
func (s fullSandbox) DetachWorkspace(context.Context, string, string, bool) (switchboard.WorkspaceInfo, error) {
	return switchboard.WorkspaceInfo{}, s.err
}
func (s fullSandbox) SnapshotWorkspace(context.Context, string, string, bool) (switchboard.WorkspaceInfo, error) {
	return switchboard.WorkspaceInfo{}, s.err
}
func (s fullSandbox) DeleteWorkspace(context.Context, string, string, bool) error { return s.err }
func (s fullSandbox) RestoreSnapshot(context.Context, string, string) (switchboard.WorkspaceInfo, error) {
	return switchboard.WorkspaceInfo{}, s.err
}
func (fullSandbox) SandboxEnabled(string) bool                            { return true }
func (fullSandbox) SetSandboxEnabled(context.Context, string, bool) error { return nil }

// TestStatusSaysWhatHappened: a cap on what a project runs is 409
// limit_reached, not 413 Request Entity Too Large, which a body over the
// limit alone gets; each domain error has its status and code.
func TestStatusSaysWhatHappened(t *testing.T) {
	st, _, _ := adminAndTenant(t)
	limit := switchboard.Errorf(switchboard.ErrResourceLimit, "this project has 4 sandbox sessions open, the limit (MCP_SERVER_SANDBOX_MAX_SESSIONS)")
	a := New(Options{Store: st, Projects: noProjects{}, Access: access{admin: true}, Secrets: plainSealer{},
		Sandbox: fullSandbox{limit}, MaxBodyBytes: 64})

	w := send(a, "POST", "/api/v1/projects/default/workspaces/ws-1/attach", `{"agent_session_id":"agent-A"}`)
	if w.Code != http.StatusConflict || errorCode(t, w) != "limit_reached" || !strings.Contains(w.Body.String(), "MCP_SERVER_SANDBOX_MAX_SESSIONS") {
		t.Errorf("attach on a full project: HTTP %d %s, want 409 limit_reached naming the limit", w.Code, w.Body)
	}
	w = send(a, "POST", "/api/v1/projects/default/workspaces/ws-1/attach", `{"agent_session_id":"`+strings.Repeat("a", 100)+`"}`)
	if w.Code != http.StatusRequestEntityTooLarge || errorCode(t, w) != "too_large" {
		t.Errorf("body over MaxBodyBytes: HTTP %d %s, want 413 too_large", w.Code, w.Body)
	}

	for _, tt := range []struct {
		err    error
		status int
		code   string
	}{
		{switchboard.ErrInvalid, 400, "invalid"},
		{switchboard.ErrNotFound, 404, "not_found"},
		{switchboard.ErrArgNotFound, 404, "not_found"},
		{switchboard.ErrConflict, 409, "conflict"},
		{switchboard.ErrResourceLimit, 409, "limit_reached"},
		{switchboard.ErrUnavailable, 503, "unavailable"},
		{switchboard.ErrTimeout, 504, "timeout"},
		{context.Canceled, 500, "internal"},
	} {
		if status, code, _ := toStatus(switchboard.Errorf(tt.err, "x")); status != tt.status || code != tt.code {
			t.Errorf("%v: HTTP %d %s, want %d %s", tt.err, status, code, tt.status, tt.code)
		}
	}
}

// TestJSONProblemDepth: a body nested past encoding/json's limit is
// described as such, not by the byte where the decoder gave up.
func TestJSONProblemDepth(t *testing.T) {
	var v any
	body := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	err := json.Unmarshal([]byte(body), &v)
	if err == nil {
		t.Fatal("encoding/json accepted a body past its nesting limit; maxJSONDepth is out of date")
	}
	if got, want := jsonProblem(err), "it is nested more than 10000 levels deep"; got != want {
		t.Errorf("jsonProblem = %q, want %q", got, want)
	}
	if err := json.Unmarshal([]byte(strings.Repeat("[", maxJSONDepth)+strings.Repeat("]", maxJSONDepth)), &v); err != nil {
		t.Errorf("%d levels: %v; maxJSONDepth is out of date", maxJSONDepth, err)
	}
	if got := jsonProblem(json.Unmarshal([]byte(`{"a":}`), &v)); got != "syntax error at byte 6" {
		t.Errorf("jsonProblem of a syntax error = %q", got)
	}
}
