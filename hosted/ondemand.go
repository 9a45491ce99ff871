package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// KindCatalog is the engine.LabelKind value of catalog containers: the
// servers client sessions switch on with mcp-add.
const KindCatalog = "catalog"

// The catalog tools, on every project's endpoint when a catalog is set.
const (
	ToolFind   = "mcp-find"
	ToolAdd    = "mcp-add"
	ToolRemove = "mcp-remove"
)

// endedMemory is how many ended sessions OnDemand remembers, so an
// mcp-add that raced its session's end starts nothing.
const endedMemory = 4096

// OnDemandOptions configure OnDemand.
type OnDemandOptions struct {
	Engine *engine.Engine // nil: no engine; mcp-add says why
	// EngineErr explains why there is no engine (a *switchboard.Error
	// with a client-safe message).
	EngineErr error
	Catalog   *Catalog
	// Secrets returns a project's decrypted secrets, for a catalog entry's
	// secrets and `${NAME}` in its env values.
	Secrets func(ctx context.Context, project string) (map[string]string, error)
	// ProjectCatalog, when set, returns the tools a project serves itself
	// (connecting servers never tried, bounded by ctx), so mcp-add can
	// report which of a server's tools they shadow.
	ProjectCatalog func(ctx context.Context, project string) *switchboard.Catalog
	// Notify tells one client session of a project that its own tool list
	// changed. It must not block.
	Notify func(project, session string)
	// WarmPool is how many started and initialized containers each
	// per-call server keeps ready while a session has it added (0: every
	// call starts a container cold).
	WarmPool int
	// MaxContainers caps the catalog's containers of all sessions and
	// projects together: long-lived ones, per-call ones serving a call,
	// and warm ones (default 20).
	MaxContainers int
	// MaxMessageBytes bounds one message from a catalog server
	// (upstreams.Options.MaxMessageBytes).
	MaxMessageBytes int64
	Version         string
	// CallTimeout bounds one tool call (default 30s), ConnectTimeout the
	// start and initialize of one container (default 30s), StopTimeout
	// its removal (default 10s).
	CallTimeout, ConnectTimeout, StopTimeout time.Duration
	Logger                                   *slog.Logger
}

// OnDemand runs the catalog's servers for the client sessions that ask
// for them (mcp-add): a long-lived server gets one container for the
// session's lifetime, a per-call server a fresh container for every tool
// call, taken from a small warm pool. Every container is bound to a
// session or to a pool in use, and removed when the session ends, the
// server is removed, or the gateway stops: none outlives its owner.
type OnDemand struct {
	opts OnDemandOptions
	eng  *engine.Engine
	cat  *Catalog
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[sessionKey]*sessionState
	ended    map[sessionKey]bool // the last endedMemory sessions that ended
	endedLog []sessionKey        // ring of ended's keys, oldest first
	pools    map[poolKey]*pool
	count    int // containers reserved: starting, warm, serving, long-lived
	long     int // long-lived activations, for status
	closed   bool
	// owning counts sessions with tools of their own: SessionCatalog's
	// lock-free answer for everyone else.
	owning atomic.Int64

	// bg counts background work (retirements, refills), under bgMu; Close
	// and WaitRetired wait for it.
	bgMu   sync.Mutex
	bg     int
	bgDone *sync.Cond
	ctx    context.Context
	cancel context.CancelFunc
}

type sessionKey struct{ project, session string }
type poolKey struct{ project, server string }

// sessionState is what one client session added.
type sessionState struct {
	op      sync.Mutex // serializes this session's mcp-add and mcp-remove
	acts    []*activation
	catalog atomic.Pointer[switchboard.Catalog]
	ended   bool // under OnDemand.mu
	version uint64
}

// activation is one catalog server a session added.
type activation struct {
	entry *CatalogEntry
	tools []switchboard.Tool
	inst  *instance // long-lived
	pool  *pool     // per-call
}

