package catalog

import (
	"context"

	"github.com/switchboard-mcp/switchboard"
)

// pool keeps WarmPool started containers of one per-call server for one
// project while at least one session has the server added.
type pool struct {
	key     poolKey
	entry   *CatalogEntry
	refs    int // activations using it, under OnDemand.mu
	warm    chan *instance
	filling int // under OnDemand.mu
	closed  bool
	tools   []switchboard.Tool // listed once, under OnDemand.mu
	ctx     context.Context    // refills; cancelled when the pool closes
	cancel  context.CancelFunc
}

// acquireLocked returns project's pool of e with one more user.
func (o *OnDemand) acquireLocked(project string, e *CatalogEntry) *pool {
	k := poolKey{project, e.Name}
	p := o.pools[k]
	if p == nil {
		ctx, cancel := context.WithCancel(o.ctx)
		p = &pool{key: k, entry: e, warm: make(chan *instance, max(o.opts.WarmPool, 1)), ctx: ctx, cancel: cancel}
		o.pools[k] = p
	}
	p.refs++
	return p
}

// detachLocked lets go of an activation: its long-lived container, and
// its pool's warm containers if it was the pool's last user, are returned
// to be retired once o.mu is released.
func (o *OnDemand) detachLocked(a *activation) []*instance {
	var out []*instance
	if a.inst != nil {
		out = append(out, a.inst)
	}
	if a.pool != nil {
		out = append(out, o.releaseLocked(a.pool)...)
	}
	return out
}

// releaseLocked drops one user of p; the last one closes it and returns
// its warm containers to retire.
func (o *OnDemand) releaseLocked(p *pool) []*instance {
	p.refs--
	if p.refs > 0 {
		return nil
	}
	delete(o.pools, p.key)
	return p.drainLocked()
}

// drainLocked closes p, stops its refills and returns its warm
// containers.
func (p *pool) drainLocked() []*instance {
	p.closed = true
	p.cancel()
	var out []*instance
	for {
		select {
		case in := <-p.warm:
			out = append(out, in)
		default:
			return out
		}
	}
}

// keepLocked puts an unused container into p's warm pool if it has room;
// false means the caller retires it.
func (o *OnDemand) keepLocked(p *pool, in *instance) bool {
	if p.closed || o.closed || len(p.warm) >= o.opts.WarmPool {
		return false
	}
	p.warm <- in // room checked under mu: never blocks
	return true
}

// take returns a container of p's server for one call: a warm one, or
// one started now. Either way the pool is topped up in the background.
func (o *OnDemand) take(ctx context.Context, p *pool, onPull func(switchboard.PullProgress)) (*instance, error) {
	defer o.refill(p)
	return o.get(ctx, p, onPull)
}

// get is take without the top-up: a warm container of p, or one started
// now.
func (o *OnDemand) get(ctx context.Context, p *pool, onPull func(switchboard.PullProgress)) (*instance, error) {
	for {
		select {
		case in := <-p.warm:
			if in.alive() {
				return in, nil
			}
			o.retire(in) // exited while it waited
		default:
			o.mu.Lock()
			ok := o.reserveLocked()
			o.mu.Unlock()
			if !ok {
				return nil, o.errFull()
			}
			in, err := o.start(ctx, p.key.project, "pool", p.entry, false, onPull)
			if err != nil {
				o.unreserve()
			}
			return in, err
		}
	}
}

// refill starts containers until p holds WarmPool of them (counting
// those starting), as far as MaxContainers allows.
func (o *OnDemand) refill(p *pool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for !p.closed && len(p.warm)+p.filling < o.opts.WarmPool && o.reserveLocked() {
		p.filling++
		o.goBG(func() {
			in, err := o.start(p.ctx, p.key.project, "pool", p.entry, false, nil)
			o.mu.Lock()
			p.filling--
			if err != nil {
				o.count--
				o.mu.Unlock()
				if p.ctx.Err() == nil {
					o.log.Warn("warming a catalog container", "project", p.key.project, "server", p.entry.Name, "err", err)
				}
				return
			}
			kept := o.keepLocked(p, in)
			o.mu.Unlock()
			if !kept {
				o.retire(in)
			}
		})
	}
}
