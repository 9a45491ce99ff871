package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// Workspace statuses in the store.
const (
	WorkspaceReady    = "ready"    // files kept, no container
	WorkspaceRunning  = "running"  // a session's container is up on it
	WorkspaceSnapshot = "snapshot" // a frozen copy, restorable
)

var errNoStore = switchboard.Errorf(switchboard.ErrConfig, "sandbox: workspaces need the gateway's store")

// kindAny makes workspaceRow accept a workspace or a snapshot.
const kindAny = "any"

// workspaceRow returns project's workspace id (kind ""), snapshot id
// (kind WorkspaceSnapshot) or either (kindAny). Errors: ErrNotFound for
// an unknown id and for another project's alike.
func (s *Service) workspaceRow(ctx context.Context, project, id, kind string) (switchboard.Workspace, workspaceConfig, error) {
	var cfg workspaceConfig
	if s.opts.Store == nil {
		return switchboard.Workspace{}, cfg, errNoStore
	}
	w, err := s.opts.Store.GetWorkspace(ctx, id)
	isSnap := w.Status == WorkspaceSnapshot
	if err != nil || w.Status == WorkspacePooled || w.ProjectID != project || w.ContainerType != switchboard.ContainerWorkspace || (kind != kindAny && isSnap != (kind == WorkspaceSnapshot)) {
		if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
			return w, cfg, switchboard.Errorf(switchboard.ErrInternal, "sandbox: reading workspace %s failed", id)
		}
		return w, cfg, unknownWorkspace(id, kind)
	}
	_ = json.Unmarshal(w.Config, &cfg)
	if cfg.Volume == "" {
		cfg.Volume = volumeFor(w.ID)
	}
	return w, cfg, nil
}

// unknownWorkspace is the answer for an id that names no workspace
// (kind as workspaceRow's) of the project, or another person's
// (workspaceRowAs).
func unknownWorkspace(id, kind string) error {
	what := "workspace"
	switch kind {
	case WorkspaceSnapshot:
		what = "snapshot"
	case kindAny:
		what = "workspace or snapshot"
	}
	return switchboard.Errorf(switchboard.ErrNotFound, "%s not found: %q is not a %s of this project", what, id, what)
}

// workspaceRowAs is workspaceRow for a tool call of person: a workspace
// or snapshot bound to another person (its session's, see bind) answers
// exactly as an unknown id. Errors: workspaceRow's.
func (s *Service) workspaceRowAs(ctx context.Context, project, person, id, kind string) error {
	_, cfg, err := s.workspaceRow(ctx, project, id, kind)
	if err != nil {
		return err
	}
	if cfg.Person != "" && cfg.Person != person {
		return unknownWorkspace(id, kind)
	}
	return nil
}

// liveOn returns the session running on workspace id, if any.
func (s *Service) liveOn(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.sessions {
		if x.workspaceID == id {
			return x
		}
	}
	return nil
}

// infoOf describes row w.
func (s *Service) infoOf(w switchboard.Workspace, cfg workspaceConfig) switchboard.WorkspaceInfo {
	info := switchboard.WorkspaceInfo{WorkspaceID: w.ID, Status: w.Status, Volume: volumeOf(w), AgentSessionID: w.AgentSessionID,
		SnapshotOf: cfg.SnapshotOf, LastUsedAt: w.LastUsedAt, CreatedAt: w.CreatedAt, Anonymous: cfg.Anonymous, AttachHistory: cfg.Attaches}
	if x := s.liveOn(w.ID); x != nil {
		info.SessionID = x.id
	}
	if cfg.Anonymous && w.Status == WorkspaceReady {
		t := s.expiresAt(w, cfg).UTC()
		info.ExpiresAt = &t
	}
	return info
}

// Workspaces lists project's workspaces and snapshots.
func (s *Service) Workspaces(ctx context.Context, project string) ([]switchboard.WorkspaceInfo, error) {
	return s.workspacesOf(ctx, project, nil)
}

