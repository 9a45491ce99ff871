package sandbox

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard"
)

// Resume goes on with project's session id on this gateway, on the
// workspace the session ran on: what a replica does for a session whose
// own replica died (its processes are lost, its files are not). The
// caller takes the session over first (its lease, and the container the
// dead replica left on a shared engine). Only a session whose row says it
// runs, or ended with its gateway (a crash, a shutdown), goes on; one
// stopped by stop_session or idleness stays stopped. The session keeps its id, its
// template and flavor, and no holder (the agent session that held it
// ended with its replica). Errors: ErrNotFound (no workspace names the
// session, or a live session of this gateway runs on it), the start's.
func (s *Service) Resume(ctx context.Context, project, id string) error {
	s.mu.Lock()
	_, ok := s.sessions[id]
	s.mu.Unlock()
	if ok {
		return nil
	}
	notFound := s.unknownSession(id)
	if s.opts.Store == nil {
		return notFound
	}
	rows, err := s.opts.Store.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		return err
	}
	for _, w := range rows {
		var cfg workspaceConfig
		if json.Unmarshal(w.Config, &cfg) != nil || cfg.Session != id || w.Status == WorkspaceSnapshot {
			continue
		}
		// Running (its replica died and no process has found out yet), or
		// ended with its gateway; not stopped on purpose.
		if w.Status != WorkspaceRunning && !cfg.Resumable {
			return notFound
		}
		if s.liveOn(w.ID) != nil {
			return notFound
		}
		// It stays its person's: the binding is on its row, not only in
		// the memory of the replica that ended.
		x, err := s.createAs(ctx, id, project, "", cfg.Person, cfg.Template, cfg.Flavor, w.ID)
		if err != nil {
			return err
		}
		s.log.Info("sandbox: session taken over from a replica that ended; its files are kept, its processes were lost", "project", project, "sandbox_session", x.id, "workspace", w.ID)
		return nil
	}
	return notFound
}

// Fence stops project's session id on this gateway, which can no longer
// prove it holds the session's lease (another replica took it, or the
// store did not renew it in time): its container is removed, running
// executions end with it, and calls naming it are this gateway's no
// more. Its workspace row is left as it is, for the lease's next holder
// to resume the session on (a row that still says running is resumable).
// Errors: ErrNotFound (not a session of this gateway), the engine's
// (the session is kept; the caller tries again).
func (s *Service) Fence(ctx context.Context, project, id string) error {
	x, err := s.lookup(project, id)
	if err != nil {
		return err
	}
	return s.stop(ctx, x, stopFenced)
}

// SessionOf is the sandbox session workspace row w names (its running
// session, or the last one), "" when none.
func SessionOf(w switchboard.Workspace) string {
	var cfg workspaceConfig
	if json.Unmarshal(w.Config, &cfg) != nil {
		return ""
	}
	return cfg.Session
}
