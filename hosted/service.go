// Package hosted runs MCP servers in Docker containers for Switchboard's
// projects: registration (rows of the store's workspace registry with
// container type mcp_server), one supervisor per server that creates a
// hardened container, attaches to its stdio before starting it, restarts
// it by policy with crash-loop backoff, pings it when idle, and hands the
// attach stream to the project's upstreams manager, which speaks MCP over
// it like over a stdio child. The engine is reached only through engine/.
// The catalog's servers (package catalog) are started with this package's
// limits, validation rules and environment handling.
package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// KindMCPServer is the engine.LabelKind value of hosted servers' objects.
const KindMCPServer = "mcp_server"

// Labels naming the server and a volume's path, for people reading
// `docker ps` (the project is engine.LabelProject).
const (
	LabelServer = "io.switchboard.server"
	LabelPath   = "io.switchboard.path"
)

// Upstreams is a project's connection pool as a hosted server needs it.
type Upstreams interface {
	// Connect initializes server name now if it is not connected.
	Connect(ctx context.Context, name string) error
	// Request sends any JSON-RPC method through server name's connection;
	// a JSON-RPC error comes back as *switchboard.RPCError.
	Request(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error)
	// Busy reports a call or request in flight on server name.
	Busy(name string) bool
}

// Store is the part of the store hosted servers use.
type Store interface {
	switchboard.WorkspaceStore
	GetProject(ctx context.Context, id string) (switchboard.Project, error)
}

// Options configure a Service.
type Options struct {
	Engine engine.Provider // nil: no engine configured; every server reports why
	Store  Store
	// Upstreams returns a project's pool (the hub's manager).
	Upstreams func(project string) (Upstreams, error)
	// Secrets returns a project's decrypted secrets, for `${NAME}` in
	// environment values.
	Secrets func(ctx context.Context, project string) (map[string]string, error)
	// Box seals the literal environment values of the registrations it
	// stores (storedRegistration) and opens them again; nil keeps them in
	// clear (tests).
	Box Sealer
	// NameTaken reports whether another (non-hosted) server of the project
	// already uses name.
	NameTaken func(ctx context.Context, project, name string) bool
	// Changed is told after a project's hosted servers changed, so its
	// manager picks up Specs (the hub's Reconcile).
	Changed func(ctx context.Context, project string)
	// PullPolicy is the default for servers that set none ("" is
	// if-not-present).
	PullPolicy engine.PullPolicy
	// EngineErr explains why there is no engine when Engine is nil.
	EngineErr error
	// Replication shares the rows with the replicas on the same store
	// (replicas.go); nil runs every row here.
	Replication *Replication
	Timing      Timing
	Logger      *slog.Logger
}

// Service owns every hosted server of a gateway instance.
type Service struct {
	opts   Options
	eng    engine.Provider
	st     Store
	log    *slog.Logger
	timing Timing

	regMu sync.Mutex // serializes registrations and deletions (name checks)

	// draining: the gateway is stopping (Drain); other replicas' hops are
	// sent on to the next owner instead of into a hub that is closing.
	// hops counts the hops being relayed here, which Drain waits for.
	draining atomic.Bool
	hopMu    sync.Mutex
	hops     sync.WaitGroup

	mu     sync.Mutex
	sups   map[string]*supervisor   // by row ID
	gone   map[string]chan struct{} // projects whose servers are being removed
	closed bool
	// remote holds the rows another replica owns (replicas.go).
	remote map[string]*remoteRow
	// registering holds the names of registrations and take-overs in
	// progress (Register, reconcile).
	registering map[regName]bool
	// chGen counts the hub's changes; applied holds each project's last
	// one applied, need the change each taken-over row waits for.
	chGen   uint64
	applied map[string]uint64
	need    map[string]uint64
	// The reconcile loop's lifetime (stopped first by Close).
	loopCtx    context.Context
	loopCancel context.CancelFunc
	loopWG     sync.WaitGroup

	// dirty holds the supervisors whose row may be stale, one entry per
	// row however often it changed: the persister writes each row's
	// latest state, so no change is ever dropped for want of room.
	// persistCh (one slot) wakes the persister; closing flushed makes it
	// write what is left and return (Close).
	dirtyMu   sync.Mutex
	dirty     map[*supervisor]struct{}
	persistCh chan struct{}
	flushed   chan struct{}
	wg        sync.WaitGroup
	// persistOnce starts the persister once, with the first dirty row.
	persistOnce sync.Once
	ctx         context.Context
	cancel      context.CancelFunc
}

