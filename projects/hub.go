// Package projects runs one gateway per project behind one listener: each
// project has its own upstream pool (an upstreams.Manager) and its own MCP
// edge (a server.Server mounted at /projects/{p}/), built from the
// project's server rows and secrets in the store. "default" also gets the
// servers of the servers file and serves /mcp.
//
// The store is the source of truth. A change made through the admin API is
// applied at once on the replica that took it (Reconcile); every replica
// also re-reads the store every SyncInterval, so replicas sharing one
// PostgreSQL converge without talking to each other.
package projects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/server"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// Default is the project of /mcp and of the servers file.
const Default = "default"

// Options configure a Hub.
type Options struct {
	Store switchboard.Store
	// Box decrypts project secrets.
	Box *secrets.Box
	// Upstreams and Edge are templates for each project's manager and
	// edge; the hub sets their per-project fields (logger, OnState,
	// Project, BasePath, Principal, OpenSessions).
	Upstreams upstreams.Options
	Edge      server.Options
	// OnState, when set, hears every server state change of every project.
	OnState func(project, server string, st switchboard.ServerState)
	// OnRemoved, when set, hears that a server is gone from a project (its
	// state reports end), or with server "" that the whole project is.
	OnRemoved func(project, server string)
	// OnSessionEnd, when set, hears every client session of every project
	// that ends (server.Options.OnSessionEnd: once per session; a DELETE,
	// idle expiry, a dropped legacy SSE stream, shutdown, or the project
	// being deleted). It must not block for long.
	OnSessionEnd func(project, session string)
	// SessionTools, when set, gives each project's edge the tools single
	// client sessions add to their own view (server.Options.SessionTools);
	// it is called once when the project's runtime is created.
	SessionTools func(project string) server.SessionTools
	// Streams, when set, gives each project's manager the opener of its
	// hosted servers' streams (upstreams.Options.Streams); it is called
	// once when the project's runtime is created.
	Streams func(project string) upstreams.StreamOpener
	// Builtins, when set, gives each project's manager its built-in
	// servers (name -> builtin), applied when the project's runtime is
	// created; SetBuiltin changes them later. It is called with the hub's
	// lock held and must not call back into the Hub.
	Builtins func(project string) map[string]upstreams.Builtin
	// HostedSpecs, when set, returns a project's hosted servers, served
	// after its file and stored servers (projects/hosted.go).
	HostedSpecs func(project string) []switchboard.ServerSpec
	// HostedStatus, when set, returns a hosted server's own status without
	// asking the engine (a failed pull shows before any client connects).
	HostedStatus func(project, name string) (switchboard.HostedStatus, bool)
	// AdminToken, when set, is required for admin actions and opens every
	// project; empty is dev mode (see Access).
	AdminToken string
	// Auth, when enabled (MCP_SERVER_PUBLIC_URL and _AUTH_ISSUER), makes
	// each project an OAuth protected resource that accepts the issuer's
	// JWT access tokens beside the static tokens (projects/oauth.go).
	Auth config.Auth
	// AuthClient fetches the issuer's metadata and keys; nil is a client
	// with a 5s timeout.
	AuthClient *http.Client
	// Getenv is the fallback for `${VAR}` after the project's secrets;
	// MCP_SERVER_* variables are never handed to project servers.
	Getenv       func(string) string
	SyncInterval time.Duration // default 5s
	Logger       *slog.Logger
}

