package api

import (
	"context"
	"net/http"
	"regexp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// Sandbox is the gateway's sandbox as the API sees it: the workspace
// registry's operations and the per-project switch of the sandbox tools.
// Detach, snapshot and delete refuse a workspace another agent session
// holds unless force (the admin asked for it). Errors: ErrNotFound,
// ErrConflict (held by another agent session, named; a volume in use
// elsewhere), ErrInvalid, ErrConfig.
type Sandbox interface {
	Workspaces(ctx context.Context, project string) ([]switchboard.WorkspaceInfo, error)
	GetWorkspace(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error)
	// AttachWorkspace binds id to agent (an agent session id, or a name
	// of the caller's) and returns the session running on it.
	AttachWorkspace(ctx context.Context, project, agent, id string) (switchboard.SandboxSession, error)
	DetachWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error)
	SnapshotWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error)
	DeleteWorkspace(ctx context.Context, project, id string, force bool) error
	// RestoreSnapshot makes a new workspace from snapshot id.
	RestoreSnapshot(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error)
	// SandboxEnabled and SetSandboxEnabled read and switch whether
	// project's endpoint serves the sandbox tools; the switch is stored.
	// Errors: the store's.
	SandboxEnabled(project string) bool
	SetSandboxEnabled(ctx context.Context, project string, on bool) error
}

var workspaceID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func (a *API) sandboxRoutes(p string) []route {
	return []route{
		{method: "GET", path: p + "/sandbox", fn: a.getSandbox},
		{method: "PUT", path: p + "/sandbox", fn: a.putSandbox},
		{method: "GET", path: p + "/workspaces", fn: a.workspaceOp("list")},
		{method: "GET", path: p + "/workspaces/{id}", fn: a.workspaceOp("get")},
		{method: "DELETE", path: p + "/workspaces/{id}", fn: a.workspaceOp("delete")},
		{method: "POST", path: p + "/workspaces/{id}/attach", fn: a.workspaceOp("attach")},
		{method: "POST", path: p + "/workspaces/{id}/detach", fn: a.workspaceOp("detach")},
		{method: "POST", path: p + "/workspaces/{id}/snapshot", fn: a.workspaceOp("snapshot")},
		{method: "POST", path: p + "/snapshots/{id}/restore", fn: a.workspaceOp("restore")},
	}
}

func (a *API) sandbox(r *http.Request) (string, error) {
	p := r.PathValue("project")
	if a.opts.Sandbox == nil {
		return p, switchboard.Errorf(switchboard.ErrNotFound, "this gateway runs without the sandbox")
	}
	if _, err := a.st.GetProject(r.Context(), p); err != nil {
		return p, err
	}
	return p, nil
}

func (a *API) getSandbox(w http.ResponseWriter, r *http.Request) error {
	p, err := a.sandbox(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.SandboxSwitch{Enabled: a.opts.Sandbox.SandboxEnabled(p)})
	return nil
}

func (a *API) putSandbox(w http.ResponseWriter, r *http.Request) error {
	p, err := a.sandbox(r)
	if err != nil {
		return err
	}
	var in struct {
		Enabled *bool `json:"enabled"`
	}
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if in.Enabled == nil {
		return switchboard.Errorf(switchboard.ErrInvalid, `"enabled" (true or false) is required`)
	}
	if err := a.opts.Sandbox.SetSandboxEnabled(r.Context(), p, *in.Enabled); err != nil {
		return err
	}
	a.log.Info("sandbox tools switched", "project", p, "enabled", *in.Enabled)
	writeJSON(w, http.StatusOK, apiclient.SandboxSwitch{Enabled: *in.Enabled})
	return nil
}

func (a *API) workspaceOp(op string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		p, err := a.sandbox(r)
		if err != nil {
			return err
		}
		id := r.PathValue("id")
		if op != "list" && !workspaceID.MatchString(id) {
			return switchboard.Errorf(switchboard.ErrNotFound, "workspace not found")
		}
		var agent string
		if op == "attach" {
			var in apiclient.WorkspaceAttach
			if err := a.decode(w, r, &in, false); err != nil {
				return err
			}
			if in.AgentSessionID == "" || len(in.AgentSessionID) > 256 {
				return switchboard.Errorf(switchboard.ErrInvalid, `"agent_session_id" is required: the agent session that holds the workspace (an MCP session id, or a name of yours)`)
			}
			agent = in.AgentSessionID
		}
		// A hold is exclusive here too: only the admin, asking for it,
		// acts on a workspace another agent session holds.
		force, err := boolParam(r, "force")
		if err != nil {
			return err
		}
		if force {
			if op != "detach" && op != "snapshot" && op != "delete" {
				return switchboard.Errorf(switchboard.ErrInvalid, "force applies to detach, snapshot and delete only")
			}
			if err := a.opts.Access.AllowAdmin(r, "acting on a workspace another agent session holds (force=true)"); err != nil {
				return err
			}
		}
		sb, ctx := a.opts.Sandbox, r.Context()
		var res any
		switch op {
		case "list":
			var list []switchboard.WorkspaceInfo
			list, err = sb.Workspaces(ctx, p)
			res = apiclient.Workspaces{Workspaces: list}
		case "get":
			res, err = sb.GetWorkspace(ctx, p, id)
		case "attach":
			res, err = sb.AttachWorkspace(ctx, p, agent, id)
		case "detach":
			res, err = sb.DetachWorkspace(ctx, p, id, force)
		case "snapshot":
			res, err = sb.SnapshotWorkspace(ctx, p, id, force)
		case "restore":
			res, err = sb.RestoreSnapshot(ctx, p, id)
		case "delete":
			err = sb.DeleteWorkspace(ctx, p, id, force)
		}
		if err != nil {
			return err
		}
		if op == "delete" {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		status := http.StatusOK
		if op == "snapshot" || op == "restore" {
			status = http.StatusCreated
		}
		writeJSON(w, status, res)
		return nil
	}
}
