package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// Engine is what the sandbox needs from the Docker engine (engine.Engine).
type Engine interface {
	Ping(ctx context.Context) error
	Info(ctx context.Context) (engine.Info, error)
	ImageExists(ctx context.Context, ref string) (bool, error)
	EnsureImage(ctx context.Context, ref string, opts engine.PullOptions) error
	ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error
	Create(ctx context.Context, s engine.Spec) (string, error)
	Start(ctx context.Context, id string) error
	Remove(ctx context.Context, id string) error
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	Exec(ctx context.Context, id string, s engine.ExecSpec) (int, error)
	WaitNextExit(ctx context.Context, id string) <-chan engine.Exit
	Launch(ctx context.Context, s engine.Spec, watch context.Context) (engine.Running, error)
	StartAttached(ctx context.Context, id string, watch context.Context) (engine.Running, error)
	Inspect(ctx context.Context, id string) (engine.State, error)
	Logs(ctx context.Context, id string, tail int) (string, error)
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	CreateSizedVolume(ctx context.Context, name string, labels map[string]string, d engine.Disk) error
	DiskLimits() error
	RemoveVolume(ctx context.Context, name string) error
	InspectVolume(ctx context.Context, name string) (engine.Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]engine.Volume, error)
	Owner() string
	ChooseRuntime(ctx context.Context, override string, needs engine.RuntimeNeeds) (engine.RuntimeChoice, error)
	ChosenRuntime(ctx context.Context, override string, needs engine.RuntimeNeeds) (engine.RuntimeChoice, bool, error)
	Runtimes() engine.RuntimeReport
}

// Labels on what the sandbox creates, beside the engine's own.
const (
	KindSession   = "sandbox"   // engine.LabelKind of session containers
	KindWorkspace = "workspace" // engine.LabelKind of workspace volumes
	KindHelper    = "helper"    // engine.LabelKind of a workspace copy's container
)

// Volume is mounted into every session: a named Docker volume, or with
// Bind an absolute host directory. Binds come from the operator's
// MCP_SERVER_SANDBOX_VOLUMES only, never from a tool argument or the API.
type Volume struct {
	Source, Target string
	ReadOnly       bool
	Bind           bool
}

// Options configure a Service. Zero durations and limits take defaults.
type Options struct {
	Engine      Engine
	Store       switchboard.WorkspaceStore // nil: workspaces are not recorded
	ImagePython string
	ImageNode   string
	// PullPolicy is how images that name a registry are pulled ("" is
	// if-not-present); RegistryAuth, when set, are the gateway's
	// credentials for that registry.
	PullPolicy     engine.PullPolicy
	RegistryAuth   *engine.RegistryAuth
	SessionTimeout time.Duration // idle time before a session is stopped; default 30m
	MaxSessions    int           // per project; default 10
	DefaultTimeout time.Duration // of one execution; default 30s
	MaxTimeout     time.Duration // default 5m
	OutputLimit    int           // bytes kept of stdout and of stderr; default 1 MiB
	Network        string        // "" = none
	Volumes        []Volume
	// SweepInterval is how often idle sessions are looked for; default a
	// tenth of SessionTimeout, at most 1m. Tests shorten it.
	SweepInterval time.Duration
	// KillGrace is how long an execution may outlive its timeout (output
	// still draining) before it is abandoned; default 5s.
	KillGrace time.Duration
	// SupervisorWait bounds the wait for a new session's supervisor to
	// greet; default 15s. Without one, executions use docker exec.
	SupervisorWait time.Duration
	// MaxFileBytes caps each file an execution writes (RLIMIT_FSIZE);
	// default the flavor's memory size (1, 2 or 4 GiB).
	MaxFileBytes int64
	// NoSupervisor makes every execution a docker exec (for comparison).
	NoSupervisor bool
	// WorkspaceRetention is how long an anonymous workspace (made by an
	// execution without session_id, never attached, detached or
	// snapshotted) is kept once its session has ended; default 24h. A
	// negative value deletes it as soon as its session ends.
	WorkspaceRetention time.Duration
	// WorkspaceBytes caps what a workspace (or snapshot) holds: its
	// volume is a file system of that size (engine.CreateSizedVolume) and
	// a program writing past it gets "no space left on device"; default 1
	// GiB, negative: no limit. An engine without sized volumes
	// (DiskLimits) gets plain volumes, said once.
	WorkspaceBytes int64
	// WarmPool is how many started containers, each on a fresh empty
	// workspace, are kept ready per project, template and flavor once
	// that project started a session of them (see pool.go); 0: none.
	WarmPool int
	// WarmPoolMax is how far a pool grows when new sessions find it
	// empty: each such miss doubles its target, up to this (within
	// MaxSessions); at most WarmPool: it never grows.
	WarmPoolMax int
	// PoolIdle drains a pool nobody took from for this long; default
	// SessionTimeout.
	PoolIdle time.Duration
	// Alive reports whether gateway process owner lives (lease.Process.
	// Alive): tend removes the warm workspaces of one that does not. nil:
	// other processes' warm workspaces are left alone.
	Alive  func(ctx context.Context, owner string) (bool, error)
	Logger *slog.Logger
}

