package console

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard"
)

type sandboxData struct {
	Unavailable string // the gateway runs without the sandbox
	Enabled     bool
	Sessions    []switchboard.WorkspaceInfo // workspaces with a live sandbox session
	Workspaces  []switchboard.WorkspaceInfo
	Snapshots   []switchboard.WorkspaceInfo
}

var sandboxDone = map[string]string{
	"sandbox-enable":     "Sandbox tools enabled for this project.",
	"sandbox-disable":    "Sandbox tools disabled for this project.",
	"workspace-detach":   "Workspace detached.",
	"workspace-snapshot": "Snapshot taken.",
	"snapshot-restore":   "Snapshot restored into a new workspace.",
	"workspace-delete":   "Deleted.",
}

func (c *Console) sandboxPage(w http.ResponseWriter, r *http.Request) {
	r, cancel := withTimeout(r, pageTimeout)
	defer cancel()
	v := c.newView(w, r, "Sandbox", "sandbox")
	v.Flash = sandboxDone[r.URL.Query().Get("done")]
	c.renderSandbox(w, r, v, http.StatusOK)
}

// renderSandbox reads the project's sandbox switch and workspaces (with
// their live sessions and snapshots) through the API.
func (c *Console) renderSandbox(w http.ResponseWriter, r *http.Request, v *view, status int) {
	if _, ok := c.project(w, r, v); !ok {
		return
	}
	p := r.PathValue("project")
	v.Title = "Sandbox · " + p
	d := sandboxData{}
	api := c.api(r)
	sw, err := api.Sandbox(r.Context(), p)
	switch rp := c.fromAPI(err); {
	case rp.ok():
		d.Enabled = sw.Enabled
	case rp.status == http.StatusNotFound:
		d.Unavailable = rp.message()
		v.Data = d
		c.render(w, status, "sandbox", v)
		return
	default:
		c.failed(w, r, v, rp)
		return
	}
	list, err := api.Workspaces(r.Context(), p)
	if err != nil {
		v.Error = "Workspaces: " + c.fromAPI(err).message()
	}
	for _, ws := range list.Workspaces {
		switch {
		case ws.Status == "snapshot":
			d.Snapshots = append(d.Snapshots, ws)
		default:
			d.Workspaces = append(d.Workspaces, ws)
			if ws.SessionID != "" {
				d.Sessions = append(d.Sessions, ws)
			}
		}
	}
	v.Data = d
	c.render(w, status, "sandbox", v)
}

// sandboxDo switches the project's sandbox tools or runs a workspace
// operation through the API (see formAction).
func (c *Console) sandboxDo(w http.ResponseWriter, r *http.Request, p, action string) (reply, bool) {
	id := r.PostFormValue("id")
	api, ctx := c.api(r), r.Context()
	var err error
	switch action {
	case "sandbox-enable", "sandbox-disable":
		_, err = api.SetSandbox(ctx, p, action == "sandbox-enable")
	case "workspace-detach":
		_, err = api.DetachWorkspace(ctx, p, id, false)
	case "workspace-snapshot":
		_, err = api.SnapshotWorkspace(ctx, p, id, false)
	case "snapshot-restore":
		_, err = api.RestoreSnapshot(ctx, p, id)
	case "workspace-delete":
		err = api.DeleteWorkspace(ctx, p, id, false)
	default:
		c.renderError(w, r, nil, http.StatusNotFound, "No such action.")
		return reply{}, true
	}
	return c.fromAPI(err), false
}

// sandboxFailed shows the Sandbox page again with the API's refusal.
func (c *Console) sandboxFailed(w http.ResponseWriter, r *http.Request, rp reply, msg string) {
	if rp.status == http.StatusUnauthorized {
		c.failed(w, r, nil, rp)
		return
	}
	v := c.newView(w, r, "Sandbox", "sandbox")
	v.Error = msg
	c.renderSandbox(w, r, v, rp.status)
}
