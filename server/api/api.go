// Package api is Switchboard's admin REST API under /api/v1/: projects,
// their servers, product manifests, write-only secrets, tokens, tools,
// status and the tool-call history. Every error has one JSON shape,
// {"error": {"code": "...", "message": "..."}}, with a message that says
// what to fix and never carries a secret value.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/httpbody"
)

// Projects is the live side of the gateway that the API changes.
type Projects interface {
	// Reconcile applies a project's stored servers and secrets now.
	Reconcile(ctx context.Context, project string) error
	// Status reports a project's servers (secret values redacted).
	Status(ctx context.Context, project string) ([]switchboard.ServerStatus, error)
	// Tools returns a project's tool catalog.
	Tools(ctx context.Context, project string) (*switchboard.Catalog, error)
	// FileServer reports whether the servers file configures this server
	// name in the project (such a name is not free for stored servers).
	FileServer(project, name string) bool
	// HostedServer reports whether a hosted server of the project has
	// this name (such a name is not free for stored servers either).
	HostedServer(project, name string) bool
	// ParseServer reads a server entry (one mcpServers member) as the
	// gateway will run it, with getenv standing in for secrets and the
	// environment. A nil spec means the entry says "disabled"; errors
	// wrap ErrInvalid.
	ParseServer(name string, entry json.RawMessage, getenv func(string) string) (*switchboard.ServerSpec, error)
}

// Access authenticates and authorizes requests.
type Access interface {
	// Authenticate returns r with its sender attached, or an error wrapping
	// ErrUnauthorized.
	Authenticate(r *http.Request) (*http.Request, error)
	// AllowAdmin: may the sender take this admin action?
	AllowAdmin(r *http.Request, what string) error
	// AllowProject: may the sender reach this project?
	AllowProject(r *http.Request, project string) error
	// AllowCommands: may the sender configure what the gateway runs on
	// its host (stdio servers)?
	AllowCommands(r *http.Request) error
	// AllowTokens: may the sender list, create and revoke this project's
	// tokens?
	AllowTokens(r *http.Request, project string) error
}

// Sealer encrypts a secret value for its slot.
type Sealer interface {
	Seal(project, name string, plaintext []byte) ([]byte, error)
}

// Options wire the API.
type Options struct {
	Store    switchboard.Store
	Projects Projects
	Access   Access
	Secrets  Sealer
	// NewToken mints a project token and its hash.
	NewToken func() (token string, hash []byte)
	// TokensChanged is told after a project's tokens changed.
	TokensChanged func(project string)
	MaxBodyBytes  int64 // default 4 MiB
	Logger        *slog.Logger
	// Reload re-reads the servers file as SIGHUP does and reports how
	// many servers it now configures; nil when there is none to reload.
	Reload func(ctx context.Context) (servers int, err error)
	// Hosted serves the hosted-server routes; nil answers them 503.
	Hosted Hosted
	// Sandbox serves the workspace and sandbox-switch routes; nil: they
	// answer 404.
	Sandbox Sandbox
	// Teardown finds and removes what a project runs and keeps on the
	// engine when it is deleted; nil: deleting a project removes its rows
	// only.
	Teardown Teardown
	// Pulls lists the image pulls under way that a project waits for
	// (its hosted and catalog servers', and the sandbox's); nil: none.
	Pulls func(project string) []switchboard.PullProgress
}

// Teardown is what deleting a project needs from the container side.
type Teardown interface {
	// ProjectUsage describes what project runs or keeps (sandbox
	// sessions, hosted servers, workspaces, containers, volumes), one
	// item per kind; none when it has nothing.
	ProjectUsage(ctx context.Context, project string) ([]string, error)
	// DeleteProject stops and removes all of it, once its rows are gone.
	DeleteProject(ctx context.Context, project string) error
}

// API serves /api/v1/.
type API struct {
	opts Options
	st   switchboard.Store
	log  *slog.Logger
	mux  *http.ServeMux
}