// New returns a service; Start loads the registered servers.
func New(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	def := DefaultTiming()
	t := opts.Timing
	if t.RestartDelay <= 0 {
		t.RestartDelay = def.RestartDelay
	}
	if t.CrashWindow <= 0 {
		t.CrashWindow = def.CrashWindow
	}
	if t.CrashLimit <= 0 {
		t.CrashLimit = def.CrashLimit
	}
	if len(t.Backoff) == 0 {
		t.Backoff = def.Backoff
	}
	if t.RetryDelay <= 0 {
		t.RetryDelay = def.RetryDelay
	}
	if t.StopTimeout <= 0 {
		t.StopTimeout = def.StopTimeout
	}
	if t.ShutdownTimeout <= 0 {
		t.ShutdownTimeout = def.ShutdownTimeout
	}
	if t.StartTimeout <= 0 {
		t.StartTimeout = def.StartTimeout
	}
	if t.Heartbeat < 0 {
		t.Heartbeat = 0
	}
	if t.PingTimeout <= 0 {
		t.PingTimeout = def.PingTimeout
	}
	if t.ConnectTimeout <= 0 {
		t.ConnectTimeout = def.ConnectTimeout
	}
	if opts.Changed == nil {
		opts.Changed = func(context.Context, string) {}
	}
	if opts.NameTaken == nil {
		opts.NameTaken = func(context.Context, string, string) bool { return false }
	}
	if opts.Secrets == nil {
		opts.Secrets = func(context.Context, string) (map[string]string, error) { return nil, nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{opts: opts, eng: opts.Engine, st: opts.Store, log: opts.Logger, timing: t,
		sups: map[string]*supervisor{}, gone: map[string]chan struct{}{}, remote: map[string]*remoteRow{}, registering: map[regName]bool{}, applied: map[string]uint64{}, need: map[string]uint64{}, dirty: map[*supervisor]struct{}{}, persistCh: make(chan struct{}, 1), flushed: make(chan struct{}), ctx: ctx, cancel: cancel}
	s.loopCtx, s.loopCancel = context.WithCancel(context.Background())
	return s
}

// startPersister starts the row persister once, with the first row to
// write (the constructor starts nothing). Close takes the once before it
// waits, so a persister is either started by then or never.
func (s *Service) startPersister() { s.persistOnce.Do(func() { s.wg.Go(s.persister) }) }

// errNoEngine explains a missing engine.
func (s *Service) errNoEngine() error {
	if s.opts.EngineErr != nil {
		return switchboard.Errorf(switchboard.ErrUnavailable, "Docker engine not available: %s", switchboard.Message(s.opts.EngineErr))
	}
	return switchboard.Errorf(switchboard.ErrUnavailable, "no Docker engine configured")
}

// Start starts a supervisor for every registered server, all at once
// (what a gateway killed with -9 left is the engine's Sweep's, run before:
// servers are recreated, never adopted). It does
// not wait for them; an unreachable engine is reported in each server's
// status and retried.
func (s *Service) Start(ctx context.Context) error {
	if s.replicated() {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return switchboard.Errorf(switchboard.ErrUnavailable, "shutting down")
		}
		s.startReplicas(ctx)
		return nil
	}
	rows, err := s.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerMCPServer})
	if err != nil {
		return fmt.Errorf("listing hosted servers: %w", err)
	}
	projects := map[string]bool{}
	for _, row := range rows {
		p, inClear, err := decodeRow(s.opts.Box, row)
		if err != nil {
			s.log.Error("hosted server not started: stored registration is invalid", "hosted_id", row.ID, "err", err)
			continue
		}
		if inClear && s.opts.Box != nil {
			row = s.sealRow(ctx, row, p)
		}
		sup := newSupervisor(s, row, p)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return switchboard.Errorf(switchboard.ErrUnavailable, "shutting down")
		}
		s.sups[row.ID] = sup
		s.mu.Unlock()
		projects[row.ProjectID] = true
	}
	// The managers know the servers before they start.
	for p := range projects {
		s.opts.Changed(ctx, p)
	}
	s.mu.Lock()
	sups := slices.Collect(maps.Values(s.sups))
	s.mu.Unlock()
	for _, sup := range sups {
		if s.eng == nil {
			sup.fail(s.errNoEngine())
			continue
		}
		sup.start("", nil)
	}
	return nil
}

