package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/projects"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// sandboxRuntime is the gateway's sandbox: the service, the engine it
// uses, and which projects serve its tools. A project's switch is kept
// in the store (kb.projects.sandbox_enabled): read at start, re-read
// every MCP_SERVER_SYNC_INTERVAL so replicas converge, written by the
// admin API.
type sandboxRuntime struct {
	svc        *sandbox.Service
	st         switchboard.ProjectStore
	defaultsOn bool // MCP_SERVER_SANDBOX: projects serve the tools unless switched
	log        *slog.Logger

	// applyMu serializes a switch (store write, then memory) with a
	// sync (store read, then memory), so an older read never undoes a
	// newer switch.
	applyMu sync.Mutex

	mu  sync.Mutex
	off map[string]bool // projects switched through the API: true = off
	// created is each project's creation time as the last sync read it:
	// a project gone from the store, or there with another creation time
	// (deleted and created again under its id), was deleted, maybe through
	// another replica, and what this one runs for it ends.
	created map[string]time.Time
	hub     interface {
		SetBuiltin(project, name string, b upstreams.Builtin)
	}

	// homes shares sessions with the replicas on the same store; nil
	// until run sets it (setHomes, before the hub starts).
	homes *sandbox.Homes

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// sandboxServer is the name the sandbox tools are listed under.
const sandboxServer = "sandbox"

// startSandbox builds the sandbox service. alive tells whether a gateway
// process lives (the owner lease), for the warm workspaces of dead ones.
func startSandbox(ctx context.Context, cfg config.Config, st switchboard.Store, e *engine.Engine, alive func(context.Context, string) (bool, error), log *slog.Logger) *sandboxRuntime {
	vols, _ := cfg.Sandbox.ParsedVolumes() // validated by config.Load
	var mounts []sandbox.Volume
	for _, v := range vols {
		mounts = append(mounts, sandbox.Volume{Source: v.Source, Target: v.Target, ReadOnly: v.ReadOnly, Bind: v.Bind})
	}
	// The settings' 0 is the options' negative: deleted when the session
	// ends; no size limit.
	retention, size := cfg.Sandbox.WorkspaceRetention, cfg.Sandbox.WorkspaceSize
	if retention == 0 {
		retention = -1
	}
	if size == 0 {
		size = -1
	}
	var auth *engine.RegistryAuth
	if cfg.Sandbox.RegistryUser != "" {
		auth = &engine.RegistryAuth{Username: cfg.Sandbox.RegistryUser, Password: cfg.Sandbox.RegistryPassword}
	}
	svc := sandbox.New(sandbox.Options{
		Engine: e, Store: st, ImagePython: cfg.Sandbox.ImagePython, ImageNode: cfg.Sandbox.ImageNode, PullPolicy: engine.PullPolicy(cfg.Images.PullPolicy),
		RegistryAuth: auth, SessionTimeout: cfg.Sandbox.SessionTimeout, MaxSessions: cfg.Sandbox.MaxSessions, MaxTimeout: cfg.Sandbox.MaxTimeout,
		OutputLimit: cfg.Sandbox.OutputLimit, Network: cfg.Sandbox.NetworkMode(), Volumes: mounts, WorkspaceRetention: retention, WorkspaceBytes: size,
		WarmPool: cfg.Sandbox.WarmPool, WarmPoolMax: cfg.Sandbox.WarmPoolMax, Alive: alive,
		Logger: log.With("component", "sandbox"),
	})
	r := &sandboxRuntime{svc: svc, st: st, defaultsOn: cfg.Sandbox.Enabled, log: log, off: map[string]bool{}, created: map[string]time.Time{}}
	// The projects' switches before the hub builds their runtimes; a
	// store that cannot be read now is retried by the sync.
	lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
	defer lcancel()
	// Rows a crashed gateway left running become ready (the engine's
	// sweep has removed its containers); what cannot be checked now is
	// checked again by the sandbox's sweeper.
	if err := svc.Start(lctx); err != nil {
		log.Warn("sandbox: could not check the workspaces against the engine; retrying every sweep", "err", switchboard.Message(err))
	}
	// Whether the engine answers, before the projects list the tools
	// (their descriptions say when it does not).
	svc.Refresh(lctx)
	if err := r.sync(lctx); err != nil {
		log.Warn("sandbox: could not read the projects' sandbox switches; retrying every sync interval", "err", switchboard.Message(err))
	}
	sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = scancel
	r.wg.Go(func() { r.syncLoop(sctx, cfg.SyncInterval) })
	return r
}

// syncLoop re-reads the switches every interval until ctx ends.
func (r *sandboxRuntime) syncLoop(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, max(4*interval, 30*time.Second))
		if err := r.sync(sctx); err != nil && ctx.Err() == nil {
			r.log.Warn("sandbox: re-reading the projects' sandbox switches failed; keeping the last known", "err", switchboard.Message(err))
		}
		if r.svc.Refresh(sctx) {
			r.relist(sctx)
		}
		cancel()
	}
}

