package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// A ProjectHolder runs containers of projects on the engine (hosted
// servers, the catalog, the sandbox) and ends a project's when it is
// deleted.
type ProjectHolder interface {
	// ProjectHeld says what it holds of project, as phrases ("2 sandbox
	// sessions"), so that a deletion that would end them is asked to be
	// forced.
	ProjectHeld(ctx context.Context, project string) ([]string, error)
	// EndProject stops and removes what it holds of project. It may fail
	// while other replicas sharing the engine still use some of it; it is
	// asked again once they have let go.
	EndProject(ctx context.Context, project string) error
}

// Teardown is the one way a project is deleted on the container side:
// each holder ends what it holds of the project, then the engine removes
// whatever else carries the project's label, volumes included, so nothing
// of a deleted project stays and a project created later with the same id
// starts empty.
type Teardown struct {
	Engine  *Engine // nil: no engine configured (the holders' rows still go)
	Holders []ProjectHolder
	// Settle bounds the wait for other replicas sharing the engine to end
	// the project's containers (they see it gone at their next sync).
	Settle time.Duration
	// Poll is how often that wait looks; 0 is 100 ms.
	Poll time.Duration
}

// ProjectUsage says what deleting project would end: what the holders
// hold and, when none holds anything, what the engine still has of it (a
// catalog's containers and volumes, leftovers). Without an engine the
// holders' rows still count: a gateway without Docker deletes projects.
func (t *Teardown) ProjectUsage(ctx context.Context, project string) ([]string, error) {
	var out []string
	for _, h := range t.Holders {
		held, err := h.ProjectHeld(ctx, project)
		if err != nil && !errors.Is(err, switchboard.ErrUnavailable) {
			return nil, err
		}
		out = append(out, held...)
	}
	if t.Engine != nil && len(out) == 0 {
		containers, volumes, err := t.Engine.ProjectObjects(ctx, project)
		if err != nil && !errors.Is(err, switchboard.ErrUnavailable) {
			return nil, err
		}
		out = append(out, Count(containers, "container", "containers")...)
		out = append(out, Count(volumes, "volume", "volumes")...)
	}
	return out, nil
}

// Count is the phrase for n things ("1 volume", "3 volumes"), none for 0.
func Count(n int, one, many string) []string {
	switch {
	case n == 1:
		return []string{"1 " + one}
	case n > 1:
		return []string{fmt.Sprintf("%d %s", n, many)}
	}
	return nil
}

// DeleteProject ends project on the container side (see Teardown).
func (t *Teardown) DeleteProject(ctx context.Context, project string) error {
	var errs []error
	var again []ProjectHolder // to ask once the other replicas let go
	for _, h := range t.Holders {
		if err := h.EndProject(ctx, project); err != nil {
			again = append(again, h)
			errs = append(errs, err)
		}
	}
	if t.Engine == nil {
		return nil
	}
	// Containers other replicas run on this engine hold volumes of the
	// project until they see it gone; then what is left goes. This
	// process's own leftovers go first: they are not waited for.
	var final []error
	if _, err := t.Engine.RemoveOwned(ctx, map[string]string{LabelProject: project}); err != nil {
		final = append(final, err)
	}
	if err := t.othersGone(ctx, project); err != nil {
		final = append(final, err)
		final = append(final, errs...)
	} else {
		for _, h := range again {
			final = append(final, h.EndProject(ctx, project))
		}
	}
	final = append(final, t.Engine.RemoveProject(ctx, project))
	if t.Engine.Ping(ctx) != nil {
		// No engine, nothing of the project on it to remove: a gateway
		// without Docker deletes projects as it always did.
		return nil
	}
	return errors.Join(final...)
}

// othersGone waits, bounded by Settle, until the engine holds no
// container of project: those of this process are gone by now, and other
// replicas sharing the engine end theirs when their sync sees the project
// gone. Errors: ErrConflict saying how many are left.
func (t *Teardown) othersGone(ctx context.Context, project string) error {
	ctx, cancel := context.WithTimeout(ctx, t.Settle)
	defer cancel()
	tick := time.NewTicker(cmp.Or(t.Poll, 100*time.Millisecond))
	defer tick.Stop()
	for {
		n, _, err := t.Engine.ProjectObjects(ctx, project)
		switch {
		case errors.Is(err, switchboard.ErrUnavailable):
			return err
		case err == nil && n == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return switchboard.Errorf(switchboard.ErrConflict, "%d containers of project %q were still on the engine after %s: a replica that runs them has not seen the deletion (is it cut off from the store?); they go when it does", n, project, t.Settle)
		case <-tick.C:
		}
	}
}
