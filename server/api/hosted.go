package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// Hosted is the gateway's container-hosted MCP servers (hosted.Service).
type Hosted interface {
	Register(ctx context.Context, project string, reg switchboard.HostedRegistration) (switchboard.HostedStatus, error)
	List(ctx context.Context, project string) ([]switchboard.HostedStatus, error)
	Get(ctx context.Context, project, ref string) (switchboard.HostedStatus, error)
	Restart(ctx context.Context, project, ref string) (switchboard.HostedStatus, error)
	Delete(ctx context.Context, project, ref string, keepVolumes bool) error
	Logs(ctx context.Context, project, ref string, lines int) (string, error)
	Call(ctx context.Context, project, ref, method string, params json.RawMessage) (json.RawMessage, error)
}

// hostedRoutes are the hosted-server routes, under the default project's
// /api/v1/mcp/servers and every project's /api/v1/projects/{p}/mcp/servers.
func (a *API) hostedRoutes() []route {
	var out []route
	for _, base := range []string{"/api/v1/mcp/servers", "/api/v1/projects/{project}/mcp/servers"} {
		out = append(out,
			route{method: "GET", path: base, fn: a.listHosted},
			route{method: "POST", path: base, fn: a.createHosted},
			route{method: "GET", path: base + "/{id}", fn: a.getHosted},
			route{method: "DELETE", path: base + "/{id}", fn: a.deleteHosted},
			route{method: "POST", path: base + "/{id}/restart", fn: a.restartHosted},
			route{method: "GET", path: base + "/{id}/logs", fn: a.hostedLogs},
			route{method: "POST", path: base + "/{id}/call", fn: a.callHosted},
		)
	}
	return out
}

// hostedProject is the route's project ("default" for /api/v1/mcp/...),
// checked for access, and the hosted service.
func (a *API) hostedProject(r *http.Request) (string, Hosted, error) {
	p := r.PathValue("project")
	if p == "" {
		p = "default"
		if err := a.opts.Access.AllowProject(r, p); err != nil {
			return "", nil, err
		}
	}
	if a.opts.Hosted == nil {
		return "", nil, switchboard.Errorf(switchboard.ErrUnavailable, "hosted servers are not enabled on this gateway")
	}
	return p, a.opts.Hosted, nil
}

// hostAllowed: a hosted server decides what runs on the gateway's host,
// so changing, restarting or calling one is an admin action when an admin
// token is set (as for stdio servers).
func (a *API) hostAllowed(r *http.Request) error {
	if a.opts.Access.AllowCommands(r) == nil {
		return nil
	}
	return a.opts.Access.AllowAdmin(r, "a hosted server runs a container on the gateway's host; managing or calling one")
}

// shownHosted is st as the sender of r may read it: everyone but the
// admin reads the container's command line with its credentials masked
// (--token=..., --password ..., URLs), as a stdio server's (mask.go).
func (a *API) shownHosted(r *http.Request, st switchboard.HostedStatus) switchboard.HostedStatus {
	if a.opts.Access.AllowAdmin(r, "") == nil {
		return st
	}
	argv := maskArgs(append([]string{st.Config.Command}, st.Config.Args...))
	st.Config.Command = argv[0]
	if len(st.Config.Args) > 0 {
		st.Config.Args = argv[1:]
	}
	return st
}

var hostedRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// hostedID is the {id} of a route: a row ID or a server name.
// hostedTarget resolves a route naming one hosted server: the project and
// its hosted service, the admin check when the action decides what runs
// on the host (admin), and the server's id or name.
func (a *API) hostedTarget(r *http.Request, admin bool) (string, Hosted, string, error) {
	p, h, err := a.hostedProject(r)
	if err != nil {
		return "", nil, "", err
	}
	if admin {
		if err := a.hostAllowed(r); err != nil {
			return "", nil, "", err
		}
	}
	id, err := hostedID(r)
	if err != nil {
		return "", nil, "", err
	}
	return p, h, id, nil
}