// sync makes the switches what the store holds and applies the changed
// ones to the hub's projects, then ends what this replica runs for
// projects deleted since the last sync.
func (r *sandboxRuntime) sync(ctx context.Context) error {
	gone, err := r.syncSwitches(ctx)
	for _, id := range gone {
		if err := r.svc.ProjectGone(ctx, id); err != nil {
			r.log.Warn("sandbox: ending the sessions of a deleted project", "project", id, "err", switchboard.Message(err))
		}
	}
	return err
}

func (r *sandboxRuntime) syncSwitches(ctx context.Context) (gone []string, err error) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	list, err := r.st.ListProjects(ctx)
	if err != nil {
		return nil, err
	}
	next := map[string]bool{}
	created := map[string]time.Time{}
	for _, p := range list {
		if p.Sandbox != nil {
			next[p.ID] = !*p.Sandbox
		}
		created[p.ID] = p.CreatedAt
	}
	r.mu.Lock()
	var changed []string
	for _, p := range list {
		if r.enabledLocked(p.ID) != r.enabledIn(next, p.ID) {
			changed = append(changed, p.ID)
		}
	}
	for id, t := range r.created {
		if now, ok := created[id]; !ok || !now.Equal(t) {
			gone = append(gone, id)
		}
	}
	r.off, r.created = next, created
	r.mu.Unlock()
	for _, id := range changed {
		on := r.enabled(id)
		r.log.Info("sandbox tools switched by the store", "project", id, "enabled", on)
		r.apply(id, on)
	}
	return gone, nil
}

// relist sets the sandbox tools of every project serving them again, so
// clients see the descriptions that say whether the engine answers.
func (r *sandboxRuntime) relist(ctx context.Context) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	list, err := r.st.ListProjects(ctx)
	if err != nil {
		return // the next sync interval tries again
	}
	r.log.Info("sandbox: the Docker engine's reachability changed; tools listed again", "engine", r.svc.Status(ctx).Engine)
	for _, p := range list {
		if r.enabled(p.ID) {
			r.apply(p.ID, true)
		}
	}
}

// enabled reports whether project serves the sandbox tools.
func (r *sandboxRuntime) enabled(project string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enabledLocked(project)
}

func (r *sandboxRuntime) enabledLocked(project string) bool { return r.enabledIn(r.off, project) }

func (r *sandboxRuntime) enabledIn(off map[string]bool, project string) bool {
	if o, ok := off[project]; ok {
		return !o
	}
	return r.defaultsOn
}

// builtins is projects.Options.Builtins.
func (r *sandboxRuntime) builtins(project string) map[string]upstreams.Builtin {
	if !r.enabled(project) {
		return nil
	}
	return map[string]upstreams.Builtin{sandboxServer: r.tools(project)}
}

// tools is project's sandbox builtin, the one way it is made: whether
// the hub builds the project (builtins) or a switch is applied while it
// runs (apply), calls naming a session another replica runs reach it.
func (r *sandboxRuntime) tools(project string) upstreams.Builtin {
	r.mu.Lock()
	homes := r.homes
	r.mu.Unlock()
	if homes != nil {
		return homes.Tools(project)
	}
	return r.svc.Tools(project)
}

