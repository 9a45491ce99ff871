package engine

import (
	"context"
	"maps"
	"time"
)

// PullsStarted is how many pulls e has begun (shared pulls count once).
func PullsStarted(e *Engine) int64 { return e.pulls.started.Load() }

// ProbesRun is how many runtime probes e has run.
func ProbesRun(e *Engine) int64 { return e.probesRun.Load() }

// SetInfo makes info e's last answer from the engine, read at: a
// runtime list the engine would give after a runtime was registered (or
// re-registered), without registering one.
func SetInfo(e *Engine, info Info, at time.Time) {
	e.infoMu.Lock()
	defer e.infoMu.Unlock()
	e.info, e.infoAt = info, at
}

// InfoTTL is how long e keeps an answer of the engine.
const InfoTTL = infoTTL

// WithRuntime is info with runtime name listed at path and args (added,
// or re-registered when it is listed).
func WithRuntime(info Info, name, pathAndArgs string) Info {
	out := info
	out.runtimeArgs = maps.Clone(info.runtimeArgs)
	if !info.HasRuntime(name) {
		out.Runtimes = append(append([]string(nil), info.Runtimes...), name)
	}
	out.runtimeArgs[name] = pathAndArgs
	return out
}

// Private returns the id of the image ref names and whether it carries
// the mark of an image pulled with credentials.
func Private(e *Engine, ref string) (id string, private bool) {
	img, _, _ := e.inspectImage(context.Background(), ref)
	return img.ID, isPrivate(img)
}

// PullError is pullError: a failed pull's engine error classified.
var PullError = pullError
