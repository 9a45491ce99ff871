package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// teardown is what deleting a project does on the container side
// (api.Teardown): each service forgets the project and removes what it
// runs, then the engine removes whatever else carries the project's
// label, volumes included, so nothing of a deleted project stays and a
// project created later with the same id starts empty.
type teardown struct {
	st   switchboard.WorkspaceStore
	eng  *engine.Engine
	hr   *hostedRuntime
	cat  *catalogRuntime
	sbox *sandboxRuntime
	// settle bounds the wait for other replicas sharing the engine to end
	// the project's containers (they see it gone at their next sync).
	settle time.Duration
}

// ProjectUsage implements api.Teardown.
func (t *teardown) ProjectUsage(ctx context.Context, project string) ([]string, error) {
	var out []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			out = append(out, "1 "+one)
		case n > 1:
			out = append(out, fmt.Sprintf("%d %s", n, many))
		}
	}
	// Without an engine the rows still count; what only the engine
	// knows cannot be, and a gateway without Docker deletes projects.
	sessions, workspaces, err := t.sbox.svc.ProjectUsage(ctx, project)
	if err != nil && !errors.Is(err, switchboard.ErrUnavailable) {
		return nil, err
	}
	add(sessions, "sandbox session", "sandbox sessions")
	add(workspaces, "workspace or snapshot", "workspaces and snapshots")
	rows, err := t.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerMCPServer})
	if err != nil {
		return nil, err
	}
	add(len(rows), "hosted server", "hosted servers")
	// What the services named is what the engine holds for the project;
	// ask the engine only for what none of them knows (a catalog's
	// containers and volumes, leftovers).
	if t.eng != nil && len(out) == 0 {
		containers, volumes, err := t.eng.ProjectObjects(ctx, project)
		if err != nil && !errors.Is(err, switchboard.ErrUnavailable) {
			return nil, err
		}
		add(containers, "container", "containers")
		add(volumes, "volume", "volumes")
	}
	return out, nil
}

// DeleteProject implements api.Teardown.
func (t *teardown) DeleteProject(ctx context.Context, project string) error {
	sboxErr := t.sbox.svc.DeleteProject(ctx, project)
	var errs []error
	select {
	case <-t.hr.svc.ProjectGone(project):
	case <-ctx.Done():
		errs = append(errs, ctx.Err())
	}
	if t.cat.od != nil {
		errs = append(errs, t.cat.od.ProjectGone(ctx, project))
	}
	if t.eng != nil {
		// Sessions other replicas run on this engine hold volumes of the
		// project until they see it gone; then what is left goes. This
		// process's own leftovers go first: they are not waited for.
		if _, err := t.eng.RemoveOwned(ctx, map[string]string{engine.LabelProject: project}); err != nil {
			errs = append(errs, err)
		}
		if err := t.othersGone(ctx, project); err != nil {
			errs = append(errs, err)
		} else if sboxErr != nil {
			sboxErr = t.sbox.svc.DeleteProject(ctx, project)
		}
		errs = append(errs, t.eng.RemoveProject(ctx, project))
	}
	err := errors.Join(append(errs, sboxErr)...)
	if t.eng == nil || t.eng.Ping(ctx) != nil {
		// No engine, nothing of the project on it to remove: a gateway
		// without Docker deletes projects as it always did.
		return nil
	}
	return err
}

// othersGone waits, bounded by settle, until the engine holds no
// container of project: those of this process are gone by now, and other
// replicas sharing the engine end theirs when their sync sees the project
// gone. Errors: ErrConflict saying how many are left.
func (t *teardown) othersGone(ctx context.Context, project string) error {
	ctx, cancel := context.WithTimeout(ctx, t.settle)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		n, _, err := t.eng.ProjectObjects(ctx, project)
		switch {
		case errors.Is(err, switchboard.ErrUnavailable):
			return err
		case err == nil && n == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return switchboard.Errorf(switchboard.ErrConflict, "%d containers of project %q were still on the engine after %s: a replica that runs them has not seen the deletion (is it cut off from the store?); they go when it does", n, project, t.settle)
		case <-tick.C:
		}
	}
}