// workspacesOf is Workspaces less those reachable reports false for
// (nil: all).
func (s *Service) workspacesOf(ctx context.Context, project string, reachable func(workspaceConfig) bool) ([]switchboard.WorkspaceInfo, error) {
	if s.opts.Store == nil {
		return nil, errNoStore
	}
	rows, err := s.opts.Store.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInternal, "sandbox: listing workspaces failed")
	}
	out := []switchboard.WorkspaceInfo{}
	for _, w := range rows {
		if w.Status == WorkspacePooled {
			continue // a warm container's: nobody's yet
		}
		var cfg workspaceConfig
		_ = json.Unmarshal(w.Config, &cfg)
		if reachable != nil && !reachable(cfg) {
			continue
		}
		out = append(out, s.infoOf(w, cfg))
	}
	return out, nil
}

// GetWorkspace describes project's workspace or snapshot id, with its
// attach history. Errors: ErrNotFound.
func (s *Service) GetWorkspace(ctx context.Context, project, id string) (switchboard.WorkspaceInfo, error) {
	w, cfg, err := s.workspaceRow(ctx, project, id, kindAny)
	if err != nil {
		return switchboard.WorkspaceInfo{}, err
	}
	return s.infoOf(w, cfg), nil
}

// Attach binds workspace id to agent session agent, exclusively, and
// returns the sandbox session running on it (started when none is). The
// attach is recorded in the row's history and makes the workspace kept
// (no longer anonymous). Errors: ErrNotFound, ErrConflict naming the
// agent session holding it, and those of starting a session.
func (s *Service) Attach(ctx context.Context, project, agent, id, template, flavor string) (switchboard.SandboxSession, error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	w, cfg, err := s.workspaceRow(ctx, project, id, "")
	if err != nil {
		return switchboard.SandboxSession{}, err
	}
	took := true // the attach changes the holder
	x := s.liveOn(id)
	if x != nil {
		x.mu.Lock()
		holder := x.attachedBy
		if holder != "" && holder != agent {
			x.mu.Unlock()
			return switchboard.SandboxSession{}, switchboard.Errorf(switchboard.ErrConflict, "workspace %s is attached to agent session %s; it must detach (detach_workspace) or end its MCP session first", id, holder)
		}
		took = holder != agent
		x.attachedBy = agent
		x.lastUsed = time.Now()
		x.mu.Unlock()
	} else {
		if template == "" {
			template = cfg.Template
		}
		if flavor == "" {
			flavor = cfg.Flavor
		}
		// A session on a person's workspace is that person's.
		if x, err = s.createAs(ctx, NewSessionID(), project, agent, cfg.Person, template, flavor, id); err != nil {
			return switchboard.SandboxSession{}, err
		}
		x.mu.Lock()
		x.attachedBy = agent
		x.mu.Unlock()
	}
	previous := w.AgentSessionID
	if previous == "" {
		previous = cfg.LastAgent // detached: the row's holder was cleared
	}
	if previous != agent {
		s.log.Info("sandbox: workspace attached", "project", project, "workspace", id, "agent_session", agent, "previous_agent_session", previous)
	}
	now := time.Now()
	s.touchWorkspace(x, WorkspaceRunning, func(w *switchboard.Workspace, cfg *workspaceConfig) {
		cfg.Anonymous = false
		w.LastUsedAt = now
		if took && agent != "" {
			cfg.recordAttach(switchboard.AttachEvent{Previous: previous, Holder: agent, At: now.UTC()})
		}
	})
	return x.describe(), nil
}

// Detach releases workspace id: its session stops (processes end, the
// container goes), its files stay, and it is kept (no longer anonymous).
// Errors: ErrNotFound, ErrConflict when another agent session holds it
// and agent is not "" (the API's administrative detach passes "").
func (s *Service) Detach(ctx context.Context, project, agent, id string) (switchboard.WorkspaceInfo, error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if _, _, err := s.workspaceRow(ctx, project, id, ""); err != nil {
		return switchboard.WorkspaceInfo{}, err
	}
	if x := s.liveOn(id); x != nil {
		if err := checkHolder(x, agent, ToolDetachWorkspace); err != nil {
			return switchboard.WorkspaceInfo{}, err
		}
		if err := s.stop(ctx, x, "detach"); err != nil {
			return switchboard.WorkspaceInfo{}, err
		}
	}
	w, cfg, err := s.updateRow(ctx, id, func(w *switchboard.Workspace, cfg *workspaceConfig) bool {
		if w.AgentSessionID != "" {
			cfg.LastAgent = w.AgentSessionID
		}
		w.AgentSessionID, w.Status, w.ContainerID = "", WorkspaceReady, ""
		w.LastUsedAt = time.Now()
		cfg.Anonymous = false
		return true
	})
	if err != nil {
		return switchboard.WorkspaceInfo{}, switchboard.Errorf(switchboard.ErrInternal, "sandbox: updating workspace %s failed", id)
	}
	return s.infoOf(w, cfg), nil
}

