package engine

import (
	"context"

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
// already exists with this instance's label is reused; one that belongs
// to someone else is ErrConflict.
func (e *Engine) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	if v, err := e.InspectVolume(ctx, name); err == nil {
		if v.Labels[LabelManaged] == "1" && v.Labels[LabelInstance] == e.instance && e.ours("volume", name, v.Labels) {
			return nil
		}
		return switchboard.Errorf(switchboard.ErrConflict, "volume %q exists and does not belong to this gateway", name)
	}
	_, err := e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Driver: "local", Labels: e.labels(labels)})
	return e.wrap(err, "create volume "+name)
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
