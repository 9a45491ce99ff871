package catalog

// ExpireIdle does what the idle timer of project's sessionless caller
// does when it fires.
func ExpireIdle(o *OnDemand, project, caller string) {
	o.mu.Lock()
	so := o.stateless[sessionKey{project, caller}]
	o.mu.Unlock()
	if so != nil {
		o.expire(project, caller, so.key)
	}
}

// ShrinkIdlePools does what each grown pool's idle timer does when it
// fires, now.
func ShrinkIdlePools(o *OnDemand) {
	o.mu.Lock()
	var ps []*pool
	for _, p := range o.pools {
		ps = append(ps, p)
	}
	o.mu.Unlock()
	for _, p := range ps {
		o.shrinkPool(p, true)
	}
}
