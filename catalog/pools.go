package catalog

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// refillParallel is how many containers one pool starts at once while
// it holds less than half its target; above that, one at a time. More in
// flight on a small engine makes each arrive later (they share the CPU
// with each other and with the calls on warm containers), and a call
// that missed waits for the first to arrive.
const refillParallel = 2

// pool keeps started containers of one per-call server for one project
// while at least one session has the server added: WarmPool of them,
// more after a call found it empty (up to WarmPoolMax), and back to
// WarmPool once no call came for WarmPoolIdle.
type pool struct {
	key     poolKey
	entry   *CatalogEntry
	refs    int // activations using it, under OnDemand.mu
	warm    chan *instance
	filling int // under OnDemand.mu
	// target is how many warm containers the pool keeps, under
	// OnDemand.mu: WarmPool, doubled by each miss up to WarmPoolMax.
	target   int
	lastTake time.Time   // under OnDemand.mu
	shrink   *time.Timer // under OnDemand.mu; armed while target > WarmPool
	closed   bool
	// failed is closed when a refill fails (failErr says why), for the
	// calls waiting on the pool; under OnDemand.mu.
	failed  chan struct{}
	failErr error
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
		p = &pool{key: k, entry: e, warm: make(chan *instance, max(o.opts.WarmPoolMax, 1)), target: o.opts.WarmPool, ctx: ctx, cancel: cancel}
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
	if p.shrink != nil {
		p.shrink.Stop()
	}
	return p.excessLocked(0)
}

// excessLocked takes warm containers out of p until it holds n.
func (p *pool) excessLocked(n int) []*instance {
	var out []*instance
	for len(p.warm) > n {
		select {
		case in := <-p.warm:
			out = append(out, in)
		default:
			return out
		}
	}
	return out
}

// keepLocked puts an unused container into p's warm pool if it has room;
// false means the caller retires it.
func (o *OnDemand) keepLocked(p *pool, in *instance) bool {
	if p.closed || o.closed || len(p.warm) >= p.target {
		return false
	}
	p.warm <- in // room checked under mu (target <= cap): never blocks
	return true
}

// take returns a container of p's server for one call: a warm one, or,
// when the pool is empty, the first of one started now and those the
// pool is starting. Either way the pool is topped up in the background,
// and a miss raises its target.
func (o *OnDemand) take(ctx context.Context, p *pool, onPull func(switchboard.PullProgress)) (*instance, error) {
	defer o.refill(p)
	o.mu.Lock()
	p.lastTake = time.Now()
	o.armShrinkLocked(p)
	o.mu.Unlock()
	return o.get(ctx, p, true, onPull)
}

// get is take without the top-up: a warm container of p, or one started
// now. A miss (pool empty) doubles p's target when grow is set.
func (o *OnDemand) get(ctx context.Context, p *pool, grow bool, onPull func(switchboard.PullProgress)) (*instance, error) {
	o.mu.Lock()
	for empty := false; !empty; {
		// Under mu, so a refill landing now is seen (keepLocked sends
		// under mu) rather than this call starting a container cold.
		select {
		case in := <-p.warm:
			if in.alive() {
				o.mu.Unlock()
				return in, nil
			}
			o.mu.Unlock()
			o.retire(in) // exited while it waited
			o.mu.Lock()
		default:
			empty = true
		}
	}
	if grow {
		o.growLocked(p)
		o.refillLocked(p)
		if p.filling > 0 {
			// The pool is starting containers already: the first one
			// ready is this call's. A start of its own would be no sooner
			// and would slow theirs (and the calls on warm containers)
			// down on a small engine.
			failed := p.failedLocked()
			o.mu.Unlock()
			in, _, err := o.waitWarm(ctx, p, nil, failed)
			return in, err
		}
	}
	ok, evicted := o.reserveEvictLocked()
	waitPool := !ok && p.filling > 0
	failed := p.failedLocked()
	o.mu.Unlock()
	if evicted != nil {
		o.discard(evicted, false)
	}
	if !ok {
		if !waitPool {
			return nil, o.errFull()
		}
		// No room for another container, but the pool is starting some:
		// the first one is this call's.
		in, _, err := o.waitWarm(ctx, p, nil, failed)
		return in, err
	}
	// Start one for this call, and take whichever arrives first: it, or
	// a container the pool was already starting. The one not taken goes
	// to the pool unused (or is removed if the pool has no room).
	sctx, cancel := context.WithCancel(p.ctx)
	stop := context.AfterFunc(ctx, cancel)
	var handed atomic.Bool // the call took another: no pull progress to it
	if onPull != nil {
		report := onPull
		onPull = func(pp switchboard.PullProgress) {
			if !handed.Load() {
				report(pp)
			}
		}
	}
	res := make(chan startResult, 1)
	o.goBG(func() {
		defer cancel()
		in, err := o.start(sctx, p.key.project, "pool", p.entry, false, onPull)
		if err != nil {
			o.unreserve()
		}
		res <- startResult{in, err}
	})
	in, own, err := o.waitWarm(ctx, p, res, nil)
	stop()
	if err != nil {
		return nil, err
	}
	if !own {
		// A warm one came first: this call's start goes on for the
		// pool, whatever happens to the call.
		handed.Store(true)
		o.goBG(func() { o.settle(p, <-res) })
	}
	return in, nil
}