// Specs returns the upstream specs of a project's hosted servers, for its
// manager.
func (s *Service) Specs(project string) []switchboard.ServerSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []switchboard.ServerSpec
	for _, sup := range s.sups {
		if sup.project != project {
			continue
		}
		out = append(out, sup.spec())
	}
	for _, rem := range s.remote {
		if rem.project == project {
			out = append(out, s.remoteSpec(rem))
		}
	}
	slices.SortFunc(out, func(a, b switchboard.ServerSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// supervisor finds a project's server by row ID or name.
func (s *Service) supervisor(project, ref string) (*supervisor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sup, ok := s.sups[ref]; ok && sup.project == project {
		return sup, nil
	}
	for _, sup := range s.sups {
		if sup.project == project && sup.plan.reg.Name == ref {
			return sup, nil
		}
	}
	return nil, switchboard.Errorf(switchboard.ErrNotFound, "hosted server %q not found in project %q", switchboard.Clip(ref), project)
}

// byName finds a project's server by name, for the stream opener.
func (s *Service) byName(project, name string) *supervisor {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sup := range s.sups {
		if sup.project == project && sup.plan.reg.Name == name {
			return sup
		}
	}
	return nil
}

// Register validates reg, checks the engine has its image, stores the row
// and creates its volumes and container before answering, so a bad
// registration fails with nothing left behind. Errors: ErrInvalid (bad
// field, image missing, bad network or secret reference, a CPU or memory
// limit above what the engine's host has), ErrConflict
// (name taken), ErrNotFound (no such project), ErrUnavailable (no engine).
func (s *Service) Register(ctx context.Context, project string, reg switchboard.HostedRegistration) (switchboard.HostedStatus, error) {
	p, err := newPlan(reg)
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	if _, err := s.st.GetProject(ctx, project); err != nil {
		return switchboard.HostedStatus{}, err
	}
	// The name is this registration's from here until it ends, without
	// regMu held across the engine's work below: the reconciler, which
	// leaves a reserved name's row alone, takes over dead replicas'
	// servers meanwhile.
	s.regMu.Lock()
	if s.byName(project, p.reg.Name) != nil || s.remoteRef(project, p.reg.Name) != nil || s.reserved(project, p.reg.Name) || s.opts.NameTaken(ctx, project, p.reg.Name) {
		s.regMu.Unlock()
		return switchboard.HostedStatus{}, switchboard.Errorf(switchboard.ErrConflict, "project %q already has a server named %q; pick another name", project, p.reg.Name)
	}
	s.reserve(project, p.reg.Name)
	s.regMu.Unlock()
	defer s.unreserve(project, p.reg.Name)
	if err := s.checkSecrets(ctx, project, p); err != nil {
		return switchboard.HostedStatus{}, err
	}
	if s.eng == nil {
		return switchboard.HostedStatus{}, s.errNoEngine()
	}
	if err := s.eng.CheckImage(p.reg.Image); err != nil {
		return switchboard.HostedStatus{}, invalid("hosted server %q: %s", p.reg.Name, switchboard.Message(err))
	}
	policy := s.pullPolicy(p)
	present, err := s.eng.ImageExists(ctx, p.reg.Image)
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	if !present && policy == engine.PullNever {
		return switchboard.HostedStatus{}, invalid("hosted server %q: image %q is not present on the Docker engine and its pull policy is never; load it there first, or allow pulls (pull_policy)", p.reg.Name, p.reg.Image)
	}
	if present && policy != engine.PullAlways {
		// Present, perhaps pulled with another project's credentials:
		// this project's own access is checked before anything is stored.
		auth, err := s.registryAuth(ctx, project, p)
		if err != nil {
			return switchboard.HostedStatus{}, err
		}
		if err := authHint(s.eng.EnsureImage(ctx, p.reg.Image, engine.PullOptions{Policy: policy, Auth: auth, Owner: project})); err != nil {
			return switchboard.HostedStatus{}, switchboard.Errorf(switchboard.KindOf(err), "hosted server %q: %s", p.reg.Name, switchboard.Message(err))
		}
	}
	// Before anything is stored. An engine that does not answer here is
	// asked again when the container is created, which checks again.
	if info, err := s.engineInfo(ctx); err == nil {
		if err := p.fitsHost(info); err != nil {
			return switchboard.HostedStatus{}, err
		}
	}
	// A runtime that is not listed, failed its probe or cannot give the
	// server the network it needs is refused here, before anything is
	// stored, not found out by a status stuck in starting.
	if _, err := s.eng.ChooseRuntime(ctx, p.reg.Runtime, engine.RuntimeNeeds{Network: p.network != ""}); err != nil {
		if errors.Is(err, switchboard.ErrConfig) {
			return switchboard.HostedStatus{}, invalid("hosted server %q: %s", p.reg.Name, switchboard.Message(err))
		}
		return switchboard.HostedStatus{}, err
	}
	cfg, err := encodeRow(s.opts.Box, project, p.reg)
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	row, err := s.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: project, ContainerType: switchboard.ContainerMCPServer,
		Image: p.reg.Image, Config: cfg, Status: switchboard.HostedStarting, Provider: engine.ProviderName})
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	s.claim(ctx, row.ID)
	if !present || policy == engine.PullAlways {
		// The image comes from its registry first: the supervisor pulls
		// it (status "pulling", with progress) and then starts the
		// container; a pull that fails shows in status and is retried.
		sup := newSupervisor(s, row, p)
		sup.state = switchboard.HostedPulling
		if err := s.adopt(ctx, sup, "", nil); err != nil {
			return switchboard.HostedStatus{}, err
		}
		s.log.Info("hosted server registered; pulling its image", "project", project, "server", p.reg.Name, "image", p.reg.Image, "hosted_id", row.ID)
		return s.ownStatus(sup.status()), nil
	}
	// A client that goes away must not cut a create off half-way (the
	// container would exist without anyone knowing its ID).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	id, env, rtWarning, err := s.create(cctx, project, row.ID, p)
	cancel()
	if err != nil {
		s.cleanup(context.WithoutCancel(ctx), row.ID, p, false)
		if derr := s.st.DeleteWorkspace(context.WithoutCancel(ctx), row.ID); derr != nil {
			s.log.Error("removing the row of a failed registration", "hosted_id", row.ID, "err", derr)
		}
		s.release(context.WithoutCancel(ctx), row.ID)
		return switchboard.HostedStatus{}, err
	}
	sup := newSupervisor(s, row, p)
	sup.rtWarning = rtWarning
	if err := s.adopt(ctx, sup, id, env); err != nil {
		return switchboard.HostedStatus{}, err
	}
	// The engine checks some things (the network, the runtime) only at
	// start: a container that cannot start fails the registration.
	var startErr error
	select {
	case startErr = <-sup.first:
	case <-ctx.Done():
		startErr = ctx.Err()
	}
	if startErr != nil {
		s.mu.Lock()
		delete(s.sups, row.ID)
		s.mu.Unlock()
		sup.close(s.timing.StopTimeout)
		bg := context.WithoutCancel(ctx)
		s.cleanup(bg, row.ID, p, false)
		if derr := s.st.DeleteWorkspace(bg, row.ID); derr != nil {
			s.log.Error("removing the row of a failed registration", "hosted_id", row.ID, "err", derr)
		}
		s.release(bg, row.ID)
		s.opts.Changed(bg, project)
		if errors.Is(startErr, switchboard.ErrNotFound) || errors.Is(startErr, switchboard.ErrInvalid) {
			return switchboard.HostedStatus{}, invalid("hosted server %q: the container could not start: %s", p.reg.Name, switchboard.Message(startErr))
		}
		return switchboard.HostedStatus{}, startErr
	}
	s.log.Info("hosted server registered", "project", project, "server", p.reg.Name, "image", p.reg.Image, "hosted_id", row.ID)
	return s.ownStatus(sup.status()), nil
}

