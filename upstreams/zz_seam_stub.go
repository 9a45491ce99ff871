package upstreams

// TEMPORARY until the seam branch lands (see /work/plan/seam-api.md).

import (
	"context"
	"io"

	"github.com/switchboard-mcp/switchboard"
)

type Stream interface {
	io.Reader
	io.Writer
	Close() error
}
type StreamOpener interface {
	OpenStream(ctx context.Context, spec switchboard.ServerSpec) (Stream, error)
}