// SessionEnded detaches, in the background, every workspace agent
// session agent of project holds: the client went away, so another may
// attach. The returned channel closes when that is done.
func (s *Service) SessionEnded(project, agent string) <-chan struct{} {
	done := make(chan struct{})
	s.mu.Lock()
	defer s.mu.Unlock()
	if agent == "" || s.closed {
		close(done)
		return done
	}
	var held []string
	for _, x := range s.sessions {
		x.mu.Lock()
		if x.project == project && x.attachedBy == agent {
			held = append(held, x.workspaceID)
		}
		x.mu.Unlock()
	}
	s.wg.Go(func() {
		defer close(done)
		for _, id := range held {
			// Not s.ctx: Close waits for this, and a detach cut short
			// would leave the container to Close anyway.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
			if _, err := s.Detach(ctx, project, "", id); err != nil {
				s.log.Warn("sandbox: detaching the workspace of an ended MCP session", "workspace", id, "err", err)
			} else {
				s.log.Info("sandbox: workspace detached: its MCP session ended", "project", project, "workspace", id, "agent_session", agent)
			}
			cancel()
		}
	})
	return done
}

// Snapshot copies workspace id into a new snapshot for agent ("" is the
// admin), pausing its session (if one runs) so the copy is consistent;
// the workspace is kept from then on (no longer anonymous). Errors:
// ErrNotFound, ErrConflict (attached to another agent session, named),
// the engine's.
func (s *Service) Snapshot(ctx context.Context, project, agent, id string) (switchboard.WorkspaceInfo, error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	w, cfg, err := s.workspaceRow(ctx, project, id, "")
	if err != nil {
		return switchboard.WorkspaceInfo{}, err
	}
	if x := s.liveOn(id); x != nil {
		if err := checkHolder(x, agent, ToolSnapshotWorkspace); err != nil {
			return switchboard.WorkspaceInfo{}, err
		}
		cid := x.container()
		switch err := s.opts.Engine.Pause(ctx, cid); {
		case errors.Is(err, switchboard.ErrNotFound):
			// The container is gone (its next call starts another):
			// nothing writes to the volume.
		case err != nil:
			return switchboard.WorkspaceInfo{}, engineError(err)
		default:
			defer func() {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := s.opts.Engine.Unpause(uctx, cid); err != nil {
					s.log.Error("sandbox: unpausing a session after a snapshot", "sandbox_session", x.id, "err", err)
				}
			}()
		}
	}
	info, err := s.copyInto(ctx, w, cfg, WorkspaceSnapshot, workspaceConfig{SnapshotOf: id, Template: cfg.Template, Flavor: cfg.Flavor, Person: cfg.Person})
	if err != nil {
		return info, err
	}
	_, _, err = s.updateRow(ctx, id, func(w *switchboard.Workspace, cfg *workspaceConfig) bool {
		w.LastUsedAt = time.Now()
		cfg.Anonymous = false
		return true
	})
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		s.log.Warn("sandbox: updating a workspace row", "workspace", id, "err", err)
	}
	return info, nil
}

// Restore makes a new workspace (status ready) holding exactly snapshot
// snap's files. Errors: ErrNotFound, the engine's.
func (s *Service) Restore(ctx context.Context, project, snap string) (switchboard.WorkspaceInfo, error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	w, cfg, err := s.workspaceRow(ctx, project, snap, WorkspaceSnapshot)
	if err != nil {
		return switchboard.WorkspaceInfo{}, err
	}
	info, err := s.copyInto(ctx, w, cfg, WorkspaceReady, workspaceConfig{SnapshotOf: snap, Template: cfg.Template, Flavor: cfg.Flavor, Person: cfg.Person})
	if err == nil {
		s.used(ctx, snap)
	}
	return info, err
}