// Hub owns every project's runtime.
type Hub struct {
	opts Options
	log  *slog.Logger
	st   switchboard.Store
	auth *auth

	mu       sync.Mutex
	runtimes map[string]*runtime
	def      *runtime                 // Default's, also after Close
	file     []switchboard.ServerSpec // servers file, for Default
	closed   bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// runtime is one project's pool and edge.
type runtime struct {
	id     string
	mgr    *upstreams.Manager
	edge   *server.Server
	redact *secrets.Redactor
	mu     sync.Mutex // serializes Reconcile of this project, store reads included
	// redacted holds every secret value this runtime has used, under mu.
	// Values are never dropped: a server started with an old value can
	// still log it after a change (a connect attempt in flight, a line of
	// stderr), and a value that was a secret stays one.
	redacted map[string]bool
	// applied is the set of server names last applied, under mu.
	applied map[string]bool
	// last is what the store remembers of its servers' states.
	last lastStates
	// hosted, when set, is a hosted server's own status (no engine call).
	hosted func(name string) (switchboard.HostedStatus, bool)
}

// New returns a hub with the default project's runtime in place; call
// Start to load the store and begin syncing.
func New(opts Options) *Hub {
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{opts: opts, log: opts.Logger, st: opts.Store, runtimes: map[string]*runtime{}, ctx: ctx, cancel: cancel}
	h.auth = newAuth(opts.Store, opts.AdminToken)
	if opts.Auth.Enabled() {
		h.auth.oauth = newOAuth(opts.Auth, opts.AuthClient)
	}
	h.def = h.newRuntime(Default)
	h.runtimes[Default] = h.def
	return h
}

func (h *Hub) newRuntime(id string) *runtime {
	rt := &runtime{id: id, redact: &secrets.Redactor{}, redacted: map[string]bool{}}
	log := slog.New(rt.redact.Handler(h.log.Handler())).With("project", id)
	uo := h.opts.Upstreams
	uo.Logger = log
	uo.OnState = func(server string, st switchboard.ServerState) {
		if h.opts.OnState != nil {
			h.opts.OnState(id, server, st)
		}
		if remembered(st) && rt.mgr != nil {
			rt.last.record(h.st, id, server, st, rt.redact.Redact(rt.mgr.LastError(server)))
		}
	}
	if h.opts.HostedStatus != nil {
		rt.hosted = func(name string) (switchboard.HostedStatus, bool) { return h.opts.HostedStatus(id, name) }
	}
	if h.opts.Streams != nil {
		uo.Streams = h.opts.Streams(id)
	}
	rt.mgr = upstreams.New(uo)
	if h.opts.Builtins != nil {
		for name, b := range h.opts.Builtins(id) {
			rt.mgr.SetBuiltin(name, b)
		}
	}
	eo := h.opts.Edge
	eo.Project = id
	eo.Logger = log
	eo.Principal = principalKey
	eo.Person = personOf
	eo.OpenSessions = h.Sessions
	if h.opts.OnSessionEnd != nil {
		eo.OnSessionEnd = func(session string) { h.opts.OnSessionEnd(id, session) }
	}
	if h.opts.SessionTools != nil {
		eo.SessionTools = h.opts.SessionTools(id)
	}
	if eo.Observer != nil {
		eo.Observer = redactingObserver{eo.Observer, rt.redact}
	}
	if id != Default {
		eo.BasePath = "/projects/" + id
		eo.Metrics = nil
	}
	rt.edge = server.New(rt, eo)
	rt.mgr.OnToolsChanged(rt.edge.ToolsChanged)
	rt.mgr.OnEvents(upstreams.Events{PromptsChanged: rt.edge.PromptsChanged, ResourcesChanged: rt.edge.ResourcesChanged,
		ResourceUpdated: rt.edge.ResourceUpdated, Log: rt.edge.LogMessage})
	return rt
}

// redactingObserver removes the project's secret values from a call's
// arguments before the call log (or anything else) sees them: a client
// may pass a secret under an innocent name ({"text": "<token>"}), which
// the call log's own name-based redaction cannot know.
type redactingObserver struct {
	next   server.Observer
	redact *secrets.Redactor
}

func (o redactingObserver) ObserveCall(rec switchboard.ToolCallRecord) {
	rec.Arguments = o.redact.RedactJSON(rec.Arguments)
	o.next.ObserveCall(rec)
}

// ObserveFeature passes prompt gets and resource reads on, redacted as
// calls are, when the observer records them (server.FeatureObserver).
func (o redactingObserver) ObserveFeature(rec switchboard.ToolCallRecord, kind string) {
	if f, ok := o.next.(server.FeatureObserver); ok {
		rec.Arguments = o.redact.RedactJSON(rec.Arguments)
		f.ObserveFeature(rec, kind)
	}
}

// Start applies the servers file and every project in the store, then
// re-reads the store every SyncInterval until Close. A store that cannot
// be read at start is an error: the gateway would serve nothing of it.
func (h *Hub) Start(ctx context.Context, file []switchboard.ServerSpec) error {
	h.mu.Lock()
	h.file = file
	h.mu.Unlock()
	if err := h.SyncAll(ctx); err != nil {
		return err
	}
	h.wg.Go(h.syncLoop)
	return nil
}

// FileServer reports whether the servers file configures server name in
// project id (only Default has file servers).
func (h *Hub) FileServer(id, name string) bool {
	if id != Default {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.file, func(s switchboard.ServerSpec) bool { return s.Name == name })
}

// SetFile replaces the servers of the servers file (SIGHUP).
func (h *Hub) SetFile(ctx context.Context, file []switchboard.ServerSpec) error {
	h.mu.Lock()
	h.file = file
	h.mu.Unlock()
	return h.Reconcile(ctx, Default)
}

func (h *Hub) syncLoop() {
	t := time.NewTicker(h.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		// A round may wait for replacements to connect (Apply), so it is
		// not held to the interval; the next round starts after it ends.
		ctx, cancel := context.WithTimeout(h.ctx, max(h.opts.SyncInterval*4, time.Minute))
		if err := h.SyncAll(ctx); err != nil && h.ctx.Err() == nil {
			h.log.Warn("re-reading projects from the store failed; serving the last known configuration", "err", err)
		}
		cancel()
	}
}

// SyncAll brings every project in line with the store: new projects get a
// runtime, deleted ones lose theirs, and each one's servers are applied.
func (h *Hub) SyncAll(ctx context.Context) error {
	// Only runtimes that existed before the listing may be removed: one
	// the API created meanwhile is for a project the listing missed.
	h.mu.Lock()
	before := maps.Clone(h.runtimes)
	h.mu.Unlock()
	list, err := h.st.ListProjects(ctx)
	if err != nil {
		return fmt.Errorf("listing projects: %w", err)
	}
	ids := map[string]bool{Default: true}
	var errs []error
	for _, p := range list {
		ids[p.ID] = true
		if err := h.Reconcile(ctx, p.ID); err != nil {
			errs = append(errs, err)
		}
	}
	h.mu.Lock()
	var gone []*runtime
	for id, rt := range h.runtimes {
		if !ids[id] && before[id] == rt {
			gone = append(gone, rt)
			delete(h.runtimes, id)
		}
	}
	h.mu.Unlock()
	for _, rt := range gone {
		h.stop(ctx, rt)
		h.auth.forget(rt.id) // a project re-created under this id starts without them
	}
	h.auth.expire()
	return errors.Join(errs...)
}

// Reconcile applies project id's servers as the store has them now; only
// servers whose resolved configuration changed reconnect. A project that
// no longer exists is stopped. Errors wrap ErrNotFound when id is unknown.
func (h *Hub) Reconcile(ctx context.Context, id string) error {
	rt := h.runtime(id, false)
	if rt == nil {
		if _, err := h.st.GetProject(ctx, id); err != nil && id != Default {
			return err
		}
		if rt = h.runtime(id, true); rt == nil {
			return switchboard.Errorf(switchboard.ErrUnavailable, "shutting down")
		}
	}
	// One reconcile per project at a time, from reading the store to
	// applying: a slow sync that read the store before an API change must
	// not apply its older view after the API's reconcile.
	rt.mu.Lock()
	defer rt.mu.Unlock()
	records, err := h.st.ListServers(ctx, id)
	if errors.Is(err, switchboard.ErrNotFound) && id != Default {
		h.remove(ctx, id)
		return err
	}
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		return fmt.Errorf("project %q: listing servers: %w", id, err)
	}
	values, err := h.secretValues(ctx, id)
	if err != nil {
		return err
	}
	// Only stdio servers read the gateway's environment after the
	// project's secrets. Configuring one takes the admin token, but a
	// project token may add a remote server, whose URL and headers would
	// otherwise carry any of the gateway's variables wherever it points.
	secretsOnly := func(name string) string { return values[name] }
	getenv := func(name string) string {
		if v, ok := values[name]; ok {
			return v
		}
		if strings.HasPrefix(name, "MCP_SERVER_") {
			return ""
		}
		return h.opts.Getenv(name)
	}
	var specs []switchboard.ServerSpec
	if id == Default {
		h.mu.Lock()
		specs = append(specs, h.file...)
		h.mu.Unlock()
	}
	for _, rec := range records {
		if !rec.Enabled || slices.ContainsFunc(specs, func(s switchboard.ServerSpec) bool { return s.Name == rec.Name }) {
			continue
		}
		spec, err := config.ParseServer(rec.Name, rec.Config, secretsOnly)
		if err == nil && spec != nil && spec.Transport == switchboard.TransportStdio {
			spec, err = config.ParseServer(rec.Name, rec.Config, getenv)
		}
		switch {
		case err != nil:
			spec = &switchboard.ServerSpec{Name: rec.Name, Transport: rec.Transport,
				Err: switchboard.Errorf(switchboard.ErrConfig, "%s", switchboard.Message(err))}
		case spec == nil: // "disabled": true inside the entry
			continue
		case spec.Err != nil && spec.Transport == switchboard.TransportStdio:
			spec.Err = switchboard.Errorf(switchboard.ErrConfig, "%s; set it as a secret of project %q or in the gateway's environment", switchboard.Message(spec.Err), id)
		case spec.Err != nil:
			spec.Err = switchboard.Errorf(switchboard.ErrConfig, "%s; set it as a secret of project %q (remote servers do not read the gateway's environment)", switchboard.Message(spec.Err), id)
		}
		specs = append(specs, *spec)
	}
	for _, v := range values {
		rt.redacted[v] = true
	}
	// A server that prints its command line or configuration when it
	// fails must not show the credentials in it, as its config is shown
	// masked (secrets.Credentials: credential flags and URL credentials in
	// args, credential-named env values and headers).
	for _, sp := range specs {
		env := maps.Clone(sp.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, sp.Headers)
		for _, v := range secrets.Credentials(append([]string{sp.Command, sp.URL}, sp.Args...), env) {
			rt.redacted[v] = true
		}
	}
	rt.redact.Set(slices.Collect(maps.Keys(rt.redacted)))
	specs = h.hostedSpecs(id, specs)
	rt.mgr.Apply(ctx, specs)
	applied := make(map[string]bool, len(specs))
	for _, sp := range specs {
		applied[sp.Name] = true
	}
	for name := range rt.applied {
		if !applied[name] && h.opts.OnRemoved != nil {
			h.opts.OnRemoved(id, name)
		}
	}
	rt.applied = applied
	return nil
}

