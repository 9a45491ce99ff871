package sandbox

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// The warm pool keeps started containers ready for new sessions, so an
// execution without session_id does not wait for a volume, a container
// and its supervisor (issue 26).
//
// A warm container belongs to one project, template and flavor from the
// start: its container carries the project's label, its workspace is a
// fresh empty volume labelled with the project and recorded in a row of
// the project (status "pooled", hidden from every listing and lookup).
// Taking one makes it a session like any other: the row becomes running
// with the agent session; nothing is decided at the take that a cold
// start decides differently. A warm container serves exactly one session
// and is never returned to the pool: a session's end removes it as it
// removes any session's.
//
// A project's pool for a template and flavor exists once it started a
// session of them (demand), is refilled after each take, and is drained
// when none was taken for PoolIdle, when the project is deleted or its
// sandbox switched off (Drain), and at Close. Warm containers and those
// being made count in the project's MaxSessions: a pool never makes a
// session start refused (a warm container of another template or flavor
// is given up for it), and it is filled only where there is room.
// After kill -9 the engine's sweep removes the dead process's
// containers, and tend the pooled rows and volumes they leave.

// WorkspacePooled is the status of a warm container's workspace row.
const WorkspacePooled = "pooled"

// poolKey names one pool.
type poolKey struct{ project, template, flavor string }

// poolState is the pool's part of a Service, guarded by Service.mu.
type poolState struct {
	ready   map[poolKey][]*session // warm, oldest first
	filling map[poolKey]int        // being made (also in Service.pending)
	active  map[poolKey]time.Time  // pools in demand: when last taken from
	members map[string]*session    // warm or being made, by session id
	target  map[poolKey]int        // grown past WarmPool by misses
}

func (p *poolState) init() {
	p.ready, p.filling, p.active, p.members = map[poolKey][]*session{}, map[poolKey]int{}, map[poolKey]time.Time{}, map[string]*session{}
	p.target = map[poolKey]int{}
}

// targetLocked is how many warm containers pool k keeps. Callers hold
// s.mu.
func (s *Service) targetLocked(k poolKey) int { return max(s.opts.WarmPool, s.pool.target[k]) }

// missedLocked grows pool k after a new session found it empty although
// it was in demand (sessions outran its refill): its target doubles, up
// to WarmPoolMax. It goes back to WarmPool when the pool is drained as
// idle. Callers hold s.mu.
func (s *Service) missedLocked(k poolKey) {
	if s.opts.WarmPool <= 0 || s.opts.WarmPoolMax <= s.opts.WarmPool {
		return
	}
	t := s.targetLocked(k)
	s.pool.target[k] = min(2*t, s.opts.WarmPoolMax)
}

// pooledLocked counts project's warm containers. Callers hold s.mu.
func (s *Service) pooledLocked(project string) int {
	n := 0
	for k, list := range s.pool.ready {
		if k.project == project {
			n += len(list)
		}
	}
	return n
}

// takeLocked activates pool k and returns one of its warm containers,
// or nil. Callers hold s.mu.
func (s *Service) takeLocked(k poolKey) *session {
	if s.opts.WarmPool <= 0 {
		return nil
	}
	s.pool.active[k] = time.Now()
	for list := s.pool.ready[k]; len(list) > 0; list = s.pool.ready[k] {
		x := list[0]
		s.pool.ready[k] = list[1:]
		if x.sup == nil || x.sup.alive() {
			return x
		}
		// Its supervisor died while it waited: never hand that out.
		s.log.Warn("sandbox: a warm container's supervisor ended; removing it", "project", k.project, "sandbox_session", x.id)
		s.dropPooledLocked(x)
	}
	return nil
}

// evictLocked gives up one warm container of project (any template and
// flavor) to make room under the cap, and reports whether it did.
// Callers hold s.mu.
func (s *Service) evictLocked(project string) bool {
	for k, list := range s.pool.ready {
		if k.project == project && len(list) > 0 {
			s.pool.ready[k] = list[1:]
			s.dropPooledLocked(list[0])
			return true
		}
	}
	return false
}

// dropPooledLocked removes warm container x (container, volume, row) in
// the background. Callers hold s.mu.
func (s *Service) dropPooledLocked(x *session) {
	delete(s.pool.members, x.id)
	s.wg.Go(func() { s.removePooled(x) }) // never after Close: callers saw s.closed false
}

// removePooled removes warm container x, its workspace volume and row.
func (s *Service) removePooled(x *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
	defer cancel()
	s.discard(ctx, x.containerID, x.sup)
	if err := s.removeWorkspace(ctx, x.workspaceID, x.volume); err != nil {
		s.log.Warn("sandbox: removing a warm container's workspace", "workspace", x.workspaceID, "err", switchboard.Message(err))
	}
}

