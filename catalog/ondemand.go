package catalog

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
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
	Engine engine.Provider // nil: no engine; mcp-add says why
	// EngineErr explains why there is no engine (a *switchboard.Error
	// with a client-safe message).
	EngineErr error
	// PullPolicy is the default for entries that set none ("" is
	// if-not-present).
	PullPolicy engine.PullPolicy
	Catalog    *Catalog
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
	// WarmPoolMax is how far a pool grows under a burst: each call that
	// finds it empty doubles its target, up to this (default 16; at
	// least WarmPool). WarmPoolIdle (default 1m) without a call brings
	// it back to WarmPool.
	WarmPoolMax  int
	WarmPoolIdle time.Duration
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
	// IdleTimeout is how long what sessionless callers activated (a
	// catalog tool called by name, mcp-add without a session) is kept
	// without a call; default 10 minutes.
	IdleTimeout time.Duration
	Logger      *slog.Logger
}

// OnDemand runs the catalog's servers for the client sessions that ask
// for them (mcp-add): a long-lived server gets one container for the
// session's lifetime, a per-call server a fresh container for every tool
// call, taken from a small warm pool. Every container is bound to a
// session or to a pool in use, and removed when the session ends, the
// server is removed, or the gateway stops: none outlives its owner.
type OnDemand struct {
	opts OnDemandOptions
	eng  engine.Provider
	cat  *Catalog
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[sessionKey]*sessionState
	ended    map[sessionKey]bool // the last endedMemory sessions that ended
	endedLog []sessionKey        // ring of ended's keys, oldest first
	pools    map[poolKey]*pool
	// toolIndex finds the server of a tool called by name; learned keeps
	// the tool objects each server listed when first activated (mcp-find
	// shows them).
	toolIndex    map[string]*CatalogEntry
	learned      map[string][]switchboard.Tool
	stateless    map[sessionKey]*statelessOwner // by project and caller
	statelessGen int
	count        int // containers reserved: starting, warm, serving, long-lived
	// runtimes: entry name -> what its containers run under.
	runtimes map[string]*EntryRuntime
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
	// removing holds the removal of a container that served a call.
	removing chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
}

type sessionKey struct{ project, session string }
type poolKey struct{ project, server string }

// sessionState is what one client session added.
type sessionState struct {
	// ops serialize the mcp-add and mcp-remove of one server (lockEntry);
	// under OnDemand.mu.
	ops     map[string]chan struct{}
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
	if opts.WarmPoolMax <= 0 {
		opts.WarmPoolMax = 16
	}
	opts.WarmPoolMax = max(opts.WarmPoolMax, opts.WarmPool)
	if opts.WarmPoolIdle <= 0 {
		opts.WarmPoolIdle = time.Minute
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = hosted.DefaultCallTimeout
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 10 * time.Second
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = 10 * time.Minute
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
		toolIndex: map[string]*CatalogEntry{}, learned: map[string][]switchboard.Tool{}, stateless: map[sessionKey]*statelessOwner{},
		ctx: ctx, cancel: cancel, removing: make(chan struct{}, 1)}
	o.bgDone = sync.NewCond(&o.bgMu)
	for _, e := range o.cat.Entries { // in name order: the first server listing a tool gets it
		for _, t := range e.Tools {
			if _, ok := o.toolIndex[t]; !ok {
				o.toolIndex[t] = e
			}
		}
	}
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
	for k, so := range o.stateless {
		so.timer.Stop()
		delete(o.stateless, k)
	}
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

// OnDemandStatus is the catalog's part of the gateway status.
type OnDemandStatus struct {
	Servers    int      `json:"servers"`
	Skipped    []string `json:"skipped,omitempty"`
	Sessions   int      `json:"sessions_with_servers"`
	Containers int      `json:"containers"`
	Max        int      `json:"max_containers"`
	LongLived  int      `json:"long_lived_containers"`
	Warm       int      `json:"warm_containers"`
	// WarmTarget is how many warm containers the pools aim at together:
	// WarmPool each, more for a pool that a burst grew.
	WarmTarget int `json:"warm_target"`
	// Runtimes maps an entry that started a container to what its
	// containers run under.
	Runtimes map[string]EntryRuntime `json:"runtimes,omitempty"`
}

// EntryRuntime is what a catalog entry's containers run under.
type EntryRuntime struct {
	// Containers counts its containers on the engine (warm, serving a
	// call, long-lived) by runtime ("runc", "runsc").
	Containers map[string]int `json:"containers"`
	// Last is the runtime its last container got, and Warning why the
	// preferred runtime was passed over for it ("" when it was not).
	Last    string `json:"last"`
	Warning string `json:"warning,omitempty"`
}

// Status reports the catalog's size and the containers it runs.
func (o *OnDemand) Status() OnDemandStatus {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := OnDemandStatus{Servers: len(o.cat.Entries), Skipped: o.cat.Warnings, Sessions: int(o.owning.Load()),
		Containers: o.count, Max: o.opts.MaxContainers, LongLived: o.long}
	for name, r := range o.runtimes {
		if s.Runtimes == nil {
			s.Runtimes = map[string]EntryRuntime{}
		}
		s.Runtimes[name] = EntryRuntime{Containers: maps.Clone(r.Containers), Last: r.Last, Warning: r.Warning}
	}
	for _, p := range o.pools {
		s.Warm += len(p.warm)
		s.WarmTarget += p.target
	}
	return s
}