// secretValues decrypts a project's secrets. One that cannot be decrypted
// (another MCP_SERVER_SECRET_KEY) is left out and logged by name.
func (h *Hub) secretValues(ctx context.Context, id string) (map[string]string, error) {
	list, err := h.st.ListSecrets(ctx, id)
	if errors.Is(err, switchboard.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("project %q: listing secrets: %w", id, err)
	}
	out := make(map[string]string, len(list))
	for _, s := range list {
		v, err := h.opts.Box.Open(id, s.Name, s.Ciphertext)
		if err != nil {
			h.log.Error("secret cannot be decrypted; servers that use it will not start", "project", id, "secret", s.Name, "err", err)
			continue
		}
		out[s.Name] = string(v)
	}
	return out, nil
}

// runtime returns project id's runtime, creating it when create is set.
// It returns nil after Close.
func (h *Hub) runtime(id string, create bool) *runtime {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	rt := h.runtimes[id]
	if rt == nil && create {
		rt = h.newRuntime(id)
		h.runtimes[id] = rt
	}
	return rt
}

func (h *Hub) remove(ctx context.Context, id string) {
	h.mu.Lock()
	rt := h.runtimes[id]
	delete(h.runtimes, id)
	h.mu.Unlock()
	if rt != nil {
		h.stop(ctx, rt)
	}
	h.auth.forget(id)
}

