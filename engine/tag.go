package engine

import (
	"context"

	"github.com/moby/moby/client"
)

// TagImage gives image src the additional name dst (moving dst when it
// named another image), as `docker tag` does. Errors: ErrNotFound when
// src is missing, ErrUnavailable.
func (e *Engine) TagImage(ctx context.Context, src, dst string) error {
	if _, err := e.cli.ImageTag(ctx, client.ImageTagOptions{Source: src, Target: dst}); err != nil {
		return e.wrap(err, "tag image "+src+" as "+dst)
	}
	return nil
}
