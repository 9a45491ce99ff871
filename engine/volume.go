package engine

import (
	"context"
	"errors"
	"maps"
	"slices"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// Volume is a named volume.
type Volume struct {
	Name string
	// Mountpoint is the volume's path on the engine's host: meaningful
	// only for a local, rootful engine, and readable only by root.
	Mountpoint string
	Labels     map[string]string
}

// CreateVolume creates a named local volume carrying labels. One that
// already exists is reused only when it carries every label CreateVolume
// would put on it (this instance's, and the caller's: kind, project,
// ref...); one that differs in any is ErrConflict naming the label.
func (e *Engine) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	want := e.labels(labels)
	if v, err := e.InspectVolume(ctx, name); err == nil {
		return e.sameOwner(name, v.Labels, want)
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		return err
	}
	_, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: want})
	return e.wrap(err, "create volume "+name)
}

// sameOwner checks that an existing object's labels got hold every label
// of want with the same value: nil, or ErrConflict naming the first that
// differs. Values are not shown: another project's name is not this
// caller's to read.
func (e *Engine) sameOwner(name string, got, want map[string]string) error {
	if !e.ours("volume", name, got) {
		return switchboard.Errorf(switchboard.ErrConflict, "volume %q belongs to another gateway that uses this instance name with another store; it is not reused", name)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[k]; !ok && k == LabelStore {
			continue // made before the store label: its instance's (see ours)
		}
		if v, ok := got[k]; !ok || v != want[k] {
			return switchboard.Errorf(switchboard.ErrConflict, "volume %q already exists with a different %s label: it belongs to another owner and is not reused", name, k)
		}
	}
	return nil
}

// FindVolume returns the name of the volume that carries labels: name
// when it exists or none does, else the first of legacy (a name an
// earlier version gave it, see LegacyCatalogVolumes) that exists with
// every label CreateVolume would put on it. A legacy volume whose labels
// differ is someone else's and is never returned. It creates nothing.
// Errors: ErrUnavailable and the engine's others (not ErrNotFound).
func (e *Engine) FindVolume(ctx context.Context, name string, labels map[string]string, legacy ...string) (string, error) {
	if len(legacy) == 0 {
		return name, nil
	}
	if _, err := e.InspectVolume(ctx, name); err == nil {
		return name, nil
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		return "", err
	}
	want := e.labels(labels)
	for _, l := range legacy {
		v, err := e.InspectVolume(ctx, l)
		if errors.Is(err, switchboard.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		if e.sameOwner(l, v.Labels, want) == nil {
			return l, nil
		}
	}
	return name, nil
}

// RemoveVolume removes a volume, and a sized volume's loop device and
// image; a missing one is not an error, one still in use by a container
// is ErrConflict.
func (e *Engine) RemoveVolume(ctx context.Context, name string) error {
	dir := e.disk.dir
	if res, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{}); err == nil {
		if d := diskDirOf(name, res.Volume.Options); d != "" {
			dir = d
		}
	}
	_, err := e.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return e.wrap(err, "remove volume "+name)
	}
	return e.removeDisk(ctx, dir, name)
}

// InspectVolume returns one volume. Errors: ErrNotFound.
func (e *Engine) InspectVolume(ctx context.Context, name string) (Volume, error) {
	res, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if err != nil {
		return Volume{}, e.wrap(err, "inspect volume "+name)
	}
	return Volume{Name: res.Volume.Name, Mountpoint: res.Volume.Mountpoint, Labels: res.Volume.Labels}, nil
}

// ListVolumes returns this store's volumes of the instance carrying
// labels.
func (e *Engine) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	res, err := e.cli.VolumeList(ctx, client.VolumeListOptions{Filters: e.filters(labels)})
	if err != nil {
		return nil, e.wrap(err, "list volumes")
	}
	out := make([]Volume, 0, len(res.Items))
	for _, v := range res.Items {
		if !e.ours("volume", v.Name, v.Labels) {
			continue
		}
		out = append(out, Volume{Name: v.Name, Mountpoint: v.Mountpoint, Labels: v.Labels})
	}
	return out, nil
}