func (h *Hub) stop(ctx context.Context, rt *runtime) {
	_ = rt.edge.Shutdown(ctx)
	_ = rt.mgr.Close(ctx)
	if h.opts.OnRemoved != nil {
		h.opts.OnRemoved(rt.id, "")
	}
}

// lookup returns a project's runtime, asking the store when this replica
// has not seen the project yet (another replica may have created it).
func (h *Hub) lookup(ctx context.Context, id string) (*runtime, error) {
	if rt := h.runtime(id, false); rt != nil {
		return rt, nil
	}
	if _, err := h.st.GetProject(ctx, id); err != nil {
		return nil, err
	}
	if err := h.Reconcile(ctx, id); err != nil {
		return nil, err
	}
	if rt := h.runtime(id, false); rt != nil {
		return rt, nil
	}
	return nil, switchboard.Errorf(switchboard.ErrNotFound, "project %q not found", id)
}

// Status reports a project's servers with secret values redacted.
func (h *Hub) Status(ctx context.Context, id string) ([]switchboard.ServerStatus, error) {
	rt, err := h.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	rt.last.load(ctx, h.st, id)
	return rt.Status(), nil
}

// Status is the manager's status with secret values redacted: an error
// or stderr line may quote a URL or header built from a secret. The
// stderr tail is cut from a longer stream, so a piece of a value at
// either edge is redacted too (RedactTail).
//
// A server this process has not connected yet (idle) shows what is known
// of it elsewhere: a hosted server's own failure (a pull that failed), or
// the state the gateway last saw it in (lastStates).
func (rt *runtime) Status() []switchboard.ServerStatus {
	out := rt.mgr.Status()
	rt.last.fill(out)
	for i := range out {
		if rt.hosted != nil && out[i].State == switchboard.StateIdle {
			if hs, ok := rt.hosted(out[i].Name); ok && hs.Status == switchboard.HostedFailed {
				out[i].State, out[i].LastError, out[i].SeenAt = switchboard.StateFailed, hs.LastError, nil
			}
		}
		out[i].LastError = rt.redact.Redact(out[i].LastError)
		out[i].Stderr = rt.redact.RedactTail(out[i].Stderr)
	}
	return out
}