// adopt makes a new registration's supervisor the service's and starts
// it on container id ("": it makes one), telling the project's manager
// first, so it knows the server before it starts. A service shutting
// down refuses it and removes its container.
func (s *Service) adopt(ctx context.Context, sup *supervisor, id string, env []string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.cleanup(context.WithoutCancel(ctx), sup.id, sup.plan, true)
		return switchboard.Errorf(switchboard.ErrUnavailable, "shutting down")
	}
	s.sups[sup.id] = sup
	s.mu.Unlock()
	s.opts.Changed(ctx, sup.project)
	sup.start(id, env)
	return nil
}

// sealRow rewrites a row written before literal environment values were
// sealed in the new form. A failure leaves the row as it was (it still
// reads) and is retried at the next start.
func (s *Service) sealRow(ctx context.Context, row switchboard.Workspace, p plan) switchboard.Workspace {
	cfg, err := encodeRow(s.opts.Box, row.ProjectID, p.reg)
	if err == nil {
		next := row
		next.Config = cfg
		if next, err = s.st.UpdateWorkspace(ctx, next); err == nil {
			s.log.Info("hosted server's literal environment values are now stored sealed", "project", row.ProjectID, "server", p.reg.Name, "hosted_id", row.ID)
			return next
		}
	}
	s.log.Warn("hosted server's literal environment values are still stored in clear; retried at the next start", "hosted_id", row.ID, "err", err)
	return row
}

