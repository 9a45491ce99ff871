package catalog

// ExpireIdle does what the idle timer of project's sessionless callers
// does when it fires.
func ExpireIdle(o *OnDemand, project string) {
	o.mu.Lock()
	so := o.stateless[project]
	o.mu.Unlock()
	if so != nil {
		o.expire(project, so.key)
	}
}
