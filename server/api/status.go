package api

import (
	"encoding/json"
	"net/http"

	"github.com/switchboard-mcp/switchboard"
)

func (a *API) listTools(w http.ResponseWriter, r *http.Request) error {
	cat, err := a.opts.Projects.Tools(r.Context(), r.PathValue("project"))
	if err != nil {
		return err
	}
	type toolJSON struct {
		Name   string          `json:"name"`
		Server string          `json:"server"`
		Tool   json.RawMessage `json:"tool"`
	}
	out := make([]toolJSON, len(cat.Tools))
	for i, t := range cat.Tools {
		out[i] = toolJSON{Name: t.Name, Server: t.Server, Tool: t.Raw}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out})
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
	writeJSON(w, http.StatusOK, map[string]any{"servers": st})
	return nil
}