// checkSecrets refuses references to secrets the project lacks.
func (s *Service) checkSecrets(ctx context.Context, project string, p plan) error {
	refs := secretRefs(refValues(p.reg))
	if len(refs) == 0 {
		return nil
	}
	vals, err := s.opts.Secrets(ctx, project)
	if err != nil {
		return err
	}
	var missing []string
	for _, r := range refs {
		if _, ok := vals[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return invalid("hosted server %q: environment or registry_auth references secret %s, which project %q does not have; set it first (PUT /api/v1/projects/%s/secrets/NAME)",
			p.reg.Name, strings.Join(missing, ", "), project, project)
	}
	return nil
}

// labels of a row's engine objects.
func labels(project, rowID, name string) map[string]string {
	return map[string]string{engine.LabelKind: KindMCPServer, engine.LabelRef: rowID, engine.LabelProject: project, LabelServer: name}
}

// volumeName is the named volume of one row and container path: stable,
// so it survives restarts, crashes and gateway restarts.
func (s *Service) volumeName(rowID, path string) string {
	return engine.Name("mcp", s.eng.Instance(), rowID, path)
}

// volumeFor is the volume of a row's path carrying labels l: the one an
// earlier version named (engine.LegacyHostedVolume) when it exists with
// exactly these owner labels, else volumeName.
func (s *Service) volumeFor(ctx context.Context, rowID, path string, l map[string]string) (string, error) {
	return s.eng.FindVolume(ctx, s.volumeName(rowID, path), l, engine.LegacyHostedVolume(rowID, path))
}

// volumeLabels are the labels of a row's volume at path.
func volumeLabels(project, rowID, name, path string) map[string]string {
	l := labels(project, rowID, name)
	l[LabelPath] = path
	return l
}

// create makes a row's volumes (when missing) and a new container; any
// container the row already has is removed first, so there is never more
// than one. It returns the container ID and the resolved environment.
func (s *Service) create(ctx context.Context, project, rowID string, p plan) (id string, env []string, rtWarning string, err error) {
	if s.eng == nil {
		return "", nil, "", s.errNoEngine()
	}
	if _, err := s.eng.RemoveOwned(ctx, map[string]string{engine.LabelKind: KindMCPServer, engine.LabelRef: rowID}); err != nil {
		return "", nil, "", err
	}
	env, err = s.environment(ctx, project, p)
	if err != nil {
		return "", nil, "", err
	}
	info, err := s.engineInfo(ctx)
	if err != nil {
		return "", nil, "", err
	}
	// Every start checks: a server of the servers file is stored without
	// asking the engine, and its status says why it does not start.
	if err := p.fitsHost(info); err != nil {
		return "", nil, "", err
	}
	spec := engine.Spec{
		Image:        p.reg.Image,
		Cmd:          p.reg.Args,
		Env:          env,
		Labels:       labels(project, rowID, p.reg.Name),
		Stdin:        p.stdio,
		NanoCPUs:     p.nanoCPUs,
		MemoryBytes:  p.memoryBytes,
		PidsLimit:    DefaultPids,
		Network:      p.network,
		ReadOnlyRoot: p.readOnlyRoot,
		Tmpfs:        map[string]string{"/tmp": "rw,nosuid,nodev,size=64m"},
		StopTimeout:  s.timing.StopTimeout,
	}
	if info.DiskQuota {
		spec.DiskBytes, spec.DiskQuota = p.diskBytes, true
	}
	// The registration's runtime, else the gateway's (auto: gVisor when
	// the engine has it and it passed its probe). Status reports the
	// runtime the container got, and why gVisor was passed over.
	rt, err := s.eng.ChooseRuntime(ctx, p.reg.Runtime, engine.RuntimeNeeds{Network: p.network != ""})
	if err != nil {
		return "", nil, "", err
	}
	spec.Runtime = rt.Runtime
	if p.reg.Command != "" {
		spec.Entrypoint = []string{p.reg.Command}
	}
	for _, path := range p.reg.Volumes {
		l := volumeLabels(project, rowID, p.reg.Name, path)
		name, err := s.volumeFor(ctx, rowID, path, l)
		if err != nil {
			return "", nil, "", err
		}
		if err := s.eng.CreateVolume(ctx, name, l); err != nil {
			return "", nil, "", err
		}
		spec.Mounts = append(spec.Mounts, engine.Mount{Volume: name, Target: path})
	}
	id, err = s.eng.Create(ctx, spec)
	if err != nil {
		return "", nil, "", err
	}
	return id, env, rt.Warning, nil
}

// environment resolves `${NAME}` in the registration's values from the
// project's secrets.
func (s *Service) environment(ctx context.Context, project string, p plan) ([]string, error) {
	if len(p.reg.Environment) == 0 {
		return nil, nil
	}
	vals, err := s.opts.Secrets(ctx, project)
	if err != nil {
		return nil, err
	}
	env, missing := ExpandEnv(p.reg.Environment, nil, vals)
	if len(missing) > 0 {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "hosted server %q: secret %s of project %q is missing; set it and restart the server", p.reg.Name, strings.Join(missing, ", "), project)
	}
	return env, nil
}

// pullPolicy is p's pull policy, or the gateway's.
func (s *Service) pullPolicy(p plan) engine.PullPolicy {
	if p.reg.PullPolicy != "" {
		return engine.PullPolicy(p.reg.PullPolicy)
	}
	if s.opts.PullPolicy != "" {
		return s.opts.PullPolicy
	}
	return engine.PullIfNotPresent
}

// registryAuth resolves p's registry credentials from project's
// secrets; nil when it has none.
func (s *Service) registryAuth(ctx context.Context, project string, p plan) (*engine.RegistryAuth, error) {
	a := p.reg.RegistryAuth
	if a == nil {
		return nil, nil
	}
	vals, err := s.opts.Secrets(ctx, project)
	if err != nil {
		return nil, err
	}
	lines, missing := ExpandEnv(map[string]string{"U": a.Username, "P": a.Password}, nil, vals)
	if len(missing) > 0 {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "hosted server %q: registry_auth needs secret %s of project %q, which is missing; set it and restart the server", p.reg.Name, strings.Join(missing, ", "), project)
	}
	out := &engine.RegistryAuth{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, "=")
		if k == "U" {
			out.Username = v
		} else {
			out.Password = v
		}
	}
	return out, nil
}

// engineInfo is the engine's Info (which the engine keeps a minute).
func (s *Service) engineInfo(ctx context.Context) (engine.Info, error) { return s.eng.Info(ctx) }

