package catalog

import "context"

// ProjectHeld is nothing: the catalog's containers and volumes of a
// project are counted by the engine (engine.ProjectHolder).
func (o *OnDemand) ProjectHeld(context.Context, string) ([]string, error) { return nil, nil }

// EndProject ends project's catalog sessions and removes their
// containers (engine.ProjectHolder; see ProjectGone).
func (o *OnDemand) EndProject(ctx context.Context, project string) error {
	return o.ProjectGone(ctx, project)
}
