package hosted

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// Timing holds every delay of the supervisors; tests shorten them.
type Timing struct {
	// RestartDelay is the pause before a crashed container starts again
	// (well within the 5 s).
	RestartDelay time.Duration
	// CrashWindow and CrashLimit: more than CrashLimit crashes within
	// CrashWindow enter backoff.
	CrashWindow time.Duration
	CrashLimit  int
	// Backoff are the successive pauses while crash-looping; the last
	// one repeats.
	Backoff []time.Duration
	// RetryDelay is the pause before retrying a start that failed before
	// the container ran (engine unreachable, image removed).
	RetryDelay time.Duration
	// StopTimeout is SIGTERM to SIGKILL on a manual restart or delete;
	// ShutdownTimeout the same on gateway shutdown.
	StopTimeout     time.Duration
	ShutdownTimeout time.Duration
	// Heartbeat is the idle ping interval (0 disables it); PingTimeout how
	// long a ping may take before the server is marked unresponsive.
	Heartbeat   time.Duration
	PingTimeout time.Duration
	// ConnectTimeout bounds re-initializing a restarted server.
	ConnectTimeout time.Duration
	// StartTimeout is how long a started container may go without its
	// server answering initialize (an HTTP server never listening, a
	// network the runtime does not give it) before its status is failed,
	// with the last connect error; connecting goes on, and a late answer
	// makes it running.
	StartTimeout time.Duration
}

// DefaultTiming is the timing.
func DefaultTiming() Timing {
	return Timing{
		RestartDelay: time.Second, CrashWindow: time.Minute, CrashLimit: 3,
		Backoff:    []time.Duration{5 * time.Second, 15 * time.Second, 45 * time.Second, 2 * time.Minute, 5 * time.Minute},
		RetryDelay: 10 * time.Second, StopTimeout: 10 * time.Second, ShutdownTimeout: 30 * time.Second,
		Heartbeat: 30 * time.Second, PingTimeout: 10 * time.Second, ConnectTimeout: 30 * time.Second,
		StartTimeout: 2 * time.Minute,
	}
}

// supervisor runs one hosted server's container: creates it, attaches
// before starting, watches for its exit, restarts it by policy with
// crash-loop backoff, and hands the attach stream to the project's
// upstreams manager through OpenStream.
type supervisor struct {
	svc     *Service
	id      string // the row's ID
	project string
	plan    plan
	log     *slog.Logger

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	restart chan chan error
	// first hears the outcome of the first start attempt (Register waits
	// for it so a container that cannot start fails the registration).
	first chan error
	// removeOnExit: the loop removes the container when it ends (always,
	// see Service.Start: a restarted gateway recreates rather than adopts).
	stopTimeout time.Duration

	mu        sync.Mutex
	state     string
	warning   string
	rtWarning string // why the container does not run under the preferred runtime
	// neverConnected: the status is failed because the server did not
	// answer within StartTimeout; a late answer makes it running.
	neverConnected bool
	lastErr        string
	pulling        *switchboard.PullProgress // the image pull under way, nil when none
	containerID    string
	startedAt      time.Time
	restarts       int
	crashes        []time.Time // within the crash window
	crashTotal     int
	lastCrash      *switchboard.HostedCrash
	nextStart      time.Time
	step           int // next backoff step
	gen            int // container generation: bumps on every start
	stream         *engine.Stream
	streamTaken    bool
	changed        chan struct{} // closed and replaced on every state change
	env            []string      // resolved environment, for redaction
	runtime        string
	url            string // stdio_bridge false: the container's MCP endpoint
}

func newSupervisor(svc *Service, row switchboard.Workspace, p plan) *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	return &supervisor{
		svc: svc, id: row.ID, project: row.ProjectID, plan: p,
		log: svc.log.With("project", row.ProjectID, "server", p.reg.Name, "hosted_id", row.ID),
		ctx: ctx, cancel: cancel, restart: make(chan chan error), first: make(chan error, 1),
		stopTimeout: svc.timing.ShutdownTimeout,
		state:       switchboard.HostedStarting, changed: make(chan struct{}),
	}
}