func hostedID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !hostedRef.MatchString(id) {
		return "", switchboard.Errorf(switchboard.ErrNotFound, "hosted server not found (use its id or name)")
	}
	return id, nil
}

func (a *API) listHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, err := a.hostedProject(r)
	if err != nil {
		return err
	}
	list, err := h.List(r.Context(), p)
	if err != nil {
		return err
	}
	for i := range list {
		list[i] = a.shownHosted(r, list[i])
	}
	writeJSON(w, http.StatusOK, apiclient.HostedList{Servers: list})
	return nil
}

func (a *API) createHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, err := a.hostedProject(r)
	if err != nil {
		return err
	}
	if err := a.hostAllowed(r); err != nil {
		return err
	}
	var in switchboard.HostedRegistration
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if in.Origin != "" {
		return switchboard.Errorf(switchboard.ErrInvalid, "origin is set by the gateway; leave it out")
	}
	st, err := h.Register(r.Context(), p, in)
	if err != nil {
		return err
	}
	a.log.Info("hosted server registered", "project", p, "server", st.Name, "image", st.Image)
	writeJSON(w, http.StatusCreated, a.shownHosted(r, st))
	return nil
}

func (a *API) getHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, id, err := a.hostedTarget(r, false)
	if err != nil {
		return err
	}
	st, err := h.Get(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.shownHosted(r, st))
	return nil
}

func (a *API) deleteHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, id, err := a.hostedTarget(r, true)
	if err != nil {
		return err
	}
	keep := false
	if v := r.URL.Query().Get("keep_volumes"); v != "" {
		if keep, err = strconv.ParseBool(v); err != nil {
			return switchboard.Errorf(switchboard.ErrInvalid, "keep_volumes must be true or false")
		}
	}
	if err := h.Delete(r.Context(), p, id, keep); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) restartHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, id, err := a.hostedTarget(r, true)
	if err != nil {
		return err
	}
	st, err := h.Restart(r.Context(), p, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.shownHosted(r, st))
	return nil
}

func (a *API) hostedLogs(w http.ResponseWriter, r *http.Request) error {
	p, h, id, err := a.hostedTarget(r, true)
	if err != nil {
		return err
	}
	lines := 200
	if v := r.URL.Query().Get("tail"); v != "" {
		if lines, err = strconv.Atoi(v); err != nil || lines < 1 || lines > 10000 {
			return switchboard.Errorf(switchboard.ErrInvalid, "tail must be a number of lines from 1 to 10000")
		}
	}
	out, err := h.Logs(r.Context(), p, id, lines)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, apiclient.HostedLogs{Logs: out})
	return nil
}

func (a *API) callHosted(w http.ResponseWriter, r *http.Request) error {
	p, h, id, err := a.hostedTarget(r, true)
	if err != nil {
		return err
	}
	var in apiclient.HostedCall
	if err := a.decode(w, r, &in, false); err != nil {
		return err
	}
	if in.Method == "" {
		return switchboard.Errorf(switchboard.ErrInvalid, "method is required, such as \"tools/list\"")
	}
	res, err := h.Call(r.Context(), p, id, in.Method, in.Params)
	var rpcErr *switchboard.RPCError
	if errors.As(err, &rpcErr) {
		status, code := rpcStatus(rpcErr.Code)
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"code": code, "message": "the server answered with JSON-RPC error " + strconv.Itoa(rpcErr.Code) + ": " + switchboard.Clip(rpcErr.Message),
			"jsonrpc": rpcErr,
		}})
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"result": res})
	return nil
}

// rpcStatus is the HTTP status and API code for a server's JSON-RPC
// error code: the caller's mistakes are 4xx, the server's own failures 502.
func rpcStatus(code int) (int, string) {
	switch code {
	case switchboard.CodeParseError, switchboard.CodeInvalidRequest, switchboard.CodeInvalidParams:
		return http.StatusBadRequest, "invalid"
	case switchboard.CodeMethodNotFound:
		return http.StatusNotFound, "not_found"
	default:
		return http.StatusBadGateway, "upstream_error"
	}
}