// refill starts making warm containers for pool k up to its target, as
// room under project's cap allows, one after another in the background.
func (s *Service) refill(k poolKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.WarmPool <= 0 || s.closed || s.deleting[k.project] > 0 {
		return
	}
	if at, ok := s.pool.active[k]; !ok || time.Since(at) >= s.opts.PoolIdle {
		return // not in demand, or about to be drained as idle
	}
	need := s.targetLocked(k) - len(s.pool.ready[k]) - s.pool.filling[k]
	room := s.opts.MaxSessions - s.countLocked(k.project)
	need = min(need, room)
	if need <= 0 {
		return
	}
	s.pool.filling[k] += need
	s.pending[k.project] += need
	s.wg.Go(func() {
		for i := range need {
			if err := s.fill(k); err != nil {
				if s.ctx.Err() == nil {
					s.log.Warn("sandbox: making a warm container failed", "project", k.project, "template", k.template, "flavor", k.flavor, "err", switchboard.Message(err))
				}
				s.mu.Lock()
				s.pool.filling[k] -= need - i - 1
				s.pending[k.project] -= need - i - 1
				s.settled.Broadcast()
				s.mu.Unlock()
				return
			}
		}
	})
}

// fill makes one warm container for pool k, whose place the caller
// reserved in filling and pending; it releases the place.
func (s *Service) fill(k poolKey) error {
	image, _ := s.imageFor(k.template)
	x := &session{id: NewSessionID(), project: k.project, template: k.template, flavor: k.flavor, image: image, createdAt: time.Now()}
	x.workspaceID = newID("ws-")
	release := func(keep bool) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.pool.filling[k]--
		s.pending[k.project]--
		s.settled.Broadcast()
		_, active := s.pool.active[k]
		if !keep || s.closed || s.deleting[k.project] > 0 || !active {
			delete(s.pool.members, x.id)
			return false
		}
		s.pool.ready[k] = append(s.pool.ready[k], x)
		return true
	}
	ctx := s.ctx
	if err := s.newPooledWorkspace(ctx, x); err != nil {
		release(false)
		return err
	}
	id, sup, err := s.startContainer(ctx, x)
	if err != nil {
		s.dropWorkspace(x)
		release(false)
		return err
	}
	x.containerID, x.sup = id, sup
	if !release(true) {
		s.removePooled(x)
	}
	return nil
}

// newPooledWorkspace gives warm container x a fresh workspace: a pooled
// row (when there is a store) naming x's session and this process, and
// its volume. x is a pool member from before the row exists, so tend
// leaves the row alone.
func (s *Service) newPooledWorkspace(ctx context.Context, x *session) error {
	s.mu.Lock()
	s.pool.members[x.id] = x
	s.mu.Unlock()
	if s.opts.Store != nil {
		cfg, _ := json.Marshal(workspaceConfig{Template: x.template, Flavor: x.flavor, Session: x.id, Anonymous: true, Owner: s.opts.Engine.Owner()})
		w, err := s.opts.Store.CreateWorkspace(ctx, switchboard.Workspace{
			ProjectID: x.project, ContainerType: switchboard.ContainerWorkspace, Image: x.image, Config: cfg,
			Status: WorkspacePooled, Provider: engine.ProviderName, LastUsedAt: time.Now(),
		})
		if err != nil {
			return switchboard.Errorf(switchboard.ErrInternal, "sandbox: the workspace could not be recorded in the store")
		}
		s.mu.Lock()
		x.workspaceID = w.ID
		s.mu.Unlock()
	}
	x.volume = volumeFor(x.workspaceID)
	if err := s.createVolume(ctx, x.volume, x.workspaceID, x.project); err != nil {
		s.dropWorkspace(x)
		return engineError(err)
	}
	return nil
}

// Drain removes project's warm containers and their workspaces, and
// stops its pools until it starts a session again: for a project whose
// sandbox is switched off. Containers being made are removed when they
// are ready.
func (s *Service) Drain(project string) {
	s.mu.Lock()
	list := s.drainLocked(func(k poolKey) bool { return k.project == project })
	s.mu.Unlock()
	s.removeAll(list)
}

// drainLocked deactivates the pools match selects and returns their warm
// containers, forgotten. Callers hold s.mu.
func (s *Service) drainLocked(match func(poolKey) bool) []*session {
	var list []*session
	for k := range s.pool.active {
		if match(k) {
			delete(s.pool.active, k)
			delete(s.pool.target, k)
		}
	}
	for k, l := range s.pool.ready {
		if match(k) {
			list = append(list, l...)
			delete(s.pool.ready, k)
		}
	}
	for _, x := range list {
		delete(s.pool.members, x.id)
	}
	return list
}

