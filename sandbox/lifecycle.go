package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// A workspace's life: an execution without session_id makes an
// anonymous one; attach, detach and snapshot make it kept; the retention
// rule deletes an anonymous one once its session has ended; delete
// removes any (refused while another agent session holds it); a project's
// deletion removes all of them. The rows are the truth about which
// workspaces exist and whether a session runs on them: tend corrects the
// ones a crashed gateway left.

// sessionless is the agent of a tool call made without an MCP session. It
// holds nothing, so it may act only on what no agent session holds. (The
// admin API is agent "", which may act on anything.)
const sessionless = "\x00sessionless"

// Sessionless is the agent of an operation that may act only on what no
// agent session holds: the admin API's detach, snapshot and delete unless
// the admin forces them (agent "").
const Sessionless = sessionless

// visible is agent as recorded in rows and results: "" for sessionless.
func visible(agent string) string {
	if agent == sessionless {
		return ""
	}
	return agent
}

// checkHolder refuses op by agent on session x when another agent
// session holds x's workspace through attach_workspace. The admin ("")
// may. Errors: ErrConflict naming the holder.
func checkHolder(x *session, agent, op string) error {
	if agent == "" {
		return nil
	}
	x.mu.Lock()
	holder := x.attachedBy
	x.mu.Unlock()
	if holder == "" || holder == agent {
		return nil
	}
	override := ""
	if agent == sessionless {
		override = " (the admin token may override the hold: the admin API's force=true, the CLI's --force)"
	}
	return switchboard.Errorf(switchboard.ErrConflict, "%s: workspace %s (sandbox session %s) is attached to agent session %s; only that agent session may use, stop, snapshot, detach or delete it until it detaches (detach_workspace) or its MCP session ends%s", op, x.workspaceID, x.id, holder, override)
}

func errProjectDeleting(project string) error {
	return switchboard.Errorf(switchboard.ErrConflict, "project %s is being deleted", project)
}

// updateRow applies fn to workspace id's row and stores it when fn
// returns true. This process's changes to one row are serialized, so one
// never undoes another. Errors: the store's (ErrNotFound).
func (s *Service) updateRow(ctx context.Context, id string, fn func(w *switchboard.Workspace, cfg *workspaceConfig) bool) (switchboard.Workspace, workspaceConfig, error) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	mu := &s.rowMu[h.Sum32()%uint32(len(s.rowMu))]
	mu.Lock()
	defer mu.Unlock()
	var cfg workspaceConfig
	w, err := s.opts.Store.GetWorkspace(ctx, id)
	if err != nil {
		return w, cfg, err
	}
	_ = json.Unmarshal(w.Config, &cfg)
	if !fn(&w, &cfg) {
		return w, cfg, nil
	}
	w.Config, _ = json.Marshal(cfg)
	w, err = s.opts.Store.UpdateWorkspace(ctx, w)
	return w, cfg, err
}

// used records an operation on workspace id: its last_used_at moves to
// now.
func (s *Service) used(ctx context.Context, id string) {
	if s.opts.Store == nil {
		return
	}
	_, _, err := s.updateRow(ctx, id, func(w *switchboard.Workspace, _ *workspaceConfig) bool {
		w.LastUsedAt = time.Now()
		return true
	})
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		s.log.Warn("sandbox: updating a workspace row", "workspace", id, "err", err)
	}
}

// volumeOf names the volume of row w.
func volumeOf(w switchboard.Workspace) string {
	var cfg workspaceConfig
	_ = json.Unmarshal(w.Config, &cfg)
	if cfg.Volume != "" {
		return cfg.Volume
	}
	return volumeFor(w.ID)
}

// removeWorkspace removes workspace id's volume, then its row: a volume
// that cannot go (in use) keeps its row, so the row never lies. Errors:
// ErrConflict (a container uses the volume), the engine's and the store's.
func (s *Service) removeWorkspace(ctx context.Context, id, volume string) error {
	if err := s.opts.Engine.RemoveVolume(ctx, volume); err != nil {
		if errors.Is(err, switchboard.ErrConflict) {
			return switchboard.Errorf(switchboard.ErrConflict, "workspace %s is in use by a container that is not this gateway process's (a session of another replica?); stop it there first", id)
		}
		return engineError(err)
	}
	if s.opts.Store == nil {
		return nil
	}
	// The volume is gone: the row goes too even if ctx ends now (the
	// sweeper's, at Close), or it would claim a workspace that is not.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.opts.Store.DeleteWorkspace(rctx, id); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		return switchboard.Errorf(switchboard.ErrInternal, "sandbox: deleting the row of workspace %s failed", id)
	}
	return nil
}

