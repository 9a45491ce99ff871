package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func toProject(p switchboard.Project) apiclient.Project {
	u := "/projects/" + p.ID + "/mcp"
	if p.ID == "default" {
		u = "/mcp"
	}
	return apiclient.Project{ID: p.ID, Description: p.Description, MCPURL: u, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "listing projects"); err != nil {
		return err
	}
	list, err := a.st.ListProjects(r.Context())
	if err != nil {
		return err
	}
	out := make([]apiclient.Project, 0, len(list))
	for _, p := range list {
		// In dev mode, a project closed by its tokens is listed by name
		// only, marked closed: its description and the rest need its token.
		if a.opts.Access.AllowProject(r, p.ID) == nil {
			out = append(out, toProject(p))
			continue
		}
		c := toProject(switchboard.Project{ID: p.ID})
		c.Closed = true
		out = append(out, c)
	}
	writeJSON(w, http.StatusOK, apiclient.Projects{Projects: out})
	return nil
}

func (a *API) createProject(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "creating a project"); err != nil {
		return err
	}
	var in apiclient.NewProject
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if !projectID.MatchString(in.ID) {
		return switchboard.Errorf(switchboard.ErrInvalid, "id must be 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit")
	}
	if err := text("description", in.Description); err != nil {
		return err
	}
	p, err := a.st.CreateProject(r.Context(), switchboard.Project{ID: in.ID, Description: in.Description})
	if err != nil {
		return err
	}
	a.reconcile(r.Context(), p.ID)
	a.log.Info("project created", "project", p.ID)
	writeJSON(w, http.StatusCreated, toProject(p))
	return nil
}

func (a *API) getProject(w http.ResponseWriter, r *http.Request) error {
	p, err := a.st.GetProject(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProject(p))
	return nil
}

func (a *API) updateProject(w http.ResponseWriter, r *http.Request) error {
	var in apiclient.ProjectChange
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	p, err := a.st.GetProject(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	if in.Description != nil {
		if err := text("description", *in.Description); err != nil {
			return err
		}
		p.Description = *in.Description
	}
	if p, err = a.st.UpdateProject(r.Context(), p); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProject(p))
	return nil
}

func (a *API) deleteProject(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "deleting a project"); err != nil {
		return err
	}
	id := r.PathValue("project")
	if id == "default" {
		return switchboard.Errorf(switchboard.ErrConflict, "the default project cannot be deleted; delete its servers instead")
	}
	force, err := boolParam(r, "force")
	if err != nil {
		return err
	}
	if _, err := a.st.GetProject(r.Context(), id); err != nil {
		return err
	}
	if a.opts.Teardown != nil && !force {
		usage, err := a.opts.Teardown.ProjectUsage(r.Context(), id)
		if err != nil {
			return err
		}
		if len(usage) > 0 {
			return switchboard.Errorf(switchboard.ErrConflict, "project %q still has %s; deleting it removes them and their files for good: repeat with ?force=true (CLI: switchboard projects rm --force %s)", id, strings.Join(usage, ", "), id)
		}
	}
	if err := a.st.DeleteProject(r.Context(), id); err != nil {
		return err
	}
	a.reconcile(r.Context(), id)
	a.opts.TokensChanged(id)
	if a.opts.Teardown != nil {
		// The rows are gone and the project's endpoint is closed: nothing
		// can start anew for it. A failure here leaves objects a retry
		// of the same DELETE (404 now) cannot reach, so say so loudly.
		if err := a.opts.Teardown.DeleteProject(context.WithoutCancel(r.Context()), id); err != nil {
			a.log.Error("project deleted, but some of its containers or volumes could not be removed", "project", id, "err", err)
			return switchboard.Errorf(switchboard.ErrInternal, "project %q was deleted, but some of its containers or volumes could not be removed; the gateway's log names them", id)
		}
	}
	a.log.Info("project deleted", "project", id, "forced", force)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
