package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/lease"
)

// ownership sweeps the engine of the containers whose owner is gone:
// once before anything starts (what a gateway killed with -9 left), then
// every lease period (what a replica that died left). A container of a
// live gateway, this one or another on the same data dir or database, is
// never touched, nor one of another store's gateway that shares the
// instance name (the engine warns of it once). The lease itself is run's.
type ownership struct {
	proc   *lease.Process
	eng    *engine.Engine
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	warned bool // the engine could not be swept; said once until it can
}

// startOwnership sweeps once and starts the periodic sweep. eng may be
// nil (no engine configured).
func startOwnership(ctx context.Context, proc *lease.Process, eng *engine.Engine, log *slog.Logger) *ownership {
	o := &ownership{proc: proc, eng: eng, log: log}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	o.cancel = cancel
	if eng == nil {
		return o
	}
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	o.sweep(fctx)
	// Sized workspaces' loop devices, before any container mounts one
	// (gone after a reboot).
	if err := eng.DiskLimits(); err != nil {
		log.Info("workspace size limits are not enforced here; workspaces are plain volumes", "why", switchboard.Message(err))
	} else if err := eng.RestoreDisks(fctx); err != nil {
		log.Warn("re-attaching sized workspaces' file system images", "err", switchboard.Message(err))
	}
	fcancel()
	o.wg.Go(func() {
		t := time.NewTicker(proc.TTL())
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(sctx, proc.TTL())
			o.sweep(c)
			cancel()
		}
	})
	return o
}

func (o *ownership) sweep(ctx context.Context) {
	removed, err := o.eng.Sweep(ctx, o.proc.Alive)
	switch {
	case err != nil && !o.warned:
		o.warned = true
		o.log.Warn("could not look for containers of gateway processes that ended; retrying every lease period", "err", switchboard.Message(err), "period", o.proc.TTL())
	case err == nil:
		o.warned = false
	}
	o.log.Debug("swept the engine for containers of gateway processes that ended", "removed", len(removed), "ok", err == nil)
	if len(removed) == 0 {
		return
	}
	owners := map[string]int{}
	for _, st := range removed {
		owners[st.Labels[engine.LabelOwner]]++
	}
	for owner, n := range owners {
		o.log.Info("removed containers of a gateway process that ended", "owner", owner, "containers", n)
	}
}

// close stops sweeping. The lease is run's to release, after every
// container of this process is gone.
func (o *ownership) close(context.Context) error {
	o.cancel()
	o.wg.Wait()
	return nil
}
