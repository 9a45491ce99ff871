package engine

// PullsStarted is how many pulls e has begun (shared pulls count once).
func PullsStarted(e *Engine) int64 { return e.pulls.started.Load() }