// The edge's view of a project: the manager, with Status redacted.
func (rt *runtime) Tools(ctx context.Context) *switchboard.Catalog { return rt.mgr.Tools(ctx) }
func (rt *runtime) Catalog() *switchboard.Catalog                  { return rt.mgr.Catalog() }
func (rt *runtime) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	res, err := rt.mgr.Call(ctx, req)
	var rpcErr *switchboard.RPCError
	if err != nil && !errors.As(err, &rpcErr) {
		// Gateway-made messages can quote a URL or header built from a
		// secret (a failed connect); the upstream's own errors pass as is.
		if msg := switchboard.Message(err); rt.redact.Redact(msg) != msg {
			var e *switchboard.Error
			kind := switchboard.ErrInternal
			if errors.As(err, &e) {
				kind = e.Kind
			}
			err = switchboard.Errorf(kind, "%s", rt.redact.Redact(msg))
		}
	}
	return res, err
}

// Feature serves prompts, resources and completion (server.Features),
// with gateway-made messages redacted as for Call.
func (rt *runtime) Feature(ctx context.Context, req switchboard.FeatureRequest) (json.RawMessage, error) {
	res, err := rt.mgr.Feature(ctx, req)
	return res, rt.redactErr(err)
}

// SetLogLevel is the manager's (server.Features).
func (rt *runtime) SetLogLevel(ctx context.Context, level string) { rt.mgr.SetLogLevel(ctx, level) }