// NewOnDemand returns the service; Start removes what a previous run left.
func NewOnDemand(opts OnDemandOptions) *OnDemand {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxContainers <= 0 {
		opts.MaxContainers = 20
	}
	if opts.WarmPool < 0 {
		opts.WarmPool = 0
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	if opts.Secrets == nil {
		opts.Secrets = func(context.Context, string) (map[string]string, error) { return nil, nil }
	}
	if opts.Notify == nil {
		opts.Notify = func(string, string) {}
	}
	if opts.Catalog == nil {
		opts.Catalog = &Catalog{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o := &OnDemand{opts: opts, eng: opts.Engine, cat: opts.Catalog, log: opts.Logger,
		sessions: map[sessionKey]*sessionState{}, ended: map[sessionKey]bool{}, pools: map[poolKey]*pool{},
		ctx: ctx, cancel: cancel}
	o.bgDone = sync.NewCond(&o.bgMu)
	return o
}

// Catalog returns the catalog the service serves.
func (o *OnDemand) Catalog() *Catalog { return o.cat }

// goBG runs fn in the background, counted for Close and WaitRetired.
func (o *OnDemand) goBG(fn func()) {
	o.bgMu.Lock()
	o.bg++
	o.bgMu.Unlock()
	go func() {
		defer func() {
			o.bgMu.Lock()
			o.bg--
			o.bgDone.Broadcast()
			o.bgMu.Unlock()
		}()
		fn()
	}()
}

// WaitRetired waits for the background work under way: container
// removals (after a per-call tool call, mcp-remove, SessionEnded) and
// warm-pool refills. Once it returns, the containers let go are gone.
func (o *OnDemand) WaitRetired() {
	o.bgMu.Lock()
	defer o.bgMu.Unlock()
	for o.bg > 0 {
		o.bgDone.Wait()
	}
}

// Close removes every catalog container (sessions' and pools') and waits
// for the removals, bounded by ctx.
func (o *OnDemand) Close(ctx context.Context) error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	var insts []*instance
	for k, st := range o.sessions {
		st.ended = true
		for _, a := range st.acts {
			if a.inst != nil {
				insts = append(insts, a.inst)
			}
		}
		delete(o.sessions, k)
	}
	o.owning.Store(0)
	for k, p := range o.pools {
		insts = append(insts, p.drainLocked()...)
		delete(o.pools, k)
	}
	o.mu.Unlock()
	o.cancel() // refills still initializing give up (their containers are removed)
	for _, in := range insts {
		o.retire(in)
	}
	done := make(chan struct{})
	go func() { o.WaitRetired(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	if o.eng == nil {
		return nil
	}
	// Anything a cut-off start created after the sweep above: this
	// process's own only, never another gateway's on the same instance.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err := o.eng.RemoveOwned(rctx, map[string]string{engine.LabelKind: KindCatalog})
	return err
}

// SessionEnded removes, in the background, every container bound to a
// client session that ended (a DELETE, idle expiry, a dropped legacy SSE
// stream, shutdown), and remembers the session so an mcp-add racing its
// end starts nothing. It does not block.
func (o *OnDemand) SessionEnded(project, session string) {
	k := sessionKey{project, session}
	o.mu.Lock()
	if !o.ended[k] {
		o.ended[k] = true
		o.endedLog = append(o.endedLog, k)
		if len(o.endedLog) > endedMemory {
			delete(o.ended, o.endedLog[0])
			o.endedLog = o.endedLog[1:]
		}
	}
	st := o.sessions[k]
	if st == nil {
		o.mu.Unlock()
		return
	}
	st.ended = true
	delete(o.sessions, k)
	if len(st.acts) > 0 {
		o.owning.Add(-1)
	}
	acts := st.acts
	st.acts = nil
	st.catalog.Store(nil)
	var insts []*instance
	for _, a := range acts {
		insts = append(insts, o.detachLocked(a)...)
	}
	o.mu.Unlock()
	for _, in := range insts {
		o.retire(in)
	}
}

// ProjectGone ends every client session of a deleted project (their
// containers go, and the pools they used once unused) and waits, bounded
// by ctx, for the removals. Its volumes are the engine's RemoveProject's.
func (o *OnDemand) ProjectGone(ctx context.Context, project string) error {
	o.mu.Lock()
	var ended []string
	for k := range o.sessions {
		if k.project == project {
			ended = append(ended, k.session)
		}
	}
	o.mu.Unlock()
	for _, s := range ended {
		o.SessionEnded(project, s)
	}
	done := make(chan struct{})
	go func() { o.WaitRetired(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ProjectTools returns project's catalog tools (mcp-find, mcp-add,
// mcp-remove), to register as a builtin server.
func (o *OnDemand) ProjectTools(project string) *CatalogTools {
	return &CatalogTools{o: o, project: project}
}

// SessionTools returns project's per-session tools, for the edge.
func (o *OnDemand) SessionTools(project string) *SessionTools {
	return &SessionTools{o: o, project: project}
}

// SessionTools are the tools each client session of one project added
// with mcp-add (server.SessionTools).
type SessionTools struct {
	o       *OnDemand
	project string
}

// SessionCatalog returns session's own tools, nil when it added none.
func (t *SessionTools) SessionCatalog(session string) *switchboard.Catalog {
	o := t.o
	if o.owning.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	st := o.sessions[sessionKey{t.project, session}]
	o.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.catalog.Load()
}

// CallSessionTool calls a tool of a server req.Session added: through its
// long-lived container, or in a fresh container removed after the call.
func (t *SessionTools) CallSessionTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	o := t.o
	o.mu.Lock()
	st := o.sessions[sessionKey{t.project, req.Session}]
	var act *activation
	var tool switchboard.Tool
	if st != nil {
		if c := st.catalog.Load(); c != nil {
			tool, _ = c.Lookup(req.Tool)
		}
		for _, a := range st.acts {
			if a.entry.Name == tool.Server {
				act = a
			}
		}
	}
	o.mu.Unlock()
	if act == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; tools/list shows the tools available", switchboard.Clip(req.Tool))
	}
	req.Tool = tool.UpstreamName
	if act.inst != nil {
		return act.inst.mgr.Call(ctx, req)
	}
	in, err := o.take(ctx, act.pool)
	if err != nil {
		return nil, err
	}
	defer o.retire(in) // one call per container
	return in.mgr.Call(ctx, req)
}

// --- containers -------------------------------------------------------

// instance is one started catalog container with an MCP connection to it
// over its attach stream (the upstreams framing, as for hosted servers).
type instance struct {
	entry *CatalogEntry
	id    string
	st    *engine.Stream
	mgr   *upstreams.Manager
	long  bool
}

// alive reports whether the container's stream is still attached.
func (in *instance) alive() bool {
	select {
	case <-in.st.Done():
		return false
	default:
		return true
	}
}

// oneStream hands the manager the container's stream once: a catalog
// container is not restarted behind the session's back.
type oneStream struct {
	st    *engine.Stream
	name  string
	taken atomic.Bool
}

func (s *oneStream) OpenStream(context.Context, switchboard.ServerSpec) (upstreams.Stream, error) {
	if s.taken.Swap(true) {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q: its container exited; run %s again to start a new one", s.name, ToolAdd)
	}
	return s.st, nil
}

func (o *OnDemand) errNoEngine() error {
	if o.opts.EngineErr != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "catalog servers need containers: %s", switchboard.Message(o.opts.EngineErr))
	}
	return switchboard.Errorf(switchboard.ErrConfig, "catalog servers need a Docker engine; start Docker, or set DOCKER_HOST to its address")
}

// errFull is the answer when MaxContainers catalog containers run.
func (o *OnDemand) errFull() error {
	return switchboard.Errorf(switchboard.ErrResourceLimit, "the gateway already runs %d catalog containers (MCP_SERVER_CATALOG_MAX_CONTAINERS); %s a long-lived server, end an idle session, or try again when calls finish", o.opts.MaxContainers, ToolRemove)
}

// reserveLocked takes one of MaxContainers for a container about to
// start; false when none is free or the service is closed.
func (o *OnDemand) reserveLocked() bool {
	if o.closed || o.count >= o.opts.MaxContainers {
		return false
	}
	o.count++
	return true
}

// unreserve gives back a reservation whose container never started.
func (o *OnDemand) unreserve() {
	o.mu.Lock()
	o.count--
	o.mu.Unlock()
}

// volumeFor is the engine volume of a catalog entry's named volume in
// project: shared by that project's sessions, never by another project's
// or another gateway instance's (the name carries the instance). One made
// before the name did, of this instance, is kept.
func (o *OnDemand) volumeFor(ctx context.Context, project, name string) string {
	legacy := "switchboard-catalog-" + volumeSlug(project, 64) + "-" + name
	if v, err := o.eng.InspectVolume(ctx, legacy); err == nil && v.Labels[engine.LabelInstance] == o.eng.Instance() {
		return legacy
	}
	return "switchboard-" + volumeSlug(o.eng.Instance(), 40) + "-catalog-" + volumeSlug(project, 64) + "-" + name
}

// start creates, attaches, starts and initializes a container of e for
// project; owner labels it (a session id, or "pool"). The caller holds a
// reservation (reserveLocked) and gives it back if start fails.
func (o *OnDemand) start(ctx context.Context, project, owner string, e *CatalogEntry, long bool) (*instance, error) {
	if o.eng == nil {
		return nil, o.errNoEngine()
	}
	env, err := o.environment(ctx, project, e)
	if err != nil {
		return nil, err
	}
	// A create, attach and start are never cut off half-way by a client
	// leaving: a created container must be either started and owned, or
	// removed here.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.opts.ConnectTimeout)
	defer cancel()
	info, err := o.eng.Info(cctx)
	if err != nil {
		return nil, catalogErr(e, err)
	}
	l := map[string]string{engine.LabelKind: KindCatalog, engine.LabelRef: owner, engine.LabelProject: project, LabelServer: e.Name}
	spec := engine.Spec{
		Image: e.Image, Cmd: e.Command, Env: env, User: e.User, Labels: l, Stdin: true,
		NanoCPUs: int64(DefaultCPU * 1e9), MemoryBytes: DefaultMemoryBytes, PidsLimit: DefaultPids,
		Network: e.Network, ReadOnlyRoot: e.ReadOnlyRoot,
		Tmpfs:       map[string]string{"/tmp": "rw,nosuid,nodev,size=64m"},
		StopTimeout: o.opts.StopTimeout,
	}
	if info.DiskQuota {
		spec.DiskBytes, spec.DiskQuota = DefaultDiskBytes, true
	}
	if info.HasRuntime("runsc") {
		spec.Runtime = "runsc"
	}
	for _, v := range e.Volumes {
		name := o.volumeFor(cctx, project, v.Name)
		vl := map[string]string{engine.LabelKind: KindCatalog, engine.LabelProject: project, LabelServer: e.Name, LabelPath: v.Target}
		if err := o.eng.CreateVolume(cctx, name, vl); err != nil {
			return nil, catalogErr(e, err)
		}
		spec.Mounts = append(spec.Mounts, engine.Mount{Volume: name, Target: v.Target, ReadOnly: v.ReadOnly})
	}
	run, err := o.eng.Launch(cctx, spec, nil)
	if err != nil {
		return nil, catalogErr(e, err)
	}
	id, st := run.ID, run.Stream
	fail := func(err error) (*instance, error) {
		if rerr := o.eng.Remove(context.WithoutCancel(cctx), id); rerr != nil {
			o.log.Warn("removing a catalog container that did not start", "server", e.Name, "container", short(id), "err", rerr)
		}
		return nil, err
	}
	mgr := upstreams.New(upstreams.Options{Version: o.opts.Version, CallTimeout: o.opts.CallTimeout,
		ConnectTimeout: o.opts.ConnectTimeout, MaxMessageBytes: o.opts.MaxMessageBytes,
		Streams: &oneStream{st: st, name: e.Name},
		Logger:  o.log.With("catalog_server", e.Name, "container", short(id))})
	mgr.Apply(cctx, []switchboard.ServerSpec{{Name: e.Name, Transport: switchboard.TransportHosted, CallTimeout: o.opts.CallTimeout}})
	if err := mgr.Connect(ctx, e.Name); err != nil {
		msg := switchboard.Message(err)
		if tail := strings.TrimSpace(redactEnv(st.Stderr(), env)); tail != "" {
			msg += "; its stderr ends: " + switchboard.Clip(lastLine(tail))
		}
		_ = mgr.Close(context.WithoutCancel(cctx))
		st.Close()
		return fail(switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q did not start: %s", e.Name, msg))
	}
	return &instance{entry: e, id: id, st: st, mgr: mgr, long: long}, nil
}

// catalogErr names the catalog server in an engine error, without the
// engine's address.
func catalogErr(e *CatalogEntry, err error) error {
	switch {
	case errors.Is(err, switchboard.ErrUnavailable):
		return switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q: the Docker engine is not reachable; start Docker, or set DOCKER_HOST to its address", e.Name)
	case errors.Is(err, context.Canceled), errors.Is(err, switchboard.ErrCanceled):
		return switchboard.Errorf(switchboard.ErrCanceled, "catalog server %q: starting it was cancelled", e.Name)
	}
	return switchboard.Errorf(switchboard.ErrConfig, "catalog server %q: %s", e.Name, switchboard.Message(err))
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// environment resolves an entry's env values and secrets from the
// project's secrets.
func (o *OnDemand) environment(ctx context.Context, project string, e *CatalogEntry) ([]string, error) {
	if len(e.Env) == 0 && len(e.Secrets) == 0 {
		return nil, nil
	}
	vals, err := o.opts.Secrets(ctx, project)
	if err != nil {
		return nil, err
	}
	env, missing := expandEnv(e.Env, e.Secrets, vals)
	if len(missing) > 0 {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "catalog server %q needs secret %s of project %q; set it (switchboard secrets set NAME) and run %s again",
			e.Name, strings.Join(missing, ", "), project, ToolAdd)
	}
	return env, nil
}

// retire gives back an instance's reservation and removes its container
// in the background: removal first (it ends a call still running on it:
// its owner is gone), then the connection, which then closes at once.
func (o *OnDemand) retire(in *instance) {
	if in == nil {
		return
	}
	o.mu.Lock()
	o.count--
	if in.long {
		o.long--
	}
	o.mu.Unlock()
	o.goBG(func() {
		rctx, cancel := context.WithTimeout(context.Background(), o.opts.StopTimeout+10*time.Second)
		if err := o.eng.Remove(rctx, in.id); err != nil {
			o.log.Warn("removing a catalog container", "server", in.entry.Name, "container", short(in.id), "err", err)
		}
		cancel()
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = in.mgr.Close(cctx)
		cancel()
		in.st.Close()
	})
}

// --- per-call pools -------------------------------------------------------

// pool keeps WarmPool started containers of one per-call server for one
// project while at least one session has the server added.
type pool struct {
	key     poolKey
	entry   *CatalogEntry
	refs    int // activations using it, under OnDemand.mu
	warm    chan *instance
	filling int // under OnDemand.mu
	closed  bool
	tools   []switchboard.Tool // listed once, under OnDemand.mu
	ctx     context.Context    // refills; cancelled when the pool closes
	cancel  context.CancelFunc
}

// acquireLocked returns project's pool of e with one more user.
func (o *OnDemand) acquireLocked(project string, e *CatalogEntry) *pool {
	k := poolKey{project, e.Name}
	p := o.pools[k]
	if p == nil {
		ctx, cancel := context.WithCancel(o.ctx)
		p = &pool{key: k, entry: e, warm: make(chan *instance, max(o.opts.WarmPool, 1)), ctx: ctx, cancel: cancel}
		o.pools[k] = p
	}
	p.refs++
	return p
}

// detachLocked lets go of an activation: its long-lived container, and
// its pool's warm containers if it was the pool's last user, are returned
// to be retired once o.mu is released.
func (o *OnDemand) detachLocked(a *activation) []*instance {
	var out []*instance
	if a.inst != nil {
		out = append(out, a.inst)
	}
	if a.pool != nil {
		out = append(out, o.releaseLocked(a.pool)...)
	}
	return out
}

// releaseLocked drops one user of p; the last one closes it and returns
// its warm containers to retire.
func (o *OnDemand) releaseLocked(p *pool) []*instance {
	p.refs--
	if p.refs > 0 {
		return nil
	}
	delete(o.pools, p.key)
	return p.drainLocked()
}

// drainLocked closes p, stops its refills and returns its warm
// containers.
func (p *pool) drainLocked() []*instance {
	p.closed = true
	p.cancel()
	var out []*instance
	for {
		select {
		case in := <-p.warm:
			out = append(out, in)
		default:
			return out
		}
	}
}

// keepLocked puts an unused container into p's warm pool if it has room;
// false means the caller retires it.
func (o *OnDemand) keepLocked(p *pool, in *instance) bool {
	if p.closed || o.closed || len(p.warm) >= o.opts.WarmPool {
		return false
	}
	p.warm <- in // room checked under mu: never blocks
	return true
}

// take returns a container of p's server for one call: a warm one, or
// one started now. Either way the pool is topped up in the background.
func (o *OnDemand) take(ctx context.Context, p *pool) (*instance, error) {
	defer o.refill(p)
	return o.get(ctx, p)
}

// get is take without the top-up: a warm container of p, or one started
// now.
func (o *OnDemand) get(ctx context.Context, p *pool) (*instance, error) {
	for {
		select {
		case in := <-p.warm:
			if in.alive() {
				return in, nil
			}
			o.retire(in) // exited while it waited
		default:
			o.mu.Lock()
			ok := o.reserveLocked()
			o.mu.Unlock()
			if !ok {
				return nil, o.errFull()
			}
			in, err := o.start(ctx, p.key.project, "pool", p.entry, false)
			if err != nil {
				o.unreserve()
			}
			return in, err
		}
	}
}

// refill starts containers until p holds WarmPool of them (counting
// those starting), as far as MaxContainers allows.
func (o *OnDemand) refill(p *pool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !p.closed && len(p.warm)+p.filling < o.opts.WarmPool && o.reserveLocked() {
		p.filling++
		o.goBG(func() {
			in, err := o.start(p.ctx, p.key.project, "pool", p.entry, false)
			o.mu.Lock()
			p.filling--
			if err != nil {
				o.count--
				o.mu.Unlock()
				if p.ctx.Err() == nil {
					o.log.Warn("warming a catalog container", "project", p.key.project, "server", p.entry.Name, "err", err)
				}
				return
			}
			kept := o.keepLocked(p, in)
			o.mu.Unlock()
			if !kept {
				o.retire(in)
			}
		})
	}
}

// --- mcp-add and mcp-remove ------------------------------------------

// session returns the state of a live client session, made on first use;
// a session that ended (or a closed service) gets ErrCanceled.
func (o *OnDemand) session(project, session string) (*sessionState, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "the gateway is shutting down")
	}
	k := sessionKey{project, session}
	if o.ended[k] {
		return nil, switchboard.Errorf(switchboard.ErrCanceled, "the client session ended")
	}
	st := o.sessions[k]
	if st == nil {
		st = &sessionState{}
		o.sessions[k] = st
	}
	return st, nil
}

// AddResult is what mcp-add reports.
type AddResult struct {
	Server    string   `json:"server"`
	LongLived bool     `json:"long_lived"`
	Already   bool     `json:"already_added"`
	Tools     []string `json:"tools"`
	// Shadowed are tools of the server that the session already has
	// under the same name (the project's, or an earlier server's): they
	// are not reachable.
	Shadowed []string `json:"shadowed,omitempty"`
	Message  string   `json:"message"`
}

// Add activates catalog server name for a client session of project:
// starts its container (long-lived) or its warm pool (per-call), lists
// its tools and makes them the session's. taken reports names the
// session already sees (the project's tools); it is called without locks.
// Errors: ErrInvalid (no session, no such server), ErrResourceLimit,
// ErrConfig (no engine, image missing, secret missing), ErrUnavailable
// (the server did not start), ErrCanceled (the session ended).
func (o *OnDemand) Add(ctx context.Context, project, session, name string, taken func(string) bool) (AddResult, error) {
	if session == "" {
		return AddResult{}, switchboard.Errorf(switchboard.ErrInvalid, "%s needs a client session: its tools are added to the session that asks (initialize first, or use the legacy /sse endpoint); a request without a session cannot hold them", ToolAdd)
	}
	e := o.cat.Entry(name)
	if e == nil {
		return AddResult{}, switchboard.Errorf(switchboard.ErrInvalid, "no catalog server named %q; %s lists them", switchboard.Clip(name), ToolFind)
	}
	st, err := o.session(project, session)
	if err != nil {
		return AddResult{}, err
	}
	st.op.Lock()
	defer st.op.Unlock()
	res := AddResult{Server: e.Name, LongLived: e.LongLived}
	o.mu.Lock()
	var dead *activation
	for _, a := range st.acts {
		if a.entry != e {
			continue
		}
		if a.inst == nil || a.inst.alive() {
			o.mu.Unlock()
			res.Already = true
			res.Tools = toolNames(a.tools)
			res.Message = fmt.Sprintf("%s was already added to this session", e.Name)
			return res, nil
		}
		dead = a // a long-lived one whose container exited: replaced
	}
	if dead != nil {
		st.acts = slices.DeleteFunc(st.acts, func(a *activation) bool { return a == dead })
		if len(st.acts) == 0 {
			o.owning.Add(-1)
		}
		o.rebuildLocked(st, nil, nil)
	}
	o.mu.Unlock()
	if dead != nil {
		o.retire(dead.inst) // gives back its slot before the new one takes one
	}

	act := &activation{entry: e}
	if e.LongLived {
		o.mu.Lock()
		ok := o.reserveLocked()
		o.mu.Unlock()
		if !ok {
			return res, o.errFull()
		}
		in, err := o.start(ctx, project, session, e, true)
		if err != nil {
			o.unreserve()
			return res, err
		}
		o.mu.Lock()
		o.long++
		o.mu.Unlock()
		act.inst = in
		act.tools = in.mgr.Catalog().Tools
	} else {
		o.mu.Lock()
		p := o.acquireLocked(project, e)
		tools := p.tools
		o.mu.Unlock()
		if tools == nil {
			// A fresh container lists the tools; no call ran on it, so it
			// goes back to the pool as a warm one before the pool is
			// topped up (which would otherwise start one too many).
			in, err := o.get(ctx, p)
			if err != nil {
				o.mu.Lock()
				dead := o.releaseLocked(p)
				o.mu.Unlock()
				for _, in := range dead {
					o.retire(in)
				}
				return res, err
			}
			tools = in.mgr.Catalog().Tools
			o.mu.Lock()
			p.tools = tools
			kept := o.keepLocked(p, in)
			o.mu.Unlock()
			if !kept {
				o.retire(in)
			}
		}
		o.refill(p)
		act.pool = p
		act.tools = tools
	}

	o.mu.Lock()
	if st.ended || o.closed {
		// The session ended (or the gateway is stopping) while the server
		// started: it is nobody's.
		gone := o.detachLocked(act)
		o.mu.Unlock()
		for _, in := range gone {
			o.retire(in)
		}
		return res, switchboard.Errorf(switchboard.ErrCanceled, "the session ended while %s started", e.Name)
	}
	if len(st.acts) == 0 {
		o.owning.Add(1)
	}
	st.acts = append(st.acts, act)
	res.Shadowed = o.rebuildLocked(st, act, taken)
	o.mu.Unlock()
	res.Tools = toolNames(act.tools)
	res.Message = fmt.Sprintf("added %s to this session: %d tool(s)", e.Name, len(act.tools))
	if len(res.Tools) > 0 {
		res.Message += " (" + strings.Join(res.Tools, ", ") + ")"
	}
	if e.LongLived {
		res.Message += "; one container serves them until the session ends or " + ToolRemove
	} else {
		res.Message += "; each call runs in a fresh container"
	}
	o.opts.Notify(project, session)
	return res, nil
}

// rebuildLocked renders st's catalog from its activations in the order
// they were added (first wins a name) and returns the tools of act that
// another tool shadows: an earlier server's, or one taken reports (the
// project's, which win at the edge).
func (o *OnDemand) rebuildLocked(st *sessionState, act *activation, taken func(string) bool) []string {
	var tools []switchboard.Tool
	seen := map[string]bool{}
	var shadowed []string
	for _, a := range st.acts {
		for _, t := range a.tools {
			if a == act && (seen[t.Name] || (taken != nil && taken(t.Name))) {
				shadowed = append(shadowed, t.Name)
			}
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			tools = append(tools, switchboard.Tool{Name: t.Name, Server: a.entry.Name, UpstreamName: t.UpstreamName, Raw: t.Raw})
		}
	}
	st.version++
	if len(st.acts) == 0 {
		st.catalog.Store(nil)
	} else {
		st.catalog.Store(switchboard.NewCatalog(st.version, tools))
	}
	return shadowed
}

// Remove deactivates catalog server name for a client session: its
// container (long-lived) is removed, and its tools leave the session.
// Errors: ErrInvalid (no session, server not added).
func (o *OnDemand) Remove(project, session, name string) error {
	if session == "" {
		return switchboard.Errorf(switchboard.ErrInvalid, "%s needs a client session", ToolRemove)
	}
	o.mu.Lock()
	st := o.sessions[sessionKey{project, session}]
	o.mu.Unlock()
	if st == nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "%q is not added to this session", switchboard.Clip(name))
	}
	st.op.Lock()
	defer st.op.Unlock()
	o.mu.Lock()
	var gone *activation
	st.acts = slices.DeleteFunc(st.acts, func(a *activation) bool {
		if a.entry.Name == name {
			gone = a
			return true
		}
		return false
	})
	if gone == nil {
		o.mu.Unlock()
		return switchboard.Errorf(switchboard.ErrInvalid, "%q is not added to this session", switchboard.Clip(name))
	}
	if len(st.acts) == 0 {
		o.owning.Add(-1)
	}
	o.rebuildLocked(st, nil, nil)
	dead := o.detachLocked(gone)
	o.mu.Unlock()
	for _, in := range dead {
		o.retire(in)
	}
	o.opts.Notify(project, session)
	return nil
}