// Service runs sandbox sessions for every project. Its tools are served
// per project through Tools(project).
type Service struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session // by id
	pending  map[string]int      // sessions being created, per project
	settled  *sync.Cond          // on mu: a pending start ended
	closed   bool
	pool     poolState // on mu

	wsMu     sync.Mutex     // serializes attach, detach, snapshot, restore and deletions
	rowMu    [32]sync.Mutex // a workspace row's read-modify-write, by a hash of its id
	deleting map[string]int // projects being deleted (DeleteProject): no new session

	plainOnce sync.Once // the warning that workspaces have no size limit

	probe    Status    // the last engine probe for Status
	probedAt time.Time // when; zero: never
	choosing bool      // a runtime choice Status started is under way

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// sweepOnce starts the sweeper once (Start, or the first session).
	sweepOnce sync.Once
	// step, when set (BenchmarkStartSteps), hears how long each step of
	// a session's start took.
	step func(name string, d time.Duration)
}

// timed reports to s.step that step name, begun at t0, has ended, and
// returns now (the next step's start).
func (s *Service) timed(name string, t0 time.Time) time.Time {
	now := time.Now()
	if s.step != nil {
		s.step(name, now.Sub(t0))
	}
	return now
}

// session is one running container.
type session struct {
	id, project      string
	template, flavor string
	image            string
	workspaceID      string
	volume           string
	createdAt        time.Time
	exec             sync.RWMutex // executions share it; snapshot and stop take it alone
	mu               sync.Mutex   // guards the fields below
	containerID      string       // replaced when the container vanished (revive)
	runtime          string       // what containerID runs under ("runc", "runsc")
	lastUsed         time.Time
	agentSession     string
	attachedBy       string      // the agent session holding it through attach_workspace; "" none
	person           string      // the signed-in person it is bound to (CallRequest.Person); "" none
	supMu            sync.Mutex  // guards sup
	sup              *supervisor // nil: executions use docker exec
	running          int
	stopped          bool
	shutdown         bool // stopped because its gateway shut down: resumable elsewhere
	dropped          bool // its anonymous workspace was deleted when it stopped
}

// container returns x's container id.
func (x *session) container() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.containerID
}

// New returns a Service and starts its idle sweeper; Close stops both.
func New(opts Options) *Service {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10
	}
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = 30 * time.Second
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = 5 * time.Minute
	}
	if opts.DefaultTimeout > opts.MaxTimeout {
		opts.DefaultTimeout = opts.MaxTimeout
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = 1 << 20
	}
	if opts.SweepInterval <= 0 {
		opts.SweepInterval = min(opts.SessionTimeout/10, time.Minute)
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 5 * time.Second
	}
	if opts.SupervisorWait <= 0 {
		opts.SupervisorWait = 15 * time.Second
	}
	if opts.WorkspaceRetention == 0 {
		opts.WorkspaceRetention = 24 * time.Hour
	}
	if opts.WorkspaceBytes == 0 {
		opts.WorkspaceBytes = 1 << 30
	}
	if opts.PoolIdle <= 0 {
		opts.PoolIdle = opts.SessionTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{opts: opts, log: opts.Logger, sessions: map[string]*session{}, pending: map[string]int{}, deleting: map[string]int{}, ctx: ctx, cancel: cancel}
	s.settled = sync.NewCond(&s.mu)
	s.pool.init()
	return s
}

// startSweep starts the sweeper (idle sessions, retention, reconcile)
// once: at Start, or with the first session of a service never started.
// Close takes it too, so none starts after.
func (s *Service) startSweep() {
	s.sweepOnce.Do(func() {
		if s.ctx.Err() == nil {
			s.wg.Go(s.sweep)
		}
	})
}