// redactErr removes secret values from an error the gateway made; an
// upstream's own JSON-RPC error passes as is.
func (rt *runtime) redactErr(err error) error {
	var rpcErr *switchboard.RPCError
	if err == nil || errors.As(err, &rpcErr) {
		return err
	}
	if msg := switchboard.Message(err); rt.redact.Redact(msg) != msg {
		var e *switchboard.Error
		kind := switchboard.ErrInternal
		if errors.As(err, &e) {
			kind = e.Kind
		}
		return switchboard.Errorf(kind, "%s", rt.redact.Redact(msg))
	}
	return err
}

// Manager returns project id's upstream manager, loading the project from
// the store when this replica has not seen it yet, for what goes past the
// MCP edge: Connect, Request and Busy on hosted servers. Messages it
// returns are not redacted (Status and the edge's calls are): do not pass
// them on to clients when the servers use secrets. Errors wrap ErrNotFound
// (no such project) or ErrUnavailable (shutting down, store down).
func (h *Hub) Manager(ctx context.Context, id string) (*upstreams.Manager, error) {
	rt, err := h.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return rt.mgr, nil
}

// SessionToolsChanged tells one client session of project id that its
// own tool list changed (server.Server.SessionToolsChanged). A project
// without a runtime on this replica has no such session: nothing to do.
func (h *Hub) SessionToolsChanged(id, session string) {
	h.mu.Lock()
	rt := h.runtimes[id]
	h.mu.Unlock()
	if rt != nil {
		rt.edge.SessionToolsChanged(session)
	}
}

// SetBuiltin sets (b == nil: removes) built-in server name of project id
// (upstreams.Manager.SetBuiltin). A project without a runtime on this
// replica is left alone: Options.Builtins applies when it is created.
func (h *Hub) SetBuiltin(id, name string, b upstreams.Builtin) {
	rt := h.runtime(id, false)
	if rt == nil {
		return
	}
	rt.mgr.SetBuiltin(name, b)
	if b == nil && h.opts.OnRemoved != nil {
		h.opts.OnRemoved(id, name) // its state reports end, as for a removed server
	}
}

// Tools returns a project's tool catalog, connecting servers not tried yet.
func (h *Hub) Tools(ctx context.Context, id string) (*switchboard.Catalog, error) {
	rt, err := h.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	return rt.mgr.Tools(ctx), nil
}

// Sessions is the number of open client sessions over all projects.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, rt := range h.runtimes {
		n += rt.edge.Sessions()
	}
	return n
}

// TokensChanged drops what the hub caches about project id's tokens, so a
// revocation takes effect at once on this replica (others within
// tokenCacheTTL).
func (h *Hub) TokensChanged(id string) { h.auth.forget(id) }

// Default returns the default project's edge (status, health, metrics
// and the gateway-wide Origin, CORS and logging layers).
func (h *Hub) Default() *server.Server { return h.def.edge }

// Shutdown ends every project's client sessions and streams, all projects
// at once, each after its legacy calls in flight have answered (first step
// of a graceful stop; streamable calls finish in http.Server.Shutdown).
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	rts := make([]*runtime, 0, len(h.runtimes))
	for _, rt := range h.runtimes {
		rts = append(rts, rt)
	}
	h.mu.Unlock()
	errs := make([]error, len(rts))
	var wg sync.WaitGroup
	for i, rt := range rts {
		wg.Go(func() { errs[i] = rt.edge.Shutdown(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops syncing and closes every project's edge and upstreams; no
// child process outlives it.
func (h *Hub) Close(ctx context.Context) error {
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	h.closed = true
	rts := h.runtimes
	h.runtimes = map[string]*runtime{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, rt := range rts {
		wg.Go(func() {
			_ = rt.edge.Shutdown(ctx)
			if err := rt.mgr.Close(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("project %q: %w", rt.id, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