// Deleted is what delete_workspace returns.
type Deleted struct {
	WorkspaceID string `json:"workspace_id"`
	Deleted     bool   `json:"deleted"`
	Snapshot    bool   `json:"snapshot"`                     // it was a snapshot
	SessionID   string `json:"stopped_session_id,omitempty"` // the session stopped with it
}

// Delete deletes workspace or snapshot id of project for agent ("" is
// the admin API): the session running on it (if any) stops, then its
// volume and its row go. Errors: ErrNotFound, ErrConflict (attached to
// another agent session, named; or its volume is in use by another
// gateway process's container), the engine's.
func (s *Service) Delete(ctx context.Context, project, agent, id string) (Deleted, error) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	w, cfg, err := s.workspaceRow(ctx, project, id, kindAny)
	if err != nil {
		return Deleted{}, err
	}
	out := Deleted{WorkspaceID: id, Deleted: true, Snapshot: w.Status == WorkspaceSnapshot}
	if x := s.liveOn(id); x != nil {
		if err := checkHolder(x, agent, ToolDeleteWorkspace); err != nil {
			return Deleted{}, err
		}
		if err := s.stop(ctx, x, ToolDeleteWorkspace); err != nil {
			return Deleted{}, err
		}
		out.SessionID = x.id
	}
	if err := s.removeWorkspace(ctx, id, cfg.Volume); err != nil {
		return Deleted{}, err
	}
	s.log.Info("sandbox: workspace deleted", "project", project, "workspace", id, "snapshot", out.Snapshot, "agent_session", visible(agent))
	return out, nil
}

// expiresAt is when the retention rule deletes anonymous workspace w
// (ready, no session): its retention after its session ended or it was
// last used, whichever is later.
func (s *Service) expiresAt(w switchboard.Workspace, cfg workspaceConfig) time.Time {
	t := w.LastUsedAt
	if cfg.EndedAt.After(t) {
		t = cfg.EndedAt
	}
	return t.Add(max(s.opts.WorkspaceRetention, 0))
}

// expireLocked deletes workspace id when the retention rule says so at
// now, and reports whether it did. Callers hold wsMu.
func (s *Service) expireLocked(ctx context.Context, id string, now time.Time) bool {
	if s.liveOn(id) != nil {
		return false
	}
	w, err := s.opts.Store.GetWorkspace(ctx, id)
	if err != nil {
		return false
	}
	var cfg workspaceConfig
	_ = json.Unmarshal(w.Config, &cfg)
	if !cfg.Anonymous || w.Status != WorkspaceReady || now.Before(s.expiresAt(w, cfg)) {
		return false
	}
	if err := s.removeWorkspace(ctx, id, volumeOf(w)); err != nil {
		s.log.Warn("sandbox: deleting an expired anonymous workspace", "workspace", id, "err", switchboard.Message(err))
		return false
	}
	s.log.Info("sandbox: anonymous workspace deleted: its retention passed", "project", w.ProjectID, "workspace", id, "retention", max(s.opts.WorkspaceRetention, 0))
	return true
}

// staleCreating is how long a row may say "creating" (a copy takes at
// most 10 minutes) before it is taken for a start that crashed.
const staleCreating = 30 * time.Minute

// Start makes the workspace rows true to the engine, as tend does
// periodically: call it once before serving, after the engine's sweep of
// dead gateways' containers. Errors: the store's and the engine's (what
// could not be checked is checked again by the sweeper).
func (s *Service) Start(ctx context.Context) error {
	s.startSweep()
	return s.tend(ctx)
}

