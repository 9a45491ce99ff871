package projects

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/switchboard-mcp/switchboard"
)

// Handler is the gateway's whole HTTP surface behind the default edge's
// Origin, Host, CORS and logging layers: api under /api/v1/, each
// project's MCP endpoint under /projects/{p}/, and the default project's
// /mcp, /sse and /message with status, health and metrics, and the
// operator console under /ui/ when one is given. The console authorizes
// nothing itself: it calls the API and the MCP endpoints in process with
// the browser's own token.
func (h *Hub) Handler(api http.Handler, console ...http.Handler) http.Handler {
	def := h.def.edge.Routes()
	mux := http.NewServeMux()
	mux.Handle("/api/v1/", api)
	if len(console) > 0 && console[0] != nil {
		mux.Handle("/ui/", console[0])
	}
	mux.HandleFunc("/projects/{project}/", h.serveProject)
	if o := h.auth.oauth; o != nil {
		mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
			o.metadata(w, Default)
		})
		mux.HandleFunc("GET /.well-known/oauth-protected-resource/projects/{project}/mcp", func(w http.ResponseWriter, r *http.Request) {
			// Anyone may read it: ask the store, and load nothing.
			id := r.PathValue("project")
			if h.runtime(id, false) == nil {
				if _, err := h.st.GetProject(r.Context(), id); errors.Is(err, switchboard.ErrNotFound) {
					http.NotFound(w, r)
					return
				} else if err != nil {
					http.Error(w, "the project cannot be looked up now; retry", http.StatusServiceUnavailable)
					return
				}
			}
			o.metadata(w, id)
		})
	}
	mux.Handle("GET /healthz", def)
	mux.Handle("GET /readyz", def)
	mux.Handle("GET /metrics", h.guard(def, "", func(ctx context.Context, p Principal) error {
		return h.auth.adminOnly(p, "reading metrics")
	}))
	mux.Handle("/", h.guard(def, Default, func(ctx context.Context, p Principal) error {
		return h.auth.project(ctx, p, Default)
	}))
	return h.def.edge.Wrap(mux)
}

// guard authenticates a request, checks it with allow and hands it on
// with its principal in the context (the edge binds sessions to it).
// project names the protected resource a refusal points the client to
// (with an issuer configured); "" for none.
func (h *Hub) guard(next http.Handler, project string, allow func(context.Context, Principal) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := h.auth.authenticate(r)
		if err == nil {
			err = allow(r.Context(), p)
		}
		if err != nil {
			if o := h.auth.oauth; o != nil && project != "" && (errors.Is(err, switchboard.ErrUnauthorized) || errors.As(err, new(insufficientScope))) {
				w.Header().Set("WWW-Authenticate", o.challenge(project, err, r.Header.Get("Authorization") != ""))
			}
			writeAuthError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalCtxKey{}, p)))
	})
}

func (h *Hub) serveProject(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("project")
	h.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, err := h.lookup(r.Context(), id)
		if err != nil {
			if errors.Is(err, switchboard.ErrNotFound) {
				writeRPCError(w, http.StatusNotFound, switchboard.CodeInvalidRequest, "unknown project; create it with POST /api/v1/projects")
				return
			}
			writeRPCError(w, http.StatusServiceUnavailable, switchboard.CodeInternalError, "the project cannot be loaded now; retry")
			return
		}
		rt.edge.Routes().ServeHTTP(w, r)
	}), id, func(ctx context.Context, p Principal) error {
		return h.auth.project(ctx, p, id)
	}).ServeHTTP(w, r)
}

// writeAuthError answers an authentication or authorization failure in
// the JSON-RPC error shape of the MCP endpoints.
func writeAuthError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, switchboard.ErrUnauthorized):
		if w.Header().Get("WWW-Authenticate") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
		}
		writeRPCError(w, http.StatusUnauthorized, switchboard.CodeInvalidRequest, switchboard.Message(err))
	case errors.Is(err, switchboard.ErrForbidden):
		writeRPCError(w, http.StatusForbidden, switchboard.CodeInvalidRequest, switchboard.Message(err))
	default:
		writeRPCError(w, http.StatusServiceUnavailable, switchboard.CodeInternalError, switchboard.Message(err))
	}
}

func writeRPCError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// Authenticate attaches the sender of r to its context, for the admin API.
// Errors wrap ErrUnauthorized (or ErrUnavailable when the store is down).
func (h *Hub) Authenticate(r *http.Request) (*http.Request, error) {
	p, err := h.auth.authenticate(r)
	if err != nil {
		return r, err
	}
	return r.WithContext(context.WithValue(r.Context(), principalCtxKey{}, p)), nil
}

// AllowAdmin reports whether r, as authenticated, may take an admin action
// (what names it in the error): the admin token, or anyone in dev mode.
func (h *Hub) AllowAdmin(r *http.Request, what string) error {
	return h.auth.adminOnly(principalOf(r), what)
}

// AllowProject reports whether r, as authenticated, may reach project id.
func (h *Hub) AllowProject(r *http.Request, id string) error {
	return h.auth.project(r.Context(), principalOf(r), id)
}

// AllowCommands reports whether r may configure stdio servers, which run
// commands on the gateway host: the admin token when one is configured;
// in dev mode anyone who reaches the project.
func (h *Hub) AllowCommands(r *http.Request) error {
	if h.opts.AdminToken == "" {
		return nil
	}
	return h.AllowAdmin(r, "a stdio server runs a command on the gateway host; configuring one")
}

// AllowTokens reports whether r may manage project id's tokens: the admin
// token; in dev mode also an anonymous client while the project is open,
// and the project's own tokens (so a project its tokens closed can still
// be managed without restarting with an admin token).
func (h *Hub) AllowTokens(r *http.Request, id string) error {
	p := principalOf(r)
	if err := h.auth.project(r.Context(), p, id); err != nil {
		return err
	}
	if h.opts.AdminToken == "" && p.Token.ProjectID == id {
		return nil
	}
	return h.auth.adminOnly(p, "managing tokens")
}