// startResult is the outcome of a container start a call waits for; a
// failed start has given its reservation back.
type startResult struct {
	in  *instance
	err error
}

// waitWarm waits for the first of: a live container arriving in p, the
// call's own start (res; nil: none) ending, ctx ending, a refill of p
// failing (failed closed; nil: not watched). own reports that the
// container is the call's own start's. A failed start or ctx's end is an
// error; if the own start is still running then, its container goes to
// the pool when it is ready.
func (o *OnDemand) waitWarm(ctx context.Context, p *pool, res chan startResult, failed <-chan struct{}) (in *instance, own bool, err error) {
	closed := p.ctx.Done()
	if res != nil {
		closed = nil // the own start ends with the pool and reports it
	}
	for {
		select {
		case in := <-p.warm:
			if !in.alive() {
				o.retire(in)
				continue
			}
			return in, false, nil
		case r := <-res:
			return r.in, true, r.err
		case <-ctx.Done():
			if res != nil {
				o.goBG(func() { o.settle(p, <-res) })
			}
			return nil, false, switchboard.Errorf(switchboard.ErrCanceled, "catalog server %q: the call ended while its container started", p.entry.Name)
		case <-failed:
			o.mu.Lock()
			err := p.failErr
			o.mu.Unlock()
			return nil, false, err
		case <-closed:
			return nil, false, switchboard.Errorf(switchboard.ErrCanceled, "catalog server %q was removed while the call waited for a container", p.entry.Name)
		}
	}
}

// failedLocked returns the channel closed when one of p's refills fails
// next.
func (p *pool) failedLocked() <-chan struct{} {
	if p.failed == nil {
		p.failed = make(chan struct{})
	}
	return p.failed
}

// settle puts a container started for a call that took another into p,
// or removes it.
func (o *OnDemand) settle(p *pool, r startResult) {
	if r.err != nil {
		return
	}
	o.mu.Lock()
	kept := o.keepLocked(p, r.in)
	o.mu.Unlock()
	if !kept {
		o.retire(r.in)
	}
}

// growLocked doubles p's target after a call found it empty, up to
// WarmPoolMax.
func (o *OnDemand) growLocked(p *pool) {
	if p.closed || p.target == 0 || p.target >= o.opts.WarmPoolMax {
		return
	}
	p.target = min(p.target*2, o.opts.WarmPoolMax)
	o.armShrinkLocked(p)
}

// armShrinkLocked (re)starts p's idle timer while its target is above
// WarmPool.
func (o *OnDemand) armShrinkLocked(p *pool) {
	if p.closed || p.target <= o.opts.WarmPool {
		return
	}
	if p.shrink == nil {
		p.shrink = time.AfterFunc(o.opts.WarmPoolIdle, func() { o.shrinkPool(p, false) })
		return
	}
	p.shrink.Reset(o.opts.WarmPoolIdle)
}

// shrinkPool brings p back to WarmPool warm containers once no call took
// one for WarmPoolIdle (or at once with force, the tests' hook), removing
// the rest.
func (o *OnDemand) shrinkPool(p *pool, force bool) {
	o.mu.Lock()
	if p.closed || p.target <= o.opts.WarmPool {
		o.mu.Unlock()
		return
	}
	if idle := time.Since(p.lastTake); !force && idle < o.opts.WarmPoolIdle {
		p.shrink.Reset(o.opts.WarmPoolIdle - idle) // a take raced the timer
		o.mu.Unlock()
		return
	}
	p.target = o.opts.WarmPool
	out := p.excessLocked(p.target)
	o.mu.Unlock()
	for _, in := range out {
		o.retire(in)
	}
}

// refill starts containers until p holds its target of them (counting
// those starting), at most refillParallel at a time, as far as
// MaxContainers allows.
func (o *OnDemand) refill(p *pool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refillLocked(p)
}

func (o *OnDemand) refillLocked(p *pool) {
	parallel := 1
	if 2*len(p.warm) < p.target {
		parallel = refillParallel
	}
	for !p.closed && p.filling < parallel && len(p.warm)+p.filling < p.target && o.reserveLocked() {
		p.filling++
		o.goBG(func() {
			in, err := o.start(p.ctx, p.key.project, "pool", p.entry, false, nil)
			o.mu.Lock()
			p.filling--
			if err != nil {
				o.count--
				if p.failed != nil {
					// Calls waiting for this pool get the error rather
					// than waiting on for a container that is not coming.
					p.failErr = err
					close(p.failed)
					p.failed = nil
				}
				o.mu.Unlock()
				if p.ctx.Err() == nil {
					o.log.Warn("warming a catalog container", "project", p.key.project, "server", p.entry.Name, "err", err)
				}
				return
			}
			kept := o.keepLocked(p, in)
			if kept {
				o.refillLocked(p) // the next one, if the pool is still short
			}
			o.mu.Unlock()
			if !kept {
				o.retire(in)
			}
		})
	}
}