// Close stops every session (containers removed, workspaces kept), the
// sweeper, and drains the warm pool (containers and their workspaces
// removed). It is idempotent.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	list := make([]*session, 0, len(s.sessions))
	for _, x := range s.sessions {
		list = append(list, x)
	}
	warm := s.drainLocked(func(poolKey) bool { return true })
	s.mu.Unlock()
	s.cancel()
	s.sweepOnce.Do(func() {}) // a sweeper starting now has started
	s.wg.Wait()               // fills under way removed what they made
	s.removeAll(warm)
	var wg sync.WaitGroup
	errs := make([]error, len(list))
	for i, x := range list {
		wg.Go(func() { errs[i] = s.end(ctx, x, stopShutdown) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// sweep stops sessions idle longer than SessionTimeout, then tends the
// workspace rows (tend).
func (s *Service) sweep() {
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var idle []*session
		s.mu.Lock()
		for _, x := range s.sessions {
			x.mu.Lock()
			if x.running == 0 && now.Sub(x.lastUsed) >= s.opts.SessionTimeout {
				idle = append(idle, x)
			}
			x.mu.Unlock()
		}
		s.mu.Unlock()
		for _, x := range idle {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
			if err := s.end(ctx, x, "idle"); err != nil {
				s.log.Warn("sandbox: stopping an idle session", "session", x.id, "err", err)
			}
			cancel()
		}
		s.drainIdle(now)
		ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
		s.tend(ctx)
		cancel()
	}
}

// NewSessionID is a new sandbox session id: "sbx-" and 16 hex digits, a
// look of its own among the ids a client reads (MCP sessions are "mcp-",
// the instance "sb-").
func NewSessionID() string { return newID("sbx-") }

// newID returns a random identifier with prefix p.
func newID(p string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return p + hex.EncodeToString(b[:])
}

// lookup returns project's session id. Errors: ErrNotFound (-32602),
// for an unknown id and for another project's alike.
func (s *Service) lookup(project, id string) (*session, error) {
	s.mu.Lock()
	x, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok || x.project != project {
		return nil, s.unknownSession(id)
	}
	return x, nil
}

// unknownSession is the answer for a session id that names no session
// of the project, or one of another person (lookupAs).
func (s *Service) unknownSession(id string) error {
	return switchboard.Errorf(switchboard.ErrNotFound, "session not found: %q is not a session of this project (it may have been stopped or expired after %s idle); omit session_id to start a new one", id, s.opts.SessionTimeout)
}

// lookupAs is lookup for a tool call of person (CallRequest.Person): a
// session bound to another person, or to a person when the caller has
// none, answers exactly as an unknown id, so a handle tells nobody else
// that it exists. Errors: ErrNotFound.
func (s *Service) lookupAs(project, person, id string) (*session, error) {
	x, err := s.lookup(project, id)
	if err != nil {
		return nil, err
	}
	if !x.reachableBy(person) {
		return nil, s.unknownSession(id)
	}
	return x, nil
}

// reachableBy reports whether person's calls may name x: an unbound
// session is the project's, as it was before sign-in; a bound one is
// its person's only.
func (x *session) reachableBy(person string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.person == "" || x.person == person
}

// engineInfo is what the engine offers (runtimes, CPUs, memory); the
// engine keeps its answer.
func (s *Service) engineInfo(ctx context.Context) (engine.Info, error) {
	info, err := s.opts.Engine.Info(ctx)
	if err != nil {
		return info, engineError(err)
	}
	return info, nil
}

// chooseRuntime is the engine's runtime choice for a session container
// (the gateway's setting; auto prefers gVisor once it passed its probe).
// Errors: ErrConfig for a chosen runtime the engine lacks or that failed
// its probe, ErrUnavailable.
func (s *Service) chooseRuntime(ctx context.Context) (engine.RuntimeChoice, error) {
	rt, err := s.opts.Engine.ChooseRuntime(ctx, "", s.runtimeNeeds())
	if err != nil {
		if errors.Is(err, switchboard.ErrConfig) {
			return rt, switchboard.Errorf(switchboard.ErrConfig, "sandbox: %s", switchboard.Message(err))
		}
		return rt, engineError(err)
	}
	if rt.Warning != "" {
		s.log.Debug("sandbox: " + rt.Warning)
	}
	return rt, nil
}

func (s *Service) runtimeNeeds() engine.RuntimeNeeds {
	return engine.RuntimeNeeds{Network: s.opts.Network != "" && s.opts.Network != "none"}
}

// chosenRuntime is the runtime choice as far as it is known, for a
// status: it never waits for the runtime's probe. Where the probe has not
// ended it reports false and makes sure one runs (in the background, at
// most one at a time; new sessions would start one anyway).
func (s *Service) chosenRuntime(ctx context.Context) (engine.RuntimeChoice, bool, error) {
	rt, ok, err := s.opts.Engine.ChosenRuntime(ctx, "", s.runtimeNeeds())
	if err != nil {
		if errors.Is(err, switchboard.ErrConfig) {
			return rt, true, switchboard.Errorf(switchboard.ErrConfig, "sandbox: %s", switchboard.Message(err))
		}
		return rt, true, engineError(err)
	}
	if ok {
		return rt, true, nil
	}
	s.mu.Lock()
	start := !s.choosing && !s.closed
	s.choosing = s.choosing || start
	s.mu.Unlock()
	if start {
		s.wg.Go(func() {
			ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
			defer cancel()
			_, _ = s.chooseRuntime(ctx)
			s.mu.Lock()
			s.choosing = false
			s.mu.Unlock()
		})
	}
	return rt, false, nil
}

// flavorLimits are the resources of a flavor, capped by the machine.
type flavorLimits struct {
	nanoCPUs, memory, pids int64
	fileBytes              int64 // largest file one execution may write
	tmpfs                  string
}

func limitsFor(flavor string, info engine.Info) flavorLimits {
	cpus, gib, pids := int64(1), int64(1), int64(128)
	switch flavor {
	case "medium":
		cpus, gib, pids = 2, 2, 256
	case "large":
		cpus, gib, pids = 4, 4, 512
	}
	if info.NCPU > 0 && cpus > int64(info.NCPU) {
		cpus = int64(info.NCPU)
	}
	mem := gib << 30
	if info.MemTotal > 0 && mem > info.MemTotal/2 {
		mem = info.MemTotal / 2
	}
	tmp := mem / 8
	return flavorLimits{nanoCPUs: cpus * 1e9, memory: mem, pids: pids, fileBytes: gib << 30, tmpfs: fmt.Sprintf("rw,nosuid,nodev,size=%d", tmp)}
}

// fileBytes is the largest file one execution of a flavor may write.
func (s *Service) fileBytes(flavor string) int64 {
	if s.opts.MaxFileBytes > 0 {
		return s.opts.MaxFileBytes
	}
	return limitsFor(flavor, engine.Info{}).fileBytes
}

func (s *Service) imageFor(template string) (ref, variable string) {
	if template == "node" {
		return s.opts.ImageNode, "MCP_SERVER_SANDBOX_IMAGE_NODE"
	}
	return s.opts.ImagePython, "MCP_SERVER_SANDBOX_IMAGE_PYTHON"
}

// create starts a new session for project. Errors: ErrResourceLimit
// (the project's cap), ErrConfig (engine or image missing), ErrInternal.
func (s *Service) create(ctx context.Context, project, agent, template, flavor string) (*session, error) {
	return s.createOn(ctx, project, agent, template, flavor, "")
}

// createOn starts a session on workspace wsID, or on a new workspace
// when wsID is "".
func (s *Service) createOn(ctx context.Context, project, agent, template, flavor, wsID string) (*session, error) {
	return s.createAs(ctx, NewSessionID(), project, agent, "", template, flavor, wsID)
}

// createAs is createOn for a session named id, bound to person ("" none)
// from the start (Resume keeps a session's id and person when it goes on
// here after its replica died: its id is known, so it must not be
// reachable unbound even for a moment).
func (s *Service) createAs(ctx context.Context, id, project, agent, person, template, flavor, wsID string) (*session, error) {
	if template == "" {
		template = "python"
	}
	if flavor == "" {
		flavor = "small"
	}
	s.mu.Lock()
	missed := false
	for {
		if err := s.closingLocked(project); err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if wsID == "" {
			k := poolKey{project, template, flavor}
			_, inDemand := s.pool.active[k]
			if x := s.takeLocked(k); x != nil {
				return s.startWarm(x, agent), nil // s.mu is released
			}
			if inDemand && !missed {
				s.missedLocked(k)
				missed = true
			}
		}
		// Warm containers count in the cap, but never refuse a session:
		// one of another template or flavor is given up for it, and one
		// being made is waited for (then taken or given up).
		n := s.countLocked(project)
		if n < s.opts.MaxSessions || s.evictLocked(project) {
			break
		}
		if s.fillingLocked(project) == 0 {
			s.mu.Unlock()
			return nil, switchboard.Errorf(switchboard.ErrResourceLimit, "this project has %d sandbox sessions open, the limit (MCP_SERVER_SANDBOX_MAX_SESSIONS); stop one with stop_session or reuse one with session_id", n)
		}
		s.settled.Wait()
	}
	s.pending[project]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.pending[project]--
		s.settled.Broadcast()
		s.mu.Unlock()
	}()

	image, _ := s.imageFor(template)
	now := time.Now()
	x := &session{id: id, project: project, template: template, flavor: flavor, image: image,
		createdAt: now, lastUsed: now, agentSession: agent, person: person}
	if wsID != "" {
		x.workspaceID, x.volume = wsID, volumeFor(wsID)
	} else {
		t0 := time.Now()
		if err := s.newWorkspace(ctx, x); err != nil {
			return nil, err
		}
		s.timed("workspace volume and row", t0)
	}
	drop := func() {
		if wsID == "" {
			s.dropWorkspace(x)
		}
	}
	id, sup, err := s.startContainer(ctx, x)
	if err != nil {
		drop()
		return nil, err
	}
	x.containerID, x.sup = id, sup
	s.mu.Lock()
	if s.closed || s.deleting[project] > 0 {
		err := errProjectDeleting(project)
		if s.closed {
			err = switchboard.Errorf(switchboard.ErrUnavailable, "the gateway is shutting down")
		}
		s.mu.Unlock()
		s.discard(ctx, id, sup)
		drop()
		return nil, err
	}
	// Idle from now, not from before the container started (which can
	// take longer than a short idle timeout on a loaded machine: the
	// sweeper stopped sessions before their first call ran).
	x.mu.Lock()
	x.lastUsed = time.Now()
	x.mu.Unlock()
	s.sessions[x.id] = x
	defer s.startSweep()
	s.mu.Unlock()
	s.touchWorkspace(x, "running", nil)
	s.log.Info("sandbox: session started", "project", project, "sandbox_session", x.id, "template", template, "flavor", flavor, "workspace", x.workspaceID)
	return x, nil
}

// closingLocked refuses a new session of project while the service
// closes or the project is being deleted. Callers hold s.mu.
func (s *Service) closingLocked(project string) error {
	if s.closed {
		return switchboard.Errorf(switchboard.ErrUnavailable, "the gateway is shutting down")
	}
	if s.deleting[project] > 0 {
		return errProjectDeleting(project)
	}
	return nil
}

// startContainer launches a container for session x on its workspace
// volume, and greets its supervisor (nil: the image has no python3,
// executions use docker exec). Nothing is left behind when it fails.
func (s *Service) startContainer(ctx context.Context, x *session) (string, *supervisor, error) {
	t0 := time.Now()
	info, err := s.engineInfo(ctx)
	if err != nil {
		return "", nil, err
	}
	_, variable := s.imageFor(x.template)
	lim := limitsFor(x.flavor, info)
	spec := engine.Spec{
		Name:         engine.Name(KindSession, x.id),
		Image:        x.image,
		Cmd:          supervisorCmd(s.fileBytes(x.flavor), 0, 0),
		Stdin:        true,
		User:         fmt.Sprintf("%d:%d", SandboxUID, SandboxUID),
		WorkingDir:   "/workspace",
		Env:          []string{"HOME=/workspace", "PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1"},
		Labels:       map[string]string{engine.LabelKind: KindSession, engine.LabelRef: x.id, engine.LabelProject: x.project},
		NanoCPUs:     lim.nanoCPUs,
		MemoryBytes:  lim.memory,
		PidsLimit:    lim.pids,
		Network:      s.opts.Network,
		ReadOnlyRoot: true,
		Tmpfs:        map[string]string{"/tmp": lim.tmpfs},
		Mounts:       []engine.Mount{{Volume: x.volume, Target: "/workspace"}},
		StopTimeout:  time.Second,
	}
	for _, v := range s.opts.Volumes {
		if v.Bind {
			spec.Binds = append(spec.Binds, engine.Bind{HostPath: v.Source, Target: v.Target, ReadOnly: v.ReadOnly})
			continue
		}
		spec.Mounts = append(spec.Mounts, engine.Mount{Volume: v.Source, Target: v.Target, ReadOnly: v.ReadOnly, External: true})
	}
	if FromRegistry(x.image) {
		// An image that names its registry (one `sandbox build-image
		// --push` published) is pulled as the pull policy says.
		if err := s.opts.Engine.EnsureImage(ctx, x.image, engine.PullOptions{Policy: s.opts.PullPolicy, Auth: s.opts.RegistryAuth}); err != nil {
			hint := ""
			if errors.Is(err, switchboard.ErrForbidden) {
				hint = " (the gateway's MCP_SERVER_SANDBOX_REGISTRY_USER and _PASSWORD)"
			}
			return "", nil, switchboard.Errorf(switchboard.KindOf(err), "sandbox image for template %s (%s): %s%s", x.template, variable, switchboard.Message(err), hint)
		}
	}
	rt, err := s.chooseRuntime(ctx)
	if err != nil {
		return "", nil, err
	}
	spec.Runtime = rt.Runtime
	if rt.GVisor {
		spec.Cmd = supervisorCmd(s.fileBytes(x.flavor), lim.memory, lim.pids)
	}
	t0 = s.timed("engine info, image, runtime", t0)
	run, err := s.opts.Engine.Launch(ctx, spec, nil)
	if err != nil {
		if errors.Is(err, switchboard.ErrNotFound) {
			return "", nil, missingImage(x.image, "template "+x.template, variable)
		}
		if errors.Is(err, switchboard.ErrInvalid) && len(spec.Binds) > 0 {
			// Most likely a configured host directory that does not
			// exist on the engine's host; the engine's words say which.
			return "", nil, switchboard.Errorf(switchboard.ErrConfig, "sandbox: the Docker engine refused a session container (%s); check the host directories in MCP_SERVER_SANDBOX_VOLUMES exist on the Docker engine's host", switchboard.Message(err))
		}
		return "", nil, engineError(err)
	}
	t0 = s.timed("container create, attach, start", t0)
	x.mu.Lock()
	x.runtime = rt.Name
	x.mu.Unlock()
	sup := startSupervisor(run.Stream, s.opts.SupervisorWait)
	s.timed("supervisor greeting (python starts)", t0)
	if sup == nil {
		s.log.Warn("sandbox: no supervisor in the session (the image has no python3); every execution is a docker exec", "image", x.image)
	}
	s.log.Debug("sandbox: container started", "sandbox_session", x.id, "runtime", rt.Name)
	return run.ID, sup, nil
}

// discard removes a container that serves no session (any more).
func (s *Service) discard(ctx context.Context, id string, sup *supervisor) {
	if sup != nil {
		sup.close()
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.opts.Engine.Remove(rctx, id); err != nil {
		s.log.Warn("sandbox: removing a container", "container", id, "err", err)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// stopShutdown is why the sessions of a gateway shutting down stop.
const stopShutdown = "gateway shutdown"

// stopFenced is why a session whose lease this replica lost stops: its
// workspace row is its next holder's, so the stop leaves it as it is.
const stopFenced = "lease lost"

// stop removes x's container and forgets x; its workspace stays.
func (s *Service) stop(ctx context.Context, x *session, why string) error {
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		return nil
	}
	x.stopped = true
	x.shutdown = why == stopShutdown
	id := x.containerID
	x.mu.Unlock()
	err := s.opts.Engine.Remove(ctx, id)
	if err != nil {
		// Still there: let Close (or a later stop) try again.
		x.mu.Lock()
		x.stopped = false
		x.mu.Unlock()
		return engineError(err)
	}
	x.supMu.Lock()
	if x.sup != nil {
		x.sup.close()
	}
	x.supMu.Unlock()
	s.mu.Lock()
	delete(s.sessions, x.id)
	s.mu.Unlock()
	if why != stopFenced {
		s.touchWorkspace(x, WorkspaceReady, nil)
	}
	s.log.Info("sandbox: session stopped", "project", x.project, "sandbox_session", x.id, "reason", why)
	s.refillProject(x.project) // room under the cap it held back
	return nil
}

// end stops x, then applies the retention rule to its workspace: an
// anonymous one goes at once when the retention is negative (the
// setting's 0); otherwise the sweeper deletes it when it expires.
func (s *Service) end(ctx context.Context, x *session, why string) error {
	if err := s.stop(ctx, x, why); err != nil {
		return err
	}
	if s.opts.Store == nil || s.opts.WorkspaceRetention >= 0 {
		return nil
	}
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if s.expireLocked(ctx, x.workspaceID, time.Now()) {
		x.mu.Lock()
		x.dropped = true
		x.mu.Unlock()
	}
	return nil
}

// engineError turns an engine failure into what a client may see.
func engineError(err error) error {
	switch {
	case errors.Is(err, switchboard.ErrUnavailable):
		return switchboard.Errorf(switchboard.ErrUnavailable, "sandbox: the Docker engine is not reachable; start Docker, or set DOCKER_HOST to its address")
	case errors.Is(err, switchboard.ErrConfig):
		return err
	case errors.Is(err, context.Canceled), errors.Is(err, switchboard.ErrCanceled):
		return switchboard.Errorf(switchboard.ErrCanceled, "sandbox: the call was cancelled")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, switchboard.ErrTimeout):
		return switchboard.Errorf(switchboard.ErrTimeout, "sandbox: the Docker engine did not answer in time")
	}
	return switchboard.Errorf(switchboard.ErrInternal, "sandbox: the Docker engine failed: %s", switchboard.Message(err))
}

// agent is the agent session x belongs to: the one attached, else the
// last one that used it. Callers hold x.mu.
func (x *session) agent() string {
	if x.attachedBy != "" {
		return x.attachedBy
	}
	return x.agentSession
}

func (x *session) describe() switchboard.SandboxSession {
	x.mu.Lock()
	defer x.mu.Unlock()
	status := "idle"
	if x.running > 0 {
		status = "running"
	}
	return switchboard.SandboxSession{SessionID: x.id, Project: x.project, Template: x.template, Flavor: x.flavor, Status: status,
		CreatedAt: x.createdAt.UTC(), LastUsedAt: x.lastUsed.UTC(), AgentSessionID: x.agent(),
		WorkspaceID: x.workspaceID, Volume: x.volume, Runtime: x.runtime}
}

// Sessions lists project's sessions, oldest first ("" lists every
// project's).
func (s *Service) Sessions(project string) []switchboard.SandboxSession {
	s.mu.Lock()
	var list []*session
	for _, x := range s.sessions {
		if project == "" || x.project == project {
			list = append(list, x)
		}
	}
	s.mu.Unlock()
	out := make([]switchboard.SandboxSession, len(list))
	for i, x := range list {
		out[i] = x.describe()
	}
	slices.SortFunc(out, func(a, b switchboard.SandboxSession) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// sessionsOf is Sessions(project) as person's tool calls see them (its
// sessions and the unbound ones; lookupAs).
func (s *Service) sessionsOf(project, person string) []switchboard.SandboxSession {
	s.mu.Lock()
	var list []*session
	for _, x := range s.sessions {
		if x.project == project {
			list = append(list, x)
		}
	}
	s.mu.Unlock()
	var out []switchboard.SandboxSession
	for _, x := range list {
		if x.reachableBy(person) {
			out = append(out, x.describe())
		}
	}
	slices.SortFunc(out, func(a, b switchboard.SandboxSession) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// StopSession stops project's session id for agent ("" is the admin)
// and reports whether its workspace is kept (an anonymous one is deleted
// at once when the retention is negative). Errors: ErrNotFound,
// ErrConflict (its workspace is attached to another agent session,
// named).
func (s *Service) StopSession(ctx context.Context, project, agent, id string) (switchboard.SandboxSession, bool, error) {
	x, err := s.lookup(project, id)
	if err != nil {
		return switchboard.SandboxSession{}, false, err
	}
	if err := checkHolder(x, agent, ToolStopSession); err != nil {
		return switchboard.SandboxSession{}, false, err
	}
	// A stop is an operation on the workspace: its last_used_at moves
	// (the row is written as the session ends).
	x.mu.Lock()
	x.lastUsed = time.Now()
	x.mu.Unlock()
	info := x.describe()
	// Running executions are killed with the container; waiting for
	// them would let a runaway call hold the stop.
	if err := s.end(ctx, x, "stop_session"); err != nil {
		return info, false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return info, !x.dropped, nil
}

// supervisorOf returns x's live supervisor. One that died (killed by a
// program, or out of memory) took the container's main process with it:
// the container is started again, with the same workspace, and a new
// supervisor. A container that is gone (removed outside the gateway, or
// gone is true) is replaced by a new one on the same workspace. nil
// means x uses docker exec.
func (s *Service) supervisorOf(ctx context.Context, x *session, gone bool) (*supervisor, error) {
	x.supMu.Lock()
	defer x.supMu.Unlock()
	if !gone && (x.sup == nil || x.sup.alive()) {
		return x.sup, nil
	}
	if x.sup != nil {
		x.sup.close()
		x.sup = nil
	}
	if !gone {
		s.log.Warn("sandbox: the session's supervisor ended; restarting its container", "sandbox_session", x.id)
		id := x.container()
		run, err := s.opts.Engine.StartAttached(ctx, id, nil)
		if err == nil {
			x.sup = startSupervisor(run.Stream, s.opts.SupervisorWait)
			return x.sup, nil
		}
		// An attach to a missing container fails as an upgrade refused
		// (404), not as not-found: ask whether it is still there.
		if _, ierr := s.opts.Engine.Inspect(ctx, id); !errors.Is(ierr, switchboard.ErrNotFound) {
			return nil, engineError(err)
		}
	}
	return s.revive(ctx, x)
}

// revive starts a new container for x on its workspace, in place of
// one removed outside the gateway. When the workspace's volume is gone
// too, x is forgotten (its row deleted) and the error says so. Callers
// hold x.supMu.
func (s *Service) revive(ctx context.Context, x *session) (*supervisor, error) {
	if _, err := s.opts.Engine.InspectVolume(ctx, x.volume); err != nil {
		if !errors.Is(err, switchboard.ErrNotFound) {
			return nil, engineError(err)
		}
		s.forget(ctx, x)
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "session not found: the container of session %s and its workspace %s were removed outside the gateway, so the session is gone; omit session_id to start a new one", x.id, x.workspaceID)
	}
	id, sup, err := s.startContainer(ctx, x)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		s.discard(ctx, id, sup)
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "session not found: %q was stopped", x.id)
	}
	x.containerID = id
	x.mu.Unlock()
	x.sup = sup
	s.log.Warn("sandbox: the session's container was gone (removed outside the gateway); started a new one on its workspace", "project", x.project, "sandbox_session", x.id, "workspace", x.workspaceID)
	s.touchWorkspace(x, WorkspaceRunning, nil)
	return sup, nil
}

// forget drops session x whose container and workspace volume were
// removed outside the gateway, and the workspace's row. Callers hold
// x.supMu.
func (s *Service) forget(ctx context.Context, x *session) {
	x.mu.Lock()
	x.stopped = true
	x.mu.Unlock()
	s.mu.Lock()
	delete(s.sessions, x.id)
	s.mu.Unlock()
	s.discard(ctx, x.container(), nil)
	if s.opts.Store != nil {
		if err := s.opts.Store.DeleteWorkspace(ctx, x.workspaceID); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
			s.log.Warn("sandbox: deleting the row of a workspace whose volume is gone", "workspace", x.workspaceID, "err", err)
		}
	}
	s.log.Warn("sandbox: the session's container and workspace volume were removed outside the gateway; session forgotten", "project", x.project, "sandbox_session", x.id, "workspace", x.workspaceID)
}

// FromRegistry reports whether an image reference names its registry
// (its first part has a dot or a port, or is localhost): such an image
// is pulled when missing; a bare name is one built on the engine.
func FromRegistry(ref string) bool {
	first, _, ok := strings.Cut(ref, "/")
	return ok && (strings.ContainsAny(first, ".:") || first == "localhost")
}

// missingImage says how to get image, which what (a template, a copy)
// needs and variable names: `switchboard sandbox build-image` alone when
// it is the default name (the build points it at the new image), the
// build and then the variable for any other name.
func missingImage(image, what, variable string) error {
	if image == ImageRepository+":latest" {
		return switchboard.Errorf(switchboard.ErrConfig, "sandbox image %q (for %s) is not in the Docker engine: run `switchboard sandbox build-image`, which builds it under that name", image, what)
	}
	return switchboard.Errorf(switchboard.ErrConfig, "sandbox image %q (for %s) is not in the Docker engine: run `switchboard sandbox build-image` (it prints the tag), then set %s to that tag, or unset it to use the default %s:latest", image, what, variable, ImageRepository)
}
