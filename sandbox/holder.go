package sandbox

import (
	"context"

	"github.com/switchboard-mcp/switchboard/engine"
)

// ProjectHeld says what deleting project would end here: its sessions
// and its workspaces and snapshots (engine.ProjectHolder). With the
// engine unreachable it still counts what it knows, and says so.
func (s *Service) ProjectHeld(ctx context.Context, project string) ([]string, error) {
	sessions, workspaces, err := s.ProjectUsage(ctx, project)
	return append(engine.Count(sessions, "sandbox session", "sandbox sessions"),
		engine.Count(workspaces, "workspace or snapshot", "workspaces and snapshots")...), err
}

// EndProject ends project's sessions and removes its workspaces
// (engine.ProjectHolder; see DeleteProject).
func (s *Service) EndProject(ctx context.Context, project string) error {
	return s.DeleteProject(ctx, project)
}
