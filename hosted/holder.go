package hosted

import (
	"context"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// ProjectHeld says what deleting project would end here: its hosted
// servers (engine.ProjectHolder).
func (s *Service) ProjectHeld(ctx context.Context, project string) ([]string, error) {
	rows, err := s.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerMCPServer})
	if err != nil {
		return nil, err
	}
	return engine.Count(len(rows), "hosted server", "hosted servers"), nil
}

// EndProject waits, bounded by ctx, until project's hosted servers are
// stopped and removed (engine.ProjectHolder; see ProjectGone).
func (s *Service) EndProject(ctx context.Context, project string) error {
	select {
	case <-s.ProjectGone(project):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