// copyInto creates a workspace row with status and a volume holding a
// copy of from's volume.
func (s *Service) copyInto(ctx context.Context, from switchboard.Workspace, fromCfg workspaceConfig, status string, cfg workspaceConfig) (switchboard.WorkspaceInfo, error) {
	raw, _ := json.Marshal(cfg)
	w, err := s.opts.Store.CreateWorkspace(ctx, switchboard.Workspace{
		ProjectID: from.ProjectID, ContainerType: switchboard.ContainerWorkspace, Image: from.Image, Config: raw,
		Status: "creating", Provider: engine.ProviderName, LastUsedAt: time.Now(),
	})
	if err != nil {
		return switchboard.WorkspaceInfo{}, switchboard.Errorf(switchboard.ErrInternal, "sandbox: recording the copy failed")
	}
	cfg.Volume = volumeFor(w.ID)
	fail := func(err error) (switchboard.WorkspaceInfo, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.opts.Engine.RemoveVolume(dctx, cfg.Volume)
		_ = s.opts.Store.DeleteWorkspace(dctx, w.ID)
		return switchboard.WorkspaceInfo{}, err
	}
	if err := s.createVolume(ctx, cfg.Volume, w.ID, w.ProjectID); err != nil {
		return fail(engineError(err))
	}
	if err := s.copyVolume(ctx, fromCfg.Volume, cfg.Volume, from.ProjectID, fromCfg.Template); err != nil {
		return fail(err)
	}
	raw, _ = json.Marshal(cfg)
	w.Config, w.Status = raw, status
	if w, err = s.opts.Store.UpdateWorkspace(ctx, w); err != nil {
		return fail(switchboard.Errorf(switchboard.ErrInternal, "sandbox: recording the copy failed"))
	}
	s.log.Info("sandbox: workspace copied", "from", from.ID, "to", w.ID, "status", status)
	return s.infoOf(w, cfg), nil
}

// copyVolume copies volume src into the empty volume dst with a helper
// container of the sandbox image, as the sandbox user (every file in a
// workspace is that user's), with no network and no capabilities.
func (s *Service) copyVolume(ctx context.Context, src, dst, project, template string) error {
	// The workspace's own image: a node workspace copies without the
	// python image.
	image, variable := s.imageFor(template)
	id, err := s.opts.Engine.Create(ctx, engine.Spec{
		Image:        image,
		Cmd:          []string{"cp", "-a", "/src/.", "/workspace/"},
		User:         fmt.Sprintf("%d:%d", SandboxUID, SandboxUID),
		Labels:       map[string]string{engine.LabelKind: KindHelper, engine.LabelRef: dst, engine.LabelProject: project},
		ReadOnlyRoot: true,
		Mounts:       []engine.Mount{{Volume: src, Target: "/src", ReadOnly: true}, {Volume: dst, Target: "/workspace"}},
		NanoCPUs:     1e9,
		MemoryBytes:  512 << 20,
		StopTimeout:  time.Second,
	})
	if err != nil {
		if errors.Is(err, switchboard.ErrNotFound) {
			return missingImage(image, "copying a workspace", variable)
		}
		return engineError(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = s.opts.Engine.Remove(rctx, id)
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	exit := s.opts.Engine.WaitNextExit(wctx, id)
	if err := s.opts.Engine.Start(ctx, id); err != nil {
		return engineError(err)
	}
	select {
	case ex := <-exit:
		if ex.Err != nil {
			return engineError(ex.Err)
		}
		if ex.Code != 0 {
			why := fmt.Sprintf("cp exited %d", ex.Code)
			if line := s.copyError(ctx, id); line != "" {
				why = line
			}
			if s.opts.WorkspaceBytes > 0 {
				return switchboard.Errorf(switchboard.ErrInternal, "sandbox: copying the workspace failed (%s; a workspace larger than MCP_SERVER_SANDBOX_WORKSPACE_SIZE does not fit in the copy)", why)
			}
			return switchboard.Errorf(switchboard.ErrInternal, "sandbox: copying the workspace failed (%s)", why)
		}
	case <-wctx.Done():
		return engineError(wctx.Err())
	}
	return nil
}

// copyError is the last thing the copy's cp said, with its paths as the
// workspace names them ("cp: cannot open 'secret.txt' for reading:
// Permission denied"); "" when there is none.
func (s *Service) copyError(ctx context.Context, id string) string {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	out, err := s.opts.Engine.Logs(lctx, id, 20)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	last = strings.NewReplacer("'/src/./", "'", "'/src/", "'", "'/workspace/./", "'", "'/workspace/", "'").Replace(last)
	return switchboard.Clip(last)
}