// Added lists the servers a session added, in order.
func (o *OnDemand) Added(project, session string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.sessions[sessionKey{project, session}]
	if st == nil {
		return nil
	}
	var out []string
	for _, a := range st.acts {
		out = append(out, a.entry.Name)
	}
	return out
}

// OnDemandStatus is the catalog's part of the gateway status.
type OnDemandStatus struct {
	Servers    int      `json:"servers"`
	Skipped    []string `json:"skipped,omitempty"`
	Sessions   int      `json:"sessions_with_servers"`
	Containers int      `json:"containers"`
	Max        int      `json:"max_containers"`
	LongLived  int      `json:"long_lived_containers"`
	Warm       int      `json:"warm_containers"`
}

// Status reports the catalog's size and the containers it runs.
func (o *OnDemand) Status() OnDemandStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := OnDemandStatus{Servers: len(o.cat.Entries), Skipped: o.cat.Warnings, Sessions: int(o.owning.Load()),
		Containers: o.count, Max: o.opts.MaxContainers, LongLived: o.long}
	for _, p := range o.pools {
		s.Warm += len(p.warm)
	}
	return s
}

func toolNames(tools []switchboard.Tool) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

// redactEnv hides the values of env ("K=V" lines) in text, as a hosted
// server's stderr is shown: a server that prints its configuration when
// it fails must not show a secret, as is or encoded (percent, JSON,
// base64). The text is a container's stderr or log tail, or a message
// quoting one: a piece of a value cut at either edge is hidden too.
func redactEnv(text string, env []string) string {
	values := make([]string, 0, len(env))
	for _, kv := range env {
		_, v, _ := strings.Cut(kv, "=")
		values = append(values, v)
	}
	var r secrets.Redactor
	r.Set(values)
	return r.RedactTail(text)
}