// tend makes the workspace rows true and applies the retention rule. A
// row that says running without a live session here or a container of
// another gateway process (its gateway crashed, or the container was
// removed outside the gateway) becomes ready, its session ended now; a
// row stuck "creating" goes with its volume (a crash during a start or
// a copy); an anonymous workspace whose retention has passed is deleted.
func (s *Service) tend(ctx context.Context) error {
	if s.opts.Store == nil {
		return nil
	}
	rows, err := s.opts.Store.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		return switchboard.Errorf(switchboard.ErrInternal, "sandbox: listing workspaces failed")
	}
	var errs []error
	for _, w := range rows {
		now := time.Now()
		switch w.Status {
		case WorkspaceRunning:
			ok, err := s.reconcile(ctx, w)
			if err != nil {
				errs = append(errs, err)
			}
			if !ok {
				continue
			}
		case "creating":
			if now.Sub(w.UpdatedAt) < staleCreating || s.liveOn(w.ID) != nil {
				continue
			}
			s.wsMu.Lock()
			err := s.removeWorkspace(ctx, w.ID, volumeOf(w))
			s.wsMu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				s.log.Info("sandbox: removed a workspace left half-made by a crash", "project", w.ProjectID, "workspace", w.ID)
			}
			continue
		case WorkspacePooled:
			if err := s.tendPooled(ctx, w); err != nil {
				errs = append(errs, err)
			}
			continue
		case WorkspaceReady:
		default:
			continue
		}
		var cfg workspaceConfig
		_ = json.Unmarshal(w.Config, &cfg)
		if !cfg.Anonymous {
			continue
		}
		s.wsMu.Lock()
		s.expireLocked(ctx, w.ID, time.Now())
		s.wsMu.Unlock()
	}
	return errors.Join(errs...)
}

// reconcile makes running row w ready when no session runs on it: none
// of this process, and no container of another live gateway process
// (the engine's sweep removes a dead one's). It reports whether it did.
func (s *Service) reconcile(ctx context.Context, w switchboard.Workspace) (bool, error) {
	if s.liveOn(w.ID) != nil {
		return false, nil
	}
	if w.ContainerID != "" {
		st, err := s.opts.Engine.Inspect(ctx, w.ContainerID)
		switch {
		case err == nil && st.Labels[engine.LabelOwner] != s.opts.Engine.Owner():
			return false, nil // another gateway's session
		case err == nil:
			// Ours, yet no session of ours: a leftover.
			s.discard(ctx, w.ContainerID, nil)
		case !errors.Is(err, switchboard.ErrNotFound):
			return false, engineError(err)
		}
	}
	changed := false
	_, _, err := s.updateRow(ctx, w.ID, func(row *switchboard.Workspace, cfg *workspaceConfig) bool {
		if row.Status != WorkspaceRunning || row.ContainerID != w.ContainerID || s.liveOn(w.ID) != nil {
			return false // a session started on it meanwhile
		}
		if row.AgentSessionID != "" {
			cfg.LastAgent = row.AgentSessionID
		}
		cfg.EndedAt = time.Now().UTC()
		cfg.Resumable = true // its gateway ended under it
		row.Status, row.ContainerID, row.AgentSessionID = WorkspaceReady, "", ""
		changed = true
		return true
	})
	if err != nil {
		if errors.Is(err, switchboard.ErrNotFound) {
			return false, nil
		}
		return false, switchboard.Errorf(switchboard.ErrInternal, "sandbox: updating workspace %s failed", w.ID)
	}
	if changed {
		s.log.Info("sandbox: workspace said running, but its session's container is gone (its gateway ended, or it was removed); now ready", "project", w.ProjectID, "workspace", w.ID)
	}
	return changed, nil
}

// projectObjects returns project's workspace and snapshot rows, and the
// workspace volumes on the engine labelled with project that no row
// names (their rows are gone).
func (s *Service) projectObjects(ctx context.Context, project string) ([]switchboard.Workspace, []string, error) {
	var rows []switchboard.Workspace
	if s.opts.Store != nil {
		var err error
		rows, err = s.opts.Store.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
		if err != nil {
			return nil, nil, switchboard.Errorf(switchboard.ErrInternal, "sandbox: listing the project's workspaces failed")
		}
	}
	vols, err := s.opts.Engine.ListVolumes(ctx, map[string]string{engine.LabelProject: project, engine.LabelKind: KindWorkspace})
	if err != nil {
		return rows, nil, engineError(err)
	}
	known := map[string]bool{}
	for _, w := range rows {
		known[volumeOf(w)] = true
	}
	var orphans []string
	for _, v := range vols {
		if !known[v.Name] {
			orphans = append(orphans, v.Name)
		}
	}
	return rows, orphans, nil
}