// limits reports a plan's effective limits.
func (s *Service) limits(p plan) switchboard.HostedEffectiveLimits {
	l := switchboard.HostedEffectiveLimits{CPU: float64(p.nanoCPUs) / 1e9, MemoryBytes: p.memoryBytes, DiskBytes: p.diskBytes, Pids: DefaultPids}
	var info engine.Info
	known := false
	if s.eng != nil {
		info, known = s.eng.KnownInfo()
	}
	switch {
	case !known:
		l.DiskNote = "unknown until the engine answers"
	case info.DiskQuota:
		l.DiskEnforced = true
	default:
		l.DiskNote = fmt.Sprintf("not enforced: the engine's storage driver (%s) has no disk quotas; the root filesystem is read-only where the image allows, /tmp is a 64 MiB tmpfs, and volumes are not size-capped", info.Driver)
	}
	return l
}

// cleanup removes a row's containers and, unless keepVolumes, its volumes.
func (s *Service) cleanup(ctx context.Context, rowID string, p plan, keepVolumes bool) {
	if s.eng == nil {
		return
	}
	if _, err := s.eng.RemoveOwned(ctx, map[string]string{engine.LabelKind: KindMCPServer, engine.LabelRef: rowID}); err != nil {
		s.log.Warn("removing a hosted server's containers", "hosted_id", rowID, "err", err)
	}
	if keepVolumes {
		return
	}
	// By label, not by name: an earlier version's volume the row adopted
	// (see volumeFor) goes too.
	for _, path := range p.reg.Volumes {
		vs, err := s.eng.ListVolumes(ctx, map[string]string{engine.LabelKind: KindMCPServer, engine.LabelRef: rowID, LabelPath: path})
		if err != nil {
			s.log.Warn("listing a hosted server's volumes", "hosted_id", rowID, "err", err)
			continue
		}
		for _, v := range vs {
			if err := s.eng.RemoveVolume(ctx, v.Name); err != nil {
				s.log.Warn("removing a hosted server's volume", "hosted_id", rowID, "volume", v.Name, "err", err)
			}
		}
	}
}

// List reports every hosted server of a project, oldest first, without
// usage figures.
func (s *Service) List(ctx context.Context, project string) ([]switchboard.HostedStatus, error) {
	if _, err := s.st.GetProject(ctx, project); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var sups []*supervisor
	for _, sup := range s.sups {
		if sup.project == project {
			sups = append(sups, sup)
		}
	}
	s.mu.Unlock()
	out := make([]switchboard.HostedStatus, 0, len(sups))
	for _, sup := range sups {
		out = append(out, s.ownStatus(sup.status()))
	}
	s.mu.Lock()
	for _, rem := range s.remote {
		if rem.project == project {
			out = append(out, s.remoteStatus(rem))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b switchboard.HostedStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Get reports one hosted server (by row ID or name), with CPU and memory
// usage from the engine when its container runs. Errors: ErrNotFound.
func (s *Service) Get(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	st, own, err := s.brief(project, ref)
	if err != nil {
		return st, err
	}
	if own && st.ContainerID != "" && st.StartedAt != nil && s.eng != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if u, err := s.eng.Stats(sctx, st.ContainerID); err == nil {
			st.Usage = &switchboard.HostedUsage{CPUPercent: u.CPUPercent, MemoryBytes: u.MemoryBytes, Pids: u.Pids}
		}
	}
	return st, nil
}

// Brief is a hosted server's status without the engine's usage figures
// (no engine call), for the project's server list; false when project has
// no hosted server ref.
func (s *Service) Brief(project, ref string) (switchboard.HostedStatus, bool) {
	st, _, err := s.brief(project, ref)
	return st, err == nil
}

// brief is the status this replica knows of ref: its own supervisor's
// (own), or the owner replica's as the store says. Errors: ErrNotFound.
func (s *Service) brief(project, ref string) (st switchboard.HostedStatus, own bool, err error) {
	sup, err := s.supervisor(project, ref)
	if err != nil {
		if rem := s.remoteRef(project, ref); rem != nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.remoteStatus(rem), false, nil
		}
		return switchboard.HostedStatus{}, false, err
	}
	return s.ownStatus(sup.status()), true, nil
}

// Restart replaces a server's container (SIGTERM, up to StopTimeout, then
// a new container from the same configuration) and resets its crash
// counters. Errors: ErrNotFound, ErrUnavailable.
func (s *Service) Restart(ctx context.Context, project, ref string) (switchboard.HostedStatus, error) {
	sup, err := s.supervisor(project, ref)
	if rem := s.remoteRef(project, ref); err != nil && rem != nil {
		b, remote, rerr := s.remoteOp(ctx, rem, "restart", nil)
		if remote {
			var st switchboard.HostedStatus
			if rerr == nil {
				rerr = json.Unmarshal(b, &st)
			}
			return st, rerr
		}
		sup, err = s.supervisor(project, ref) // this replica owns it now
	}
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	if s.eng == nil {
		return switchboard.HostedStatus{}, s.errNoEngine()
	}
	if err := sup.requestRestart(ctx); err != nil {
		return switchboard.HostedStatus{}, err
	}
	s.log.Info("hosted server restart requested", "project", project, "server", sup.plan.reg.Name)
	return s.ownStatus(sup.status()), nil
}

// Delete stops and removes a server's container, its volumes unless
// keepVolumes, and its row. Errors: ErrNotFound.
func (s *Service) Delete(ctx context.Context, project, ref string, keepVolumes bool) error {
	if rem := s.remoteRef(project, ref); rem != nil {
		if _, remote, err := s.remoteOp(ctx, rem, "delete", url.Values{"keep_volumes": {strconv.FormatBool(keepVolumes)}}); remote {
			return err
		}
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	sup, err := s.supervisor(project, ref)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.sups, sup.id)
	s.mu.Unlock()
	s.opts.Changed(ctx, project) // the manager lets go of the stream first
	sup.close(s.timing.StopTimeout)
	s.cleanup(context.WithoutCancel(ctx), sup.id, sup.plan, keepVolumes)
	if err := s.st.DeleteWorkspace(ctx, sup.id); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		return err
	}
	s.release(context.WithoutCancel(ctx), sup.id)
	s.log.Info("hosted server deleted", "project", project, "server", sup.plan.reg.Name, "kept_volumes", keepVolumes)
	return nil
}