// Limits on what the API stores.
const (
	maxSecretBytes = 64 << 10
	maxTextBytes   = 1024
)

var (
	projectID  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	productID  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)
	// serverName is the servers file's rule (Projects.ParseServer applies it
	// too); checked here first so a bad name is never echoed whole.
	serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
)

// route is one (method, path) the API serves.
type route struct {
	method, path string
	public       bool // no token needed
	fn           func(w http.ResponseWriter, r *http.Request) error
}

// New returns the API.
func New(opts Options) *API {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TokensChanged == nil {
		opts.TokensChanged = func(string) {}
	}
	a := &API{opts: opts, st: opts.Store, log: opts.Logger, mux: http.NewServeMux()}
	byPath := map[string][]route{}
	var order []string
	for _, rt := range a.routes() {
		if _, ok := byPath[rt.path]; !ok {
			order = append(order, rt.path)
		}
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for _, p := range order {
		a.mux.Handle(p, a.methods(byPath[p]))
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, a.log, switchboard.Errorf(switchboard.ErrNotFound, "no such API endpoint; see GET /api/v1/openapi.json"))
	})
	return a
}

func (a *API) routes() []route {
	const p = "/api/v1/projects/{project}"
	return append([]route{
		{method: "GET", path: "/api/v1/openapi.json", public: true, fn: a.openAPI},
		{method: "POST", path: "/api/v1/reload", fn: a.reload},
		{method: "GET", path: "/api/v1/projects", fn: a.listProjects},
		{method: "POST", path: "/api/v1/projects", fn: a.createProject},
		{method: "GET", path: p, fn: a.getProject},
		{method: "PATCH", path: p, fn: a.updateProject},
		{method: "DELETE", path: p, fn: a.deleteProject},
		{method: "GET", path: p + "/servers", fn: a.listServers},
		{method: "POST", path: p + "/servers", fn: a.createServer},
		{method: "GET", path: p + "/servers/{name}", fn: a.getServer},
		{method: "PATCH", path: p + "/servers/{name}", fn: a.updateServer},
		{method: "DELETE", path: p + "/servers/{name}", fn: a.deleteServer},
		{method: "PUT", path: p + "/products/{product}", fn: a.importManifest},
		{method: "DELETE", path: p + "/products/{product}", fn: a.deleteProduct},
		{method: "GET", path: p + "/secrets", fn: a.listSecrets},
		{method: "PUT", path: p + "/secrets/{name}", fn: a.putSecret},
		{method: "DELETE", path: p + "/secrets/{name}", fn: a.deleteSecret},
		{method: "GET", path: p + "/tokens", fn: a.listTokens},
		{method: "POST", path: p + "/tokens", fn: a.createToken},
		{method: "DELETE", path: p + "/tokens/{id}", fn: a.revokeToken},
		{method: "GET", path: p + "/tools", fn: a.listTools},
		{method: "GET", path: p + "/status", fn: a.status},
		{method: "GET", path: p + "/tool-calls", fn: a.listToolCalls},
	}, append(a.hostedRoutes(), a.sandboxRoutes(p)...)...)
}

// methods dispatches one path by method: 405 with Allow and the JSON
// error body for the others, authentication before everything but public
// routes, and project access checked for every /projects/{project} route.
func (a *API) methods(rs []route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(rs, func(rt route) bool { return rt.method == r.Method })
		if i < 0 {
			allow := make([]string, len(rs))
			for j, rt := range rs {
				allow[j] = rt.method
			}
			w.Header().Set("Allow", strings.Join(allow, ", "))
			writeError(w, a.log, &statusError{http.StatusMethodNotAllowed, "method_not_allowed", r.Method + " is not allowed here; use " + strings.Join(allow, ", ")})
			return
		}
		rt := rs[i]
		if !rt.public {
			var err error
			if r, err = a.opts.Access.Authenticate(r); err != nil {
				writeError(w, a.log, err)
				return
			}
			if p := r.PathValue("project"); p != "" {
				if !projectID.MatchString(p) {
					writeError(w, a.log, switchboard.Errorf(switchboard.ErrNotFound, "project not found (project IDs are lowercase letters, digits, '_' and '-')"))
					return
				}
				// Token routes too: the admin reaches every project, and
				// in dev mode an anonymous client must not mint itself a
				// token for a project that its tokens closed.
				if err := a.opts.Access.AllowProject(r, p); err != nil {
					writeError(w, a.log, err)
					return
				}
			}
		}
		if err := rt.fn(w, r); err != nil {
			writeError(w, a.log, err)
		}
	})
}