// ProjectUsage counts what the sandbox keeps for project: its sessions
// live in this process, and its workspaces and snapshots (rows, and
// workspace volumes on the engine whose row is gone). Errors: the
// store's and the engine's.
func (s *Service) ProjectUsage(ctx context.Context, project string) (sessions, workspaces int, err error) {
	sessions = len(s.Sessions(project))
	rows, orphans, err := s.projectObjects(ctx, project)
	// Warm containers' workspaces are the gateway's, not the project's
	// data: deleting the project removes them without asking.
	pooled := s.pooledVolumes()
	workspaces = len(rows) + len(orphans)
	for _, w := range rows {
		if w.Status == WorkspacePooled {
			workspaces--
		}
	}
	for _, v := range orphans {
		if pooled[v] {
			workspaces--
		}
	}
	return sessions, workspaces, err
}

// DeleteProject removes everything the sandbox keeps for project: it
// refuses new sessions of project until it returns, stops every session
// of it (held or not), then removes every workspace and snapshot (volume
// and row) and every workspace volume labelled with project whose row is
// already gone. Errors: joined, the engine's (a volume still used by
// another gateway process's container: ErrConflict) and the store's;
// what was removed stays removed.
func (s *Service) DeleteProject(ctx context.Context, project string) error {
	s.mu.Lock()
	s.deleting[project]++
	for s.pending[project] > 0 {
		s.settled.Wait() // a start under way sees the mark and undoes itself
	}
	warm := s.drainLocked(func(k poolKey) bool { return k.project == project })
	var live []*session
	for _, x := range s.sessions {
		if x.project == project {
			live = append(live, x)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.deleting[project]--; s.deleting[project] == 0 {
			delete(s.deleting, project)
		}
		s.mu.Unlock()
	}()
	s.removeAll(warm)
	var errs []error
	for _, x := range live {
		if err := s.stop(ctx, x, "project deleted"); err != nil {
			errs = append(errs, err)
		}
	}
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	rows, orphans, err := s.projectObjects(ctx, project)
	if err != nil {
		errs = append(errs, err)
	}
	for _, w := range rows {
		if err := s.removeWorkspace(ctx, w.ID, volumeOf(w)); err != nil {
			errs = append(errs, err)
		}
	}
	for _, v := range orphans {
		if err := s.opts.Engine.RemoveVolume(ctx, v); err != nil {
			errs = append(errs, engineError(err))
		}
	}
	s.log.Info("sandbox: project's sessions and workspaces removed", "project", project, "sessions", len(live), "warm", len(warm), "workspaces", len(rows), "volumes_without_row", len(orphans), "failures", len(errs))
	return errors.Join(errs...)
}

// Outlived reports whether project's session id runs here on a workspace
// whose row is gone from the store: its project was deleted, through this
// replica or another, maybe re-created under the same id since (rows go
// with their project, and a new project's rows are new). Such a session
// must not serve the new project.
func (s *Service) Outlived(ctx context.Context, project, id string) bool {
	x, err := s.lookup(project, id)
	if err != nil || s.opts.Store == nil {
		return false
	}
	_, err = s.opts.Store.GetWorkspace(ctx, x.workspaceID)
	return errors.Is(err, switchboard.ErrNotFound)
}

// ProjectGone ends what this process still runs for project once the
// project was deleted (another replica took the DELETE, or a project
// re-created under the same id is not the one these sessions served):
// its warm containers, and every session that Outlived it, with its
// volume, which no row names any more. Sessions of a project re-created
// under the same id keep running. Errors: joined, the engine's and the
// store's.
func (s *Service) ProjectGone(ctx context.Context, project string) error {
	s.Drain(project)
	var errs []error
	ended := 0
	for _, info := range s.Sessions(project) {
		if !s.Outlived(ctx, project, info.SessionID) {
			continue
		}
		x, err := s.lookup(project, info.SessionID)
		if err != nil {
			continue // stopped meanwhile
		}
		if err := s.stop(ctx, x, "project deleted"); err != nil {
			errs = append(errs, err)
			continue
		}
		ended++
		if err := s.removeWorkspace(ctx, x.workspaceID, x.volume); err != nil {
			errs = append(errs, err)
		}
	}
	if ended > 0 || len(errs) > 0 {
		s.log.Info("sandbox: sessions of a deleted project ended", "project", project, "sessions", ended, "failures", len(errs))
	}
	return errors.Join(errs...)
}
