package engine

import (
	"context"
	"time"
)

// Running is a started container with its stdio attached.
type Running struct {
	ID     string
	Stream *Stream
	// Exited reports the container's next exit; nil unless asked for.
	Exited <-chan Exit
}

// StartAttached attaches to container id (created with Spec.Stdin),
// registers for its next exit when watch is set (with watchCtx, which
// outlives ctx), and starts it: in that order, so nothing a process that
// dies at once writes or does is missed. On failure the stream is closed
// and the container left as it was. Errors: Attach's and Start's.
func (e *Engine) StartAttached(ctx context.Context, id string, watch context.Context) (Running, error) {
	st, err := e.Attach(ctx, id)
	if err != nil {
		return Running{}, err
	}
	r := Running{ID: id, Stream: st}
	if watch != nil {
		r.Exited = e.WaitNextExit(watch, id)
	}
	if err := e.Start(ctx, id); err != nil {
		_ = st.Close()
		return Running{}, err
	}
	return r, nil
}

// Launch creates a container from s and starts it attached (see
// StartAttached); a container that fails to start is removed, so a
// failed launch leaves nothing. Errors: Create's, StartAttached's.
func (e *Engine) Launch(ctx context.Context, s Spec, watch context.Context) (Running, error) {
	id, err := e.Create(ctx, s)
	if err != nil {
		return Running{}, err
	}
	r, err := e.StartAttached(ctx, id, watch)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := e.Remove(rctx, id); rerr != nil {
			e.log.Warn("engine: removing a container that did not start", "container", id, "err", rerr)
		}
		return Running{}, err
	}
	return r, nil
}