// ServeHTTP serves /api/v1/.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Routes lists the (method, path) pairs the API serves, for tests that
// hold the OpenAPI document to the implementation.
func (a *API) Routes() [][2]string {
	var out [][2]string
	for _, rt := range a.routes() {
		out = append(out, [2]string{rt.method, rt.path})
	}
	return out
}

// statusError is an HTTP-level error with its own status and code.
type statusError struct {
	status int
	code   string
	msg    string
}

func (e *statusError) Error() string { return e.msg }

// errorCodes maps domain errors to HTTP statuses and API error codes; the
// first match wins and anything else is an internal error.
var errorCodes = []struct {
	kind   error
	status int
	code   string
}{
	{switchboard.ErrInvalid, http.StatusBadRequest, "invalid"},
	{switchboard.ErrConfig, http.StatusBadRequest, "invalid"},
	{switchboard.ErrUnauthorized, http.StatusUnauthorized, "unauthorized"},
	{switchboard.ErrForbidden, http.StatusForbidden, "forbidden"},
	{switchboard.ErrNotFound, http.StatusNotFound, "not_found"},
	{switchboard.ErrConflict, http.StatusConflict, "conflict"},
	// A cap on what a project runs (sandbox sessions, catalog
	// containers): the request is fine, the project's state refuses it
	// until something is stopped. 409, not 429: retrying later does not
	// help by itself. A body over the limit is 413 too_large (tooLarge).
	{switchboard.ErrResourceLimit, http.StatusConflict, "limit_reached"},
	{switchboard.ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{switchboard.ErrTimeout, http.StatusGatewayTimeout, "timeout"},
	{switchboard.ErrCanceled, http.StatusServiceUnavailable, "unavailable"},
}

// toStatus maps err to its HTTP status, API code and client-safe message.
func toStatus(err error) (int, string, string) {
	var se *statusError
	if errors.As(err, &se) {
		return se.status, se.code, se.msg
	}
	for _, c := range errorCodes {
		if errors.Is(err, c.kind) {
			return c.status, c.code, switchboard.Message(err)
		}
	}
	return http.StatusInternalServerError, "internal", "internal error; the gateway log has the details"
}

func writeError(w http.ResponseWriter, log *slog.Logger, err error) {
	status, code, msg := toStatus(err)
	if status >= 500 {
		log.Error("admin API request failed", "status", status, "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard"`)
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON body into v: Content-Type application/json (or
// none), at most MaxBodyBytes, one value, no unknown fields unless loose.
func (a *API) decode(w http.ResponseWriter, r *http.Request, v any, loose bool) error {
	// Required, not assumed: a browser can send a cross-origin POST without
	// a preflight only with a "simple" Content-Type (or none).
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return &statusError{http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json (with curl: -H 'Content-Type: application/json')"}
	}
	if r.ContentLength > a.opts.MaxBodyBytes {
		return a.tooLarge()
	}
	body, err := httpbody.Read(w, r, a.opts.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return a.tooLarge()
		}
		return switchboard.Errorf(switchboard.ErrInvalid, "the request body did not arrive in full within %s; send it at once, with a correct Content-Length", httpbody.Timeout)
	}
	if !utf8.Valid(body) {
		return switchboard.Errorf(switchboard.ErrInvalid, "the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if !loose {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "the request body is not the expected JSON: %s", jsonProblem(err))
	}
	// Not dec.More(): it reports false before a stray '}' or ']'.
	if rest := bytes.Trim(body[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return switchboard.Errorf(switchboard.ErrInvalid, "the request body must hold exactly one JSON value; found more after byte %d", dec.InputOffset())
	}
	return nil
}

func (a *API) tooLarge() error {
	return &statusError{http.StatusRequestEntityTooLarge, "too_large", "request body exceeds the limit of " + strconv.FormatInt(a.opts.MaxBodyBytes, 10) + " bytes (MCP_SERVER_MAX_BODY_BYTES)"}
}

// maxJSONDepth is encoding/json's nesting limit (maxNestingDepth).
const maxJSONDepth = 10000

// jsonProblem describes a decoding error without quoting the body.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se) && strings.HasSuffix(se.Error(), "exceeded max depth"):
		// encoding/json's fixed limit; the offset would only say where.
		return "it is nested more than " + strconv.Itoa(maxJSONDepth) + " levels deep"
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	case errors.As(err, &te):
		return "field " + strconv.Quote(te.Field) + " must be " + te.Type.String()
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return "unknown field " + strconv.Quote(switchboard.Clip(field)) + " (check the spelling)"
	}
	return "malformed JSON"
}

// text checks a free-text field.
func text(field, v string) error {
	if len(v) > maxTextBytes || strings.ContainsRune(v, 0) {
		return switchboard.Errorf(switchboard.ErrInvalid, "%s must be at most %d bytes of text", field, maxTextBytes)
	}
	return nil
}

// boolParam reads an optional true/false query parameter. Errors:
// ErrInvalid.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	switch v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	}
	return false, switchboard.Errorf(switchboard.ErrInvalid, "query parameter %s must be true or false", name)
}

// reconcile applies a project's change now. The change is stored either
// way; if applying fails, the periodic sync retries it.
func (a *API) reconcile(ctx context.Context, project string) {
	if err := a.opts.Projects.Reconcile(ctx, project); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		a.log.Warn("stored change not applied yet; the periodic sync will retry", "project", project, "err", err)
	}
}

// placeholders stand in for every `${VAR}` when a server entry is checked
// at write time; real values are resolved when the server connects. The
// second one covers a reference that holds the whole URL, or its scheme and
// host ("${BASE}/mcp"); the first the references inside a URL
// ("https://${HOST}/mcp", "http://localhost:${PORT}").
var placeholders = []func(string) string{
	func(string) string { return "1" },
	func(string) string { return "https://1" },
}

// parseEntry checks a server entry as the gateway will read it.
func (a *API) parseEntry(name string, entry json.RawMessage) (switchboard.Transport, error) {
	if !serverName.MatchString(name) {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "server %q: name must be 1-64 letters, digits, '_', '-' or '.', starting with a letter or digit", switchboard.Clip(name))
	}
	if len(entry) == 0 || entry[0] != '{' {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "server %q: config must be a JSON object such as {\"command\": \"npx\", \"args\": [...]} or {\"url\": \"https://...\"}", name)
	}
	var spec *switchboard.ServerSpec
	var err error
	for i, getenv := range placeholders {
		s, e := a.opts.Projects.ParseServer(name, entry, getenv)
		if i == 0 {
			spec, err = s, e // report what the first attempt found
		}
		if e == nil {
			spec, err = s, nil
			break
		}
	}
	if err != nil {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "%s", strings.TrimPrefix(err.Error(), switchboard.ErrInvalid.Error()+": "))
	}
	if spec == nil {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "server %q: use \"enabled\": false instead of \"disabled\" inside config", name)
	}
	return spec.Transport, nil
}

// stdioAllowed: a stdio server runs a command on the gateway's host, so
// creating or changing one is an admin action.
func (a *API) stdioAllowed(r *http.Request, tr switchboard.Transport) error {
	if tr != switchboard.TransportStdio {
		return nil
	}
	return a.opts.Access.AllowCommands(r)
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
