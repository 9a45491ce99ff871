package engine

import (
	"context"
	"errors"

	"github.com/moby/moby/client"
)

// ProjectObjects counts this store's containers (of any owner) and
// volumes of the instance labelled with project. Errors: ErrUnavailable.
func (e *Engine) ProjectObjects(ctx context.Context, project string) (containers, volumes int, err error) {
	l := map[string]string{LabelProject: project}
	cs, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: e.filters(l)})
	if err != nil {
		return 0, 0, e.wrap(err, "list containers")
	}
	vs, err := e.ListVolumes(ctx, l)
	if err != nil {
		return 0, 0, err
	}
	for _, c := range cs.Items {
		if e.ours("container", c.ID, c.Labels) {
			containers++
		}
	}
	return containers, len(vs), nil
}

// RemoveProject removes what is left of a deleted project: this
// process's containers labelled with it, then every volume of the
// instance labelled with it (volumes have no owner: the project's rows
// owned them, and they are gone). A volume still mounted by another
// live gateway's container stays, and is reported as ErrConflict.
func (e *Engine) RemoveProject(ctx context.Context, project string) error {
	l := map[string]string{LabelProject: project}
	var errs []error
	if _, err := e.RemoveOwned(ctx, l); err != nil {
		errs = append(errs, err)
	}
	vs, err := e.ListVolumes(ctx, l)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, v := range vs {
		if err := e.RemoveVolume(ctx, v.Name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