// start runs the supervisor; containerID, when set, is a container
// already created for it (Register creates the first one synchronously so
// a bad registration fails at once).
func (s *supervisor) start(containerID string, env []string) {
	s.mu.Lock()
	s.containerID, s.env = containerID, env
	s.mu.Unlock()
	s.wg.Go(s.loop)
	if s.svc.timing.Heartbeat > 0 && s.plan.stdio {
		s.wg.Go(s.heartbeat)
	}
}

// close stops the container (SIGTERM, then SIGKILL after timeout),
// removes it and waits for the supervisor's goroutines.
func (s *supervisor) close(timeout time.Duration) {
	s.mu.Lock()
	s.stopTimeout = timeout
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// setLocked changes state and wakes everyone waiting for a change.
func (s *supervisor) setLocked(state string) {
	s.state = state
	close(s.changed)
	s.changed = make(chan struct{})
	s.svc.persist(s)
}

func (s *supervisor) set(state string) {
	s.mu.Lock()
	s.setLocked(state)
	s.mu.Unlock()
}

func (s *supervisor) fail(err error) {
	s.mu.Lock()
	s.lastErr = s.redact(switchboard.Message(err))
	s.setLocked(switchboard.HostedFailed)
	s.mu.Unlock()
	s.log.Warn("hosted server cannot start", "err", err)
}

// loop is the supervisor's life: one iteration per container run.
func (s *supervisor) loop() {
	fresh := false // the first container may already be created
	for {
		if s.ctx.Err() != nil {
			s.shutdown()
			return
		}
		id, err := s.prepare(fresh)
		if err != nil {
			select {
			case s.first <- err:
			default:
			}
			s.fail(err)
			if !s.pause(s.svc.timing.RetryDelay, &fresh) {
				s.shutdown()
				return
			}
			continue
		}
		exited, err := s.run(id)
		select {
		case s.first <- err:
		default:
		}
		if err != nil {
			s.fail(err)
			s.removeContainer()
			fresh = true
			if !s.pause(s.svc.timing.RetryDelay, &fresh) {
				s.shutdown()
				return
			}
			continue
		}
		// The container runs; the manager connects through OpenStream.
		s.wg.Go(func() { s.connect() })
		select {
		case ex := <-exited:
			if s.ctx.Err() != nil { // the wait ended because we are closing
				s.shutdown()
				return
			}
			delay, ok := s.exited(ex)
			fresh = false
			if !ok {
				// Policy says stay down: wait for a manual restart.
				if !s.pause(-1, &fresh) {
					s.shutdown()
					return
				}
				continue
			}
			if !s.pause(delay, &fresh) {
				s.shutdown()
				return
			}
		case reply := <-s.restart:
			s.manualRestart(exited)
			fresh = true
			reply <- nil
		case <-s.ctx.Done():
			s.shutdown()
			return
		}
	}
}

// prepare makes sure a container exists: with fresh (or none known) any
// container of this row is removed and a new one created.
func (s *supervisor) prepare(fresh bool) (string, error) {
	s.mu.Lock()
	id := s.containerID
	s.mu.Unlock()
	if id != "" && !fresh {
		return id, nil
	}
	if id != "" {
		s.removeContainer()
	}
	// Not cut off by close: a create the engine finishes after its caller
	// gave up would leave a container nobody knows the ID of. The loop
	// removes it once it has the ID.
	if err := s.pull(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), time.Minute)
	defer cancel()
	id, env, rtWarning, err := s.svc.create(ctx, s.project, s.id, s.plan)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.containerID = id
	s.env = env
	s.rtWarning = rtWarning
	s.mu.Unlock()
	return id, nil
}

// pull makes the image present as the server's pull policy says, with
// the project's registry credentials; while a pull runs, the status is
// "pulling" with its progress. Closing stops the wait, not a shared pull.
func (s *supervisor) pull() error {
	if s.svc.eng == nil {
		return s.svc.errNoEngine()
	}
	auth, err := s.svc.registryAuth(s.ctx, s.project, s.plan)
	if err != nil {
		return err
	}
	defer func() {
		s.mu.Lock()
		s.pulling = nil
		if s.state == switchboard.HostedPulling {
			s.setLocked(switchboard.HostedStarting)
		}
		s.mu.Unlock()
	}()
	err = s.svc.eng.EnsureImage(s.ctx, s.plan.reg.Image, engine.PullOptions{
		Policy: s.svc.pullPolicy(s.plan), Auth: auth, Owner: s.project,
		Progress: func(p switchboard.PullProgress) {
			s.mu.Lock()
			if s.pulling == nil {
				s.setLocked(switchboard.HostedPulling)
			}
			s.pulling = &p
			s.mu.Unlock()
		},
	})
	return authHint(err)
}

