package api

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// withStatus renders records with the live status of the enabled ones.
func (a *API) withStatus(r *http.Request, project string, recs []switchboard.ServerRecord) []apiclient.Server {
	byName := map[string]switchboard.ServerStatus{}
	if st, err := a.opts.Projects.Status(r.Context(), project); err == nil {
		for _, s := range st {
			byName[s.Name] = s
		}
	}
	admin := a.opts.Access.AllowAdmin(r, "") == nil
	out := make([]apiclient.Server, len(recs))
	for i, rec := range recs {
		cfg := rec.Config
		if !admin {
			cfg = maskConfig(cfg)
		}
		out[i] = apiclient.Server{ID: rec.ID, ProjectID: rec.ProjectID, ProductID: rec.ProductID, Name: rec.Name, Source: "api",
			Description: rec.Description, Transport: rec.Transport, Config: cfg, Enabled: rec.Enabled,
			CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt}
		if s, ok := byName[rec.Name]; ok && rec.Enabled {
			out[i].Status = &s
		}
	}
	return out
}

func (a *API) listServers(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	recs, err := a.st.ListServers(r.Context(), p)
	if err != nil {
		return err
	}
	out := a.withStatus(r, p, recs)
	// Then every server the project serves that the store does not hold:
	// the servers file (or the built-in demo), the gateway's own tools and
	// hosted containers, read-only here, in the order status lists them.
	stored := map[string]bool{}
	for _, rec := range recs {
		stored[rec.Name] = true
	}
	if st, err := a.opts.Projects.Status(r.Context(), p); err == nil {
		for _, s := range st {
			if stored[s.Name] {
				continue
			}
			src := "built-in"
			switch {
			case s.Transport == switchboard.TransportHosted || a.opts.Projects.HostedServer(p, s.Name):
				// An HTTP hosted server (stdio_bridge false) is reached at
				// its address, with an HTTP transport: still hosted.
				src = "hosted"
			case a.opts.Projects.FileServer(p, s.Name) && a.opts.Reload != nil:
				src = "file"
			}
			s := s
			out = append(out, apiclient.Server{ProjectID: p, Name: s.Name, Transport: s.Transport, Enabled: true, Source: src, ReadOnly: true, Status: &s})
		}
	}
	writeJSON(w, http.StatusOK, apiclient.Servers{Servers: out})
	return nil
}

func (a *API) createServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	var in apiclient.ServerChange
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if in.Name == nil || *in.Name == "" {
		return switchboard.Errorf(switchboard.ErrInvalid, "name is required")
	}
	if in.Config == nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "config is required: the server's entry as in an mcpServers file, such as {\"command\": \"npx\", \"args\": [...]} or {\"url\": \"https://...\"}")
	}
	rec := switchboard.ServerRecord{ProjectID: p, Name: *in.Name, Config: in.Config, Enabled: true}
	if in.Description != nil {
		rec.Description = *in.Description
	}
	if in.Enabled != nil {
		rec.Enabled = *in.Enabled
	}
	if err := text("description", rec.Description); err != nil {
		return err
	}
	if err := a.admit(r, &rec, true); err != nil {
		return err
	}
	rec, err := a.st.CreateServer(r.Context(), rec)
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server created", "project", p, "server", rec.Name, "transport", rec.Transport)
	writeJSON(w, http.StatusCreated, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

// pathServer is the {name} of a server route. A name no server can have
// is not found without asking the store (or echoing it).
func pathServer(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if !serverName.MatchString(name) {
		return "", switchboard.Errorf(switchboard.ErrNotFound, "server not found (server names are 1-64 letters, digits, '_', '-' or '.')")
	}
	return name, nil
}

func (a *API) getServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	name, err := pathServer(r)
	if err != nil {
		return err
	}
	rec, err := a.st.GetServer(r.Context(), p, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

func (a *API) updateServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	var in apiclient.ServerChange
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	rec, err := a.storedServer(r, p)
	if err != nil {
		return err
	}
	if in.Name != nil {
		rec.Name = *in.Name
	}
	if in.Description != nil {
		if err := text("description", *in.Description); err != nil {
			return err
		}
		rec.Description = *in.Description
	}
	if in.Enabled != nil {
		rec.Enabled = *in.Enabled
	}
	if in.Config != nil {
		if a.opts.Access.AllowAdmin(r, "") != nil {
			in.Config = keepMasked(rec.Config, in.Config)
		}
		rec.Config = in.Config
	}
	// Enabling counts too: an admin may have disabled a command on purpose.
	if err := a.admit(r, &rec, in.Config != nil || in.Name != nil || in.Enabled != nil); err != nil {
		return err
	}
	if rec, err = a.st.UpdateServer(r.Context(), rec); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server updated", "project", p, "server", rec.Name, "enabled", rec.Enabled)
	writeJSON(w, http.StatusOK, a.withStatus(r, p, []switchboard.ServerRecord{rec})[0])
	return nil
}

// storedServer reads the server the path names, for a change or a
// deletion. The stored kind decides who may: any change to a stdio server
// (its entry, name, description, switch, or its removal, which also frees
// the secrets it referenced for a project token to set) is the admin's,
// whatever a new entry says; turning it into a remote server would
// otherwise let a project token stop the admin's command and then delete
// what is left.
func (a *API) storedServer(r *http.Request, project string) (switchboard.ServerRecord, error) {
	name, err := pathServer(r)
	if err != nil {
		return switchboard.ServerRecord{}, err
	}
	rec, err := a.st.GetServer(r.Context(), project, name)
	if err != nil {
		return switchboard.ServerRecord{}, err
	}
	return rec, a.stdioAllowed(r, rec.Transport)
}

func (a *API) deleteServer(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	rec, err := a.storedServer(r, p)
	if err != nil {
		return err
	}
	if err := a.st.DeleteServer(r.Context(), p, rec.Name); err != nil {
		return err
	}
	a.reconcile(r.Context(), p)
	a.log.Info("server deleted", "project", p, "server", rec.Name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// admit checks a server row before it is written: its entry parses (which
// sets rec.Transport), the sender may configure a stdio server when the
// write touches what runs (touchesCommand), and no servers-file server
// already has its name.
func (a *API) admit(r *http.Request, rec *switchboard.ServerRecord, touchesCommand bool) error {
	tr, err := a.parseEntry(rec.Name, rec.Config)
	if err != nil {
		return err
	}
	if touchesCommand {
		if err := a.stdioAllowed(r, tr); err != nil {
			return err
		}
	}
	rec.Transport = tr
	return a.notReserved(rec.ProjectID, rec.Name)
}

// notReserved refuses a stored server named like one the gateway's servers
// file (or the built-in demo) configures, or like a hosted server of the
// project: the file's server would win and the stored one would never
// run, and a stored one would shadow the hosted server (a project token
// could take an admin's hosted server off the air by its name).
func (a *API) notReserved(project, name string) error {
	if a.opts.Projects.FileServer(project, name) {
		return switchboard.Errorf(switchboard.ErrConflict, "server %q is configured by the gateway's servers file (MCP_SERVER_CONFIG) or built-in demo in project %q; choose another name", name, project)
	}
	if a.opts.Projects.HostedServer(project, name) {
		return switchboard.Errorf(switchboard.ErrConflict, "server %q is a hosted server of project %q; choose another name", name, project)
	}
	return nil
}