// Logs returns the tail of a server's container log, with secret values
// redacted: its stderr only when the gateway speaks MCP over its stdio
// (stdout is then the JSON-RPC channel, whose traffic is no log and may
// carry tool results), stderr and stdout of a server reached over HTTP.
func (s *Service) Logs(ctx context.Context, project, ref string, lines int) (string, error) {
	sup, err := s.supervisor(project, ref)
	if err != nil {
		return "", err
	}
	sup.mu.Lock()
	id := sup.containerID
	sup.mu.Unlock()
	if id == "" {
		sup.mu.Lock()
		defer sup.mu.Unlock()
		if sup.lastCrash != nil {
			return sup.lastCrash.Stderr, nil
		}
		return "", nil
	}
	if s.eng == nil {
		return "", s.errNoEngine()
	}
	logs := s.eng.Logs
	if sup.plan.stdio {
		logs = s.eng.StderrLogs
	}
	out, err := logs(ctx, id, lines)
	if err != nil {
		return "", err
	}
	sup.mu.Lock()
	defer sup.mu.Unlock()
	return sup.redact(out), nil
}

// Call sends one JSON-RPC request through the server's bridge (serialized
// with tool calls). A JSON-RPC error from the server comes back as
// *switchboard.RPCError. Errors: ErrNotFound, ErrUnavailable, ErrTimeout.
func (s *Service) Call(ctx context.Context, project, ref, method string, params json.RawMessage) (json.RawMessage, error) {
	var p plan
	if sup, err := s.supervisor(project, ref); err == nil {
		p = sup.plan
	} else if rem := s.remoteRef(project, ref); rem != nil {
		// Through this replica's connection to the owner.
		p = rem.plan
	} else {
		return nil, err
	}
	if method == "" {
		return nil, invalid("method is required, such as \"tools/list\"")
	}
	up, err := s.upstreams(project)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.callTimeout)
	defer cancel()
	return up.Request(ctx, p.reg.Name, method, rawParams(params))
}

func (s *Service) upstreams(project string) (Upstreams, error) {
	if s.opts.Upstreams == nil {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "project %q has no upstream pool", project)
	}
	return s.opts.Upstreams(project)
}

// persist marks a supervisor's row for the persister to write. It never
// blocks (called with the supervisor's lock held) and never drops a
// change: the row is written with the state current when the persister
// gets to it, however many changes came before.
func (s *Service) persist(sup *supervisor) {
	s.dirtyMu.Lock()
	s.dirty[sup] = struct{}{}
	s.dirtyMu.Unlock()
	s.startPersister()
	select {
	case s.persistCh <- struct{}{}:
	default: // already woken: it takes the whole set
	}
}

// persister writes status and container ID to the rows marked by
// persist, each row's latest state once per wake-up; on Close it writes
// what is left (the stopped containers' last states) before returning.
func (s *Service) persister() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.flushed:
			s.writeDirty()
			return
		case <-s.persistCh:
			s.writeDirty()
		}
	}
}

func (s *Service) writeDirty() {
	s.dirtyMu.Lock()
	batch := s.dirty
	s.dirty = map[*supervisor]struct{}{}
	s.dirtyMu.Unlock()
	for sup := range batch {
		s.write(sup)
	}
}

// write records one supervisor's current status in its row.
func (s *Service) write(sup *supervisor) {
	sup.mu.Lock()
	status, cid, provider := sup.state, sup.containerID, providerOf(sup.runtime)
	sup.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	row, err := s.st.GetWorkspace(ctx, sup.id)
	if err == nil && (row.Status != status || row.ContainerID != cid || row.Provider != provider) {
		row.Status, row.ContainerID, row.Provider = status, cid, provider
		_, err = s.st.UpdateWorkspace(ctx, row)
	}
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) && s.ctx.Err() == nil {
		s.log.Debug("recording a hosted server's status", "hosted_id", sup.id, "err", err)
	}
}

// providerOf is what a row's provider says ran: "docker" until a
// container has run, then "docker/<runtime>" ("docker/runsc" under gVisor,
// "docker/runc" otherwise).
func providerOf(runtime string) string {
	if runtime == "" {
		return engine.ProviderName
	}
	return engine.ProviderName + "/" + runtime
}