// authHint says where a hosted server's registry credentials come from
// when the registry refused them.
func authHint(err error) error {
	if errors.Is(err, switchboard.ErrForbidden) {
		return switchboard.Errorf(switchboard.ErrForbidden, "%s (registry_auth, from the project's secrets)", switchboard.Message(err))
	}
	return err
}

// run attaches to container id, registers for its next exit, starts it
// and publishes the attach stream.
func (s *supervisor) run(id string) (<-chan engine.Exit, error) {
	e := s.svc.eng
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	run, err := e.StartAttached(ctx, id, s.ctx)
	if err != nil {
		return nil, err
	}
	st, exited := run.Stream, run.Exited
	url := ""
	state, err := e.Inspect(ctx, id)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	if !s.plan.stdio {
		if state.IP == "" {
			_ = st.Close()
			return nil, invalid("hosted server %q: the container has no IP address on network %q to reach port %d", s.plan.reg.Name, s.plan.reg.Network, s.plan.reg.Port)
		}
		url = fmt.Sprintf("http://%s%s", net.JoinHostPort(state.IP, strconv.Itoa(s.plan.reg.Port)), s.plan.reg.Path)
	}
	s.mu.Lock()
	s.url = url
	if state.Runtime != "" {
		s.runtime = state.Runtime
	}
	if s.stream != nil {
		_ = s.stream.Close()
	}
	s.stream, s.streamTaken = st, false
	if !s.plan.stdio {
		s.streamTaken = true // kept for stderr only
	}
	s.gen++
	s.startedAt = time.Now()
	s.lastErr = ""
	s.nextStart = time.Time{}
	if s.state != switchboard.HostedBackoff || s.step == 0 {
		s.warning = ""
	}
	s.neverConnected = false
	s.setLocked(switchboard.HostedStarting)
	s.mu.Unlock()
	s.log.Info("hosted server container started", "container", ShortID(id))
	return exited, nil
}

// connect initializes the server through the project's manager, so its
// tools are listed without waiting for a client to ask.
func (s *supervisor) connect() {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	if !s.plan.stdio {
		// The manager reaches it by URL: give it the new address first.
		ctx, cancel := context.WithTimeout(s.ctx, s.svc.timing.ConnectTimeout)
		s.svc.opts.Changed(ctx, s.project)
		cancel()
	}
	// Until it connects or this container is gone: a connect can fail
	// for a while after a crash loop (the manager's circuit breaker, opened
	// by calls made during the backoff, refuses until its cooldown ends).
	begun := time.Now()
	for warned := false; ; {
		err := s.connectOnce()
		s.mu.Lock()
		current := gen == s.gen && s.ctx.Err() == nil
		if err == nil {
			s.mu.Unlock()
			if !s.plan.stdio {
				s.initialized(gen)
			}
			return
		}
		if current {
			s.lastErr = s.redact(switchboard.Message(err))
			if s.state == switchboard.HostedStarting && time.Since(begun) >= s.svc.timing.StartTimeout {
				s.lastErr = fmt.Sprintf("the server did not answer initialize within %s of its container starting (still trying): %s", s.svc.timing.StartTimeout, s.lastErr)
				s.neverConnected = true
				s.setLocked(switchboard.HostedFailed)
				s.log.Warn("hosted server never connected; status failed", "err", s.lastErr)
			}
		}
		s.mu.Unlock()
		if !current {
			return
		}
		if !warned {
			s.log.Warn("hosted server did not initialize; retrying", "err", err)
			warned = true
		}
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return
		}
		s.mu.Lock()
		current = gen == s.gen && s.stream != nil
		s.mu.Unlock()
		if !current {
			return
		}
	}
}

// connectOnce is one bounded connect attempt through the manager.
func (s *supervisor) connectOnce() error {
	up, err := s.svc.upstreams(s.project)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.svc.timing.ConnectTimeout)
	defer cancel()
	return connectRetry(ctx, up, s.plan.reg.Name, !s.plan.stdio)
}

