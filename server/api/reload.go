package api

import (
	"net/http"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// reload re-reads the servers file, as SIGHUP does, without the risk of
// signalling the wrong process (the pid of `go run` is not the gateway's).
// Admin only: the file decides what runs on the host.
func (a *API) reload(w http.ResponseWriter, r *http.Request) error {
	if err := a.opts.Access.AllowAdmin(r, "reloading the servers file"); err != nil {
		return err
	}
	if a.opts.Reload == nil {
		return switchboard.Errorf(switchboard.ErrUnavailable, "this gateway has no servers file to reload")
	}
	n, err := a.opts.Reload(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.Reloaded{Reloaded: true, Servers: n})
	return nil
}