// Close stops every container (SIGTERM, then SIGKILL after
// ShutdownTimeout), all at once, and removes them; volumes stay.
// Drain is called when the gateway starts stopping, before its client
// sessions and upstream connections close: from then on a hop from
// another replica is answered 421, so that replica waits for the next
// owner (this one lets its leases go in Close) instead of getting an
// error from a connection that is closing. Nothing has run for a hop
// answered so. It returns once the hops being relayed have their
// answers, or ctx ends.
func (s *Service) Drain(ctx context.Context) {
	s.hopMu.Lock()
	s.draining.Store(true)
	s.hopMu.Unlock()
	done := make(chan struct{})
	go func() { s.hops.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// enterHop counts a hop from another replica being relayed here; false
// once draining (the hop is answered 421).
func (s *Service) enterHop() bool {
	s.hopMu.Lock()
	defer s.hopMu.Unlock()
	if s.draining.Load() {
		return false
	}
	s.hops.Add(1)
	return true
}

func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	// No take-over starts from now on.
	s.loopCancel()
	s.loopWG.Wait()
	s.mu.Lock()
	sups := slices.Collect(maps.Values(s.sups))
	s.mu.Unlock()
	timeout := s.timing.ShutdownTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = max(time.Until(d)-time.Second, 0)
	}
	var wg sync.WaitGroup
	for _, sup := range sups {
		wg.Go(func() {
			sup.close(timeout)
			// Drained: another replica takes it over at its next tick.
			s.release(context.WithoutCancel(ctx), sup.id)
		})
	}
	wg.Wait()
	// The rows get the stopped servers' last states, unless ctx ends
	// first.
	stop := context.AfterFunc(ctx, s.cancel)
	defer stop()
	close(s.flushed)
	s.persistOnce.Do(func() {}) // a persister starting now has started
	s.wg.Wait()
	s.cancel()
	return nil
}

// WaitStatus waits until cond holds for a server's status (checked at
// every state change), or ctx ends. Errors: ErrNotFound, ErrTimeout.
func (s *Service) WaitStatus(ctx context.Context, project, ref string, cond func(switchboard.HostedStatus) bool) (switchboard.HostedStatus, error) {
	sup, err := s.supervisor(project, ref)
	if err != nil && s.remoteRef(project, ref) != nil {
		// Another replica's: its row, as the owner stores it, every tick.
		t := time.NewTicker(s.opts.Replication.Tick)
		defer t.Stop()
		for {
			st, err := s.Get(ctx, project, ref)
			if err != nil || cond(st) {
				return st, err
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return st, switchboard.Errorf(switchboard.ErrTimeout, "hosted server %q: still %s on its owner replica", st.Name, st.Status)
			}
		}
	}
	if err != nil {
		return switchboard.HostedStatus{}, err
	}
	for {
		sup.mu.Lock()
		ch := sup.changed
		sup.mu.Unlock()
		st := sup.status()
		if cond(st) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, switchboard.Errorf(switchboard.ErrTimeout, "hosted server %q: still %s (%s)", sup.plan.reg.Name, st.Status, st.LastError)
		}
	}
}

// All reports every hosted server of every project, without usage (for
// metrics).
func (s *Service) All() []switchboard.HostedStatus {
	s.mu.Lock()
	sups := slices.Collect(maps.Values(s.sups))
	s.mu.Unlock()
	out := make([]switchboard.HostedStatus, 0, len(sups))
	for _, sup := range sups {
		out = append(out, sup.status())
	}
	return out
}

// ProjectGone stops and removes the containers and volumes of every
// hosted server of a deleted project (the store deleted their rows with
// it). It returns at once, with a channel closed when the removal is done
// (a call during a removal of the same project returns that one's); Close
// waits for it too.
func (s *Service) ProjectGone(project string) <-chan struct{} {
	s.mu.Lock()
	if ch, ok := s.gone[project]; ok {
		s.mu.Unlock()
		return ch
	}
	var gone []*supervisor
	for id, sup := range s.sups {
		if sup.project == project {
			gone = append(gone, sup)
			delete(s.sups, id)
		}
	}
	for id, rem := range s.remote {
		if rem.project == project {
			delete(s.remote, id)
		}
	}
	done := make(chan struct{})
	if len(gone) == 0 || s.closed {
		s.mu.Unlock()
		close(done)
		return done
	}
	s.gone[project] = done
	s.mu.Unlock()
	s.wg.Go(func() {
		defer func() {
			s.mu.Lock()
			delete(s.gone, project)
			s.mu.Unlock()
			close(done)
		}()
		for _, sup := range gone {
			sup.close(s.timing.StopTimeout)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			s.cleanup(ctx, sup.id, sup.plan, false)
			s.release(ctx, sup.id)
			cancel()
			s.log.Info("hosted server removed with its project", "project", project, "server", sup.plan.reg.Name)
		}
	})
	return done
}