// connectRetry connects server name; an HTTP server may take a moment to
// listen after its container starts, so with retry its refused
// connections are retried until ctx ends.
func connectRetry(ctx context.Context, up Upstreams, name string, retry bool) error {
	for {
		err := up.Connect(ctx, name)
		// ErrNotFound: the manager has not been given the spec yet (a
		// registration in progress applies it right after).
		if err == nil || !(retry || errors.Is(err, switchboard.ErrNotFound)) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(200 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// initialized is told by the manager that initialize and tools/list
// succeeded on the stream of generation gen.
func (s *supervisor) initialized(gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		return
	}
	if s.neverConnected {
		s.neverConnected = false
		if s.state == switchboard.HostedFailed {
			s.setLocked(switchboard.HostedStarting)
		}
	}
	switch s.state {
	case switchboard.HostedStarting, switchboard.HostedUnresponsive, switchboard.HostedRestarting:
		// Running again ends a crash loop's warning (kept while the
		// container started after its backoff) as it ends lastErr; the
		// crash count and last crash stay in status.
		s.lastErr, s.warning = "", ""
		s.setLocked(switchboard.HostedRunning)
	}
}

// exited records an exit and decides what happens next: ok reports
// whether to start again, after delay.
func (s *supervisor) exited(ex engine.Exit) (delay time.Duration, ok bool) {
	t := s.svc.timing
	now := time.Now()
	// The exit can be reported before the attach stream has delivered the
	// last stderr lines (often the reason of the crash): let it drain.
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st != nil {
		drained := time.NewTimer(time.Second)
		select {
		case <-st.Done():
		case <-drained.C:
		}
		drained.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	stderr := ""
	if s.stream != nil {
		stderr = s.redact(s.stream.Stderr())
		_ = s.stream.Close()
		s.stream = nil
	}
	if ex.Err != nil {
		// The engine lost track of the container (engine restarted,
		// container removed behind our back): start a fresh one.
		s.lastErr = s.redact(switchboard.Message(ex.Err))
		s.containerID = ""
	}
	crash := ex.Code != 0 || ex.OOMKilled || ex.Err != nil
	ran := now.Sub(s.startedAt)
	s.startedAt = time.Time{}
	if crash {
		s.crashTotal++
		s.lastCrash = &switchboard.HostedCrash{At: now.UTC(), ExitCode: ex.Code, OOMKilled: ex.OOMKilled, Stderr: tail(stderr, 4096)}
		s.crashes = append(s.crashes, now)
		s.crashes = slices.DeleteFunc(s.crashes, func(c time.Time) bool { return now.Sub(c) > t.CrashWindow })
		s.log.Warn("hosted server crashed", "exit_code", ex.Code, "oom_killed", ex.OOMKilled, "ran", ran.Round(time.Millisecond), "stderr_tail", tail(stderr, 512))
	} else {
		s.log.Info("hosted server exited", "exit_code", ex.Code)
	}
	if ran > t.CrashWindow {
		s.step = 0 // a long run ends a crash loop
	}
	switch p := s.plan.reg.RestartPolicy; {
	case p == PolicyNever, p == PolicyOnFailure && !crash:
		if crash {
			s.lastErr = fmt.Sprintf("container exited with code %d%s; restart_policy %q keeps it down until a manual restart", ex.Code, oomText(ex.OOMKilled), p)
			s.setLocked(switchboard.HostedFailed)
		} else {
			s.setLocked(switchboard.HostedStopped)
		}
		return 0, false
	}
	s.restarts++
	if crash && len(s.crashes) > t.CrashLimit {
		delay = t.Backoff[min(s.step, len(t.Backoff)-1)]
		s.step++
		s.nextStart = now.Add(delay)
		s.warning = fmt.Sprintf("crash loop: %d crashes within %s; next start in %s (last exit code %d%s)",
			len(s.crashes), t.CrashWindow, delay, ex.Code, oomText(ex.OOMKilled))
		s.setLocked(switchboard.HostedBackoff)
		s.log.Warn("hosted server is crash-looping; backing off", "delay", delay, "crashes", len(s.crashes))
		return delay, true
	}
	s.nextStart = now.Add(t.RestartDelay)
	s.setLocked(switchboard.HostedRestarting)
	return t.RestartDelay, true
}

func oomText(oom bool) string {
	if oom {
		return ", killed for exceeding its memory limit"
	}
	return ""
}

// pause waits d (forever when negative) unless a manual restart comes
// (which resets the counters and sets *fresh) or the supervisor closes
// (false).
func (s *supervisor) pause(d time.Duration, fresh *bool) bool {
	var timer <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-timer:
		return true
	case reply := <-s.restart:
		s.resetCounters()
		s.mu.Lock()
		s.restarts++
		s.mu.Unlock()
		*fresh = true
		reply <- nil
		return true
	case <-s.ctx.Done():
		return false
	}
}

// manualRestart stops the running container (SIGTERM, StopTimeout),
// removes it and resets the crash counters; the loop creates a new one.
func (s *supervisor) manualRestart(exited <-chan engine.Exit) {
	s.set(switchboard.HostedRestarting)
	s.mu.Lock()
	id := s.containerID
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.svc.timing.StopTimeout+30*time.Second)
	defer cancel()
	if err := s.svc.eng.Stop(ctx, id, s.svc.timing.StopTimeout); err != nil {
		s.log.Warn("stopping the container for a restart", "err", err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
	}
	s.removeContainer()
	s.resetCounters()
	s.mu.Lock()
	s.restarts++
	s.mu.Unlock()
	s.log.Info("hosted server restarted on request")
}

func (s *supervisor) resetCounters() {
	s.mu.Lock()
	s.crashes, s.step, s.warning, s.nextStart = nil, 0, "", time.Time{}
	s.crashTotal = 0
	s.mu.Unlock()
}

// removeContainer removes the current container (force) and forgets it.
func (s *supervisor) removeContainer() {
	s.mu.Lock()
	id := s.containerID
	s.containerID = ""
	if s.stream != nil {
		_ = s.stream.Close()
		s.stream = nil
	}
	s.mu.Unlock()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.svc.eng.Remove(ctx, id); err != nil {
		s.log.Warn("removing the container", "container", ShortID(id), "err", err)
	}
}

// shutdown stops and removes the container when the supervisor closes.
func (s *supervisor) shutdown() {
	s.mu.Lock()
	id, timeout := s.containerID, s.stopTimeout
	s.mu.Unlock()
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
		if err := s.svc.eng.Stop(ctx, id, timeout); err != nil {
			s.log.Warn("stopping the container", "container", ShortID(id), "err", err)
		}
		cancel()
	}
	s.removeContainer()
	s.mu.Lock()
	s.startedAt = time.Time{}
	s.setLocked(switchboard.HostedStopped)
	s.mu.Unlock()
}

// requestRestart asks the loop for a manual restart.
func (s *supervisor) requestRestart(ctx context.Context) error {
	reply := make(chan error, 1)
	select {
	case s.restart <- reply:
	case <-s.ctx.Done():
		return switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q is shutting down", s.plan.reg.Name)
	case <-ctx.Done():
		return switchboard.Errorf(switchboard.ErrTimeout, "hosted server %q: restart not accepted in time", s.plan.reg.Name)
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return switchboard.Errorf(switchboard.ErrTimeout, "hosted server %q: restart still under way", s.plan.reg.Name)
	}
}

// heartbeat pings an idle running server; one that does not answer in
// PingTimeout is marked unresponsive (not restarted).
func (s *supervisor) heartbeat() {
	t := time.NewTicker(s.svc.timing.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		state, gen := s.state, s.gen
		s.mu.Unlock()
		if state != switchboard.HostedRunning && state != switchboard.HostedUnresponsive {
			continue
		}
		up, err := s.svc.upstreams(s.project)
		if err != nil || up.Busy(s.plan.reg.Name) {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.svc.timing.PingTimeout)
		_, err = up.Request(ctx, s.plan.reg.Name, "ping", nil)
		cancel()
		var rpcErr *switchboard.RPCError
		answered := err == nil || errors.As(err, &rpcErr)
		// Only silence counts: a lost connection is the exit watcher's.
		silent := errors.Is(err, switchboard.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
		s.mu.Lock()
		if gen == s.gen {
			switch {
			case silent && s.state == switchboard.HostedRunning && s.ctx.Err() == nil:
				s.warning = fmt.Sprintf("did not answer ping within %s at %s; not restarted", s.svc.timing.PingTimeout, time.Now().UTC().Format(time.RFC3339))
				s.setLocked(switchboard.HostedUnresponsive)
				// The warning, not err: err names the call timeout of
				// the server, which did not bound this ping.
				s.log.Warn("hosted server unresponsive", "detail", s.warning)
			case answered && s.state == switchboard.HostedUnresponsive:
				s.warning = ""
				s.setLocked(switchboard.HostedRunning)
				s.log.Info("hosted server answers again")
			}
		}
		s.mu.Unlock()
	}
}

// waitStream returns the current container's attach stream for the
// manager, waiting while the container starts. A stream already handed
// out is replaced by a fresh attach (the manager reconnected while the
// container kept running).
func (s *supervisor) waitStream(ctx context.Context) (*engine.Stream, int, error) {
	for {
		s.mu.Lock()
		state, ch, gen := s.state, s.changed, s.gen
		switch {
		case s.stream != nil && !s.streamTaken:
			s.streamTaken = true
			st := s.stream
			s.mu.Unlock()
			return st, gen, nil
		case s.stream != nil && s.containerID != "" && (state == switchboard.HostedRunning || state == switchboard.HostedUnresponsive || state == switchboard.HostedStarting):
			id := s.containerID
			s.mu.Unlock()
			st, err := s.svc.eng.Attach(ctx, id)
			if err != nil {
				return nil, 0, err
			}
			s.mu.Lock()
			if gen != s.gen {
				s.mu.Unlock()
				_ = st.Close()
				continue
			}
			old := s.stream
			s.stream = st
			s.mu.Unlock()
			_ = old.Close()
			return st, gen, nil
		case state == switchboard.HostedFailed || state == switchboard.HostedStopped:
			msg := s.lastErr
			s.mu.Unlock()
			if msg == "" {
				msg = "it is " + state
			}
			return nil, 0, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q is %s: %s", s.plan.reg.Name, state, msg)
		case state == switchboard.HostedBackoff:
			next := s.nextStart
			s.mu.Unlock()
			return nil, 0, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q is crash-looping; next start at %s", s.plan.reg.Name, next.UTC().Format(time.RFC3339))
		}
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, 0, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q did not start in time (it is %s)", s.plan.reg.Name, state)
		case <-s.ctx.Done():
			return nil, 0, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q is shutting down", s.plan.reg.Name)
		}
	}
}

// status reports the supervisor's state (without usage, which needs the
// engine).
func (s *supervisor) status() switchboard.HostedStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := switchboard.HostedStatus{
		ID: s.id, Project: s.project, Name: s.plan.reg.Name, Image: s.plan.reg.Image,
		Status: s.state, Warning: cmp.Or(s.warning, s.rtWarning), LastError: s.lastErr, Provider: engine.ProviderName, Runtime: s.runtime,
		ContainerID: s.containerID, RestartCount: s.restarts, CrashCount: s.crashTotal,
		Limits: s.svc.limits(s.plan), Config: s.plan.summary(),
	}
	if !s.startedAt.IsZero() {
		t := s.startedAt.UTC()
		st.StartedAt = &t
		st.UptimeSeconds = time.Since(s.startedAt).Round(time.Millisecond).Seconds()
	}
	if s.lastCrash != nil {
		c := *s.lastCrash
		st.LastCrash = &c
	}
	if !s.nextStart.IsZero() {
		t := s.nextStart.UTC()
		st.NextStartAt = &t
	}
	if s.stream != nil {
		st.Stderr = tail(s.redact(s.stream.Stderr()), 4096)
	}
	if s.pulling != nil {
		p := *s.pulling
		st.Pull = &p
	}
	return st
}

// redact hides the resolved environment's values (secrets) in text the
// container produced. Called with mu held or before the env is shared.
func (s *supervisor) redact(text string) string {
	return RedactEnv(text, s.env, append([]string{s.plan.reg.Command}, s.plan.reg.Args...))
}

var lineStart = regexp.MustCompile(`\n`)

// tail keeps the last n bytes of s, starting at a line when it can.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if loc := lineStart.FindStringIndex(s); loc != nil && loc[1] < len(s) {
		s = s[loc[1]:]
	}
	return strings.ToValidUTF8(s, "")
}

// ShortID is a container ID as logs show it: its first 12 characters.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// rawParams keeps params as given, or nil for none.
func rawParams(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || string(p) == "null" {
		return nil
	}
	return p
}
