package engine

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Sweeper is the one periodic sweep of the engine for containers whose
// owner is gone: once when it starts (what a gateway killed with -9
// left), then every period (what a replica that died left). A container
// of a live gateway, this one or another on the same data dir or
// database, is never touched, nor one of another store's gateway that
// shares the instance name (the engine warns of it once); see Sweep.
type Sweeper struct {
	e      *Engine
	alive  func(ctx context.Context, owner string) (bool, error)
	period time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup
	warned bool // the engine could not be swept; said once until it can
}

// StartSweeper sweeps once (bounded by ctx and 30 s), re-attaches sized
// workspaces' file system images (gone after a reboot) before any
// container mounts one, and starts the periodic sweep. alive says whether
// an owner id is a live gateway process (lease.Process.Alive); period is
// the lease period. Close stops it.
func (e *Engine) StartSweeper(ctx context.Context, alive func(ctx context.Context, owner string) (bool, error), period time.Duration) *Sweeper {
	s := &Sweeper{e: e, alive: alive, period: period}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	s.sweep(fctx)
	if err := e.DiskLimits(); err != nil {
		e.log.Info("workspace size limits are not enforced here; workspaces are plain volumes", "why", switchboard.Message(err))
	} else if err := e.RestoreDisks(fctx); err != nil {
		e.log.Warn("re-attaching sized workspaces' file system images", "err", switchboard.Message(err))
	}
	fcancel()
	s.wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(sctx, period)
			s.sweep(c)
			cancel()
		}
	})
	return s
}

func (s *Sweeper) sweep(ctx context.Context) {
	removed, err := s.e.Sweep(ctx, s.alive)
	switch {
	case err != nil && !s.warned:
		s.warned = true
		s.e.log.Warn("could not look for containers of gateway processes that ended; retrying every lease period", "err", switchboard.Message(err), "period", s.period)
	case err == nil:
		s.warned = false
	}
	s.e.log.Debug("swept the engine for containers of gateway processes that ended", "removed", len(removed), "ok", err == nil)
	if len(removed) == 0 {
		return
	}
	owners := map[string]int{}
	for _, st := range removed {
		owners[st.Labels[LabelOwner]]++
	}
	for owner, n := range owners {
		s.e.log.Info("removed containers of a gateway process that ended", "owner", owner, "containers", n)
	}
}

// Close stops sweeping; it is idempotent. The lease is its owner's to
// release, after every container of this process is gone.
func (s *Sweeper) Close(context.Context) error {
	s.cancel()
	s.wg.Wait()
	return nil
}
