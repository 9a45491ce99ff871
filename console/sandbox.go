package console

import (
	"net/http"
	"net/url"
	"time"
)

// workspaceJSON is one row of the API's workspace list: a workspace, or a
// snapshot of one (SnapshotOf set).
type workspaceJSON struct {
	WorkspaceID    string     `json:"workspace_id"`
	Status         string     `json:"status"`
	Volume         string     `json:"volume"`
	AgentSessionID string     `json:"agent_session_id"`
	SessionID      string     `json:"session_id"`
	SnapshotOf     string     `json:"snapshot_of"`
	LastUsedAt     time.Time  `json:"last_used_at"`
	CreatedAt      time.Time  `json:"created_at"`
	Anonymous      bool       `json:"anonymous"`
	ExpiresAt      *time.Time `json:"expires_at"`
}

type sandboxData struct {
	Unavailable string // the gateway runs without the sandbox
	Enabled     bool
	Sessions    []workspaceJSON // workspaces with a live sandbox session
	Workspaces  []workspaceJSON
	Snapshots   []workspaceJSON
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
	var sw struct {
		Enabled bool `json:"enabled"`
	}
	switch rp := c.getJSON(r, apiProject(p)+"/sandbox", &sw); {
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
	var list struct {
		Workspaces []workspaceJSON `json:"workspaces"`
	}
	if rp := c.getJSON(r, apiProject(p)+"/workspaces", &list); !rp.ok() {
		v.Error = "Workspaces: " + rp.message()
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
	id := url.PathEscape(r.PostFormValue("id"))
	base := apiProject(p)
	var rp reply
	switch action {
	case "sandbox-enable", "sandbox-disable":
		rp = c.call(r, http.MethodPut, base+"/sandbox", map[string]bool{"enabled": action == "sandbox-enable"}, nil)
	case "workspace-detach":
		rp = c.call(r, http.MethodPost, base+"/workspaces/"+id+"/detach", nil, nil)
	case "workspace-snapshot":
		rp = c.call(r, http.MethodPost, base+"/workspaces/"+id+"/snapshot", nil, nil)
	case "snapshot-restore":
		rp = c.call(r, http.MethodPost, base+"/snapshots/"+id+"/restore", nil, nil)
	case "workspace-delete":
		rp = c.call(r, http.MethodDelete, base+"/workspaces/"+id, nil, nil)
	default:
		c.renderError(w, r, nil, http.StatusNotFound, "No such action.")
		return reply{}, true
	}
	return rp, false
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