// removeAll removes warm containers list, in parallel (each removal
// bounded on its own).
func (s *Service) removeAll(list []*session) {
	var wg sync.WaitGroup
	for _, x := range list {
		wg.Go(func() { s.removePooled(x) })
	}
	wg.Wait()
}

// drainIdle drains the pools nobody took from for PoolIdle.
func (s *Service) drainIdle(now time.Time) {
	s.mu.Lock()
	list := s.drainLocked(func(k poolKey) bool { return now.Sub(s.pool.active[k]) >= s.opts.PoolIdle })
	s.mu.Unlock()
	if len(list) > 0 {
		s.log.Info("sandbox: idle warm pools drained", "containers", len(list))
	}
	s.removeAll(list)
}

// Pooled counts the warm containers ready, of project ("" every
// project's).
func (s *Service) Pooled(project string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if project != "" {
		return s.pooledLocked(project)
	}
	n := 0
	for _, l := range s.pool.ready {
		n += len(l)
	}
	return n
}

// mine reports whether row w is of a warm container of this process (or
// one being made), or of one of its sessions.
func (s *Service) mine(w switchboard.Workspace, cfg workspaceConfig) bool {
	s.mu.Lock()
	_, inPool := s.pool.members[cfg.Session]
	s.mu.Unlock()
	return inPool || s.liveOn(w.ID) != nil
}

// countLocked counts project's containers: sessions, warm ones, and
// those being made. Callers hold s.mu.
func (s *Service) countLocked(project string) int {
	n := s.pending[project] + s.pooledLocked(project)
	for _, x := range s.sessions {
		if x.project == project {
			n++
		}
	}
	return n
}

// tendPooled removes pooled row w (its volume, and its container if
// any is left) unless a warm container of a live gateway process waits
// on it: one of this process's pool, or of another process that Alive
// says lives (without Alive, another process's rows are left alone).
func (s *Service) tendPooled(ctx context.Context, w switchboard.Workspace) error {
	var cfg workspaceConfig
	_ = json.Unmarshal(w.Config, &cfg)
	if s.mine(w, cfg) {
		return nil
	}
	if cfg.Owner != s.opts.Engine.Owner() {
		if s.opts.Alive == nil {
			return nil
		}
		alive, err := s.opts.Alive(ctx, cfg.Owner)
		if err != nil {
			return switchboard.Errorf(switchboard.ErrInternal, "sandbox: checking whether the gateway process of a warm workspace lives failed")
		}
		if alive {
			return nil
		}
	}
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	// Read again: a take (and the session's end) may have come between
	// the listing and now.
	if now, err := s.opts.Store.GetWorkspace(ctx, w.ID); err != nil || now.Status != WorkspacePooled || s.mine(w, cfg) {
		return nil
	}
	// Its container went with its gateway process (the engine's sweep);
	// one still there keeps its volume, and the row, until a later tend.
	if err := s.removeWorkspace(ctx, w.ID, volumeOf(w)); err != nil {
		return err
	}
	s.log.Info("sandbox: removed the workspace of a warm container whose gateway process ended", "project", w.ProjectID, "workspace", w.ID)
	return nil
}

// fillingLocked counts project's warm containers being made. Callers
// hold s.mu.
func (s *Service) fillingLocked(project string) int {
	n := 0
	for k, c := range s.pool.filling {
		if k.project == project {
			n += c
		}
	}
	return n
}

// startWarm makes warm container x, just taken, the session of agent:
// registered, its row running with agent's session. Callers hold s.mu,
// which it releases.
func (s *Service) startWarm(x *session, agent string) *session {
	delete(s.pool.members, x.id)
	now := time.Now()
	// Under x.mu as well: describe reads these under it alone (lock
	// order s.mu, then x.mu, as in Sessions).
	x.mu.Lock()
	x.createdAt, x.lastUsed, x.agentSession = now, now, agent
	x.mu.Unlock()
	s.sessions[x.id] = x
	s.mu.Unlock()
	s.startSweep()
	s.touchWorkspace(x, WorkspaceRunning, func(_ *switchboard.Workspace, cfg *workspaceConfig) { cfg.Owner = "" })
	s.log.Info("sandbox: session started", "project", x.project, "sandbox_session", x.id, "template", x.template, "flavor", x.flavor, "workspace", x.workspaceID, "warm", true)
	return x
}

// pooledVolumes names the volumes of this process's warm containers
// (and those being made).
func (s *Service) pooledVolumes() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]bool, len(s.pool.members))
	for _, x := range s.pool.members {
		m[volumeFor(x.workspaceID)] = true
	}
	return m
}

// refillProject refills project's pools in demand: a session's end makes
// room under the cap that may have held them back.
func (s *Service) refillProject(project string) {
	s.mu.Lock()
	var keys []poolKey
	for k := range s.pool.active {
		if k.project == project {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.refill(k)
	}
}
