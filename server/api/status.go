package api

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

func (a *API) listTools(w http.ResponseWriter, r *http.Request) error {
	cat, err := a.opts.Projects.Tools(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	out := make([]apiclient.Tool, len(cat.Tools))
	for i, t := range cat.Tools {
		out[i] = apiclient.Tool{Name: t.Name, Server: t.Server, Tool: t.Raw}
	}
	writeJSON(w, http.StatusOK, apiclient.Tools{Tools: out})
	return nil
}

func (a *API) status(w http.ResponseWriter, r *http.Request) error {
	st, err := a.opts.Projects.Status(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	if st == nil {
		st = []switchboard.ServerStatus{}
	}
	out := apiclient.Statuses{Servers: st, Pulls: []switchboard.PullProgress{}}
	if a.opts.Pulls != nil {
		out.Pulls = a.opts.Pulls(r.PathValue("project"))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