// SandboxEnabled reports whether project serves the sandbox tools (api.Sandbox).
func (r *sandboxRuntime) SandboxEnabled(project string) bool { return r.enabled(project) }

// The admin API's workspace operations (api.Sandbox). Without force,
// detach, snapshot and delete act as a call without an MCP session
// (sandbox.Sessionless: refused on a workspace an agent session holds);
// forced, as the admin ("").

func (r *sandboxRuntime) Workspaces(ctx context.Context, project string) ([]switchboard.WorkspaceInfo, error) {
	return r.svc.Workspaces(ctx, project)
}

func (r *sandboxRuntime) GetWorkspace(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error) {
	return r.svc.GetWorkspace(ctx, project, id)
}

func (r *sandboxRuntime) AttachWorkspace(ctx context.Context, project, agent, id string) (switchboard.SandboxSession, error) {
	return r.svc.Attach(ctx, project, agent, id, "", "")
}

func (r *sandboxRuntime) DetachWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error) {
	return r.svc.Detach(ctx, project, actor(force), id)
}

func (r *sandboxRuntime) SnapshotWorkspace(ctx context.Context, project, id string, force bool) (switchboard.WorkspaceInfo, error) {
	return r.svc.Snapshot(ctx, project, actor(force), id)
}

func (r *sandboxRuntime) DeleteWorkspace(ctx context.Context, project, id string, force bool) error {
	_, err := r.svc.Delete(ctx, project, actor(force), id)
	return err
}

func (r *sandboxRuntime) RestoreSnapshot(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error) {
	return r.svc.Restore(ctx, project, id)
}

func actor(force bool) string {
	if force {
		return ""
	}
	return sandbox.Sessionless
}

// SetSandboxEnabled switches project's sandbox tools on or off (the
// API's project switch): stored first, so it outlives this process and
// reaches the other replicas on their sync, then applied here at once.
// Errors: the store's (ErrNotFound for an unknown project).
func (r *sandboxRuntime) SetSandboxEnabled(ctx context.Context, project string, on bool) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if _, err := r.st.SetProjectSandbox(ctx, project, &on); err != nil {
		return err
	}
	r.mu.Lock()
	r.off[project] = !on
	r.mu.Unlock()
	r.apply(project, on)
	return nil
}

// apply adds or removes project's sandbox tools on the hub.
func (r *sandboxRuntime) apply(project string, on bool) {
	r.mu.Lock()
	hub := r.hub
	r.mu.Unlock()
	if hub == nil {
		return
	}
	if on {
		hub.SetBuiltin(project, sandboxServer, r.tools(project))
	} else {
		hub.SetBuiltin(project, sandboxServer, nil)
		r.svc.Drain(project) // its warm containers serve nobody now
	}
}

func (r *sandboxRuntime) setHomes(h *sandbox.Homes) {
	r.mu.Lock()
	r.homes = h
	r.mu.Unlock()
}

func (r *sandboxRuntime) setHub(hub *projects.Hub) {
	r.mu.Lock()
	r.hub = hub
	r.mu.Unlock()
}

// status is the "sandbox" section of the status JSON.
func (r *sandboxRuntime) status(ctx context.Context) map[string]any {
	if !r.anyEnabled() {
		// Off everywhere: say so without asking Docker anything.
		return map[string]any{"sandbox": map[string]any{"enabled": false}}
	}
	st := r.svc.Status(ctx)
	st.Enabled = r.enabled("default")
	return map[string]any{"sandbox": st}
}

// anyEnabled reports whether some project serves the sandbox tools.
func (r *sandboxRuntime) anyEnabled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.defaultsOn {
		return true
	}
	for _, off := range r.off {
		if !off {
			return true
		}
	}
	return false
}

// close stops the switches' sync, then every session (containers
// removed, workspaces kept).
func (r *sandboxRuntime) close(ctx context.Context) error {
	r.cancel()
	r.wg.Wait()
	return r.svc.Close(ctx)
}
