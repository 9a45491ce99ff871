package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Calling a catalog tool by its name, without mcp-add: the server that
// offers it is activated for the caller as mcp-add would, then called.
// A client session owns what it activated until it ends; a caller
// without a session (2026-07-28, a plain POST) is named by the edge
// (CallRequest.Caller: its token and client identity), and what it
// activates is kept until OnDemandOptions.IdleTimeout passes without a
// call, then its containers are removed (a per-call server's warm pool, a
// long-lived one's container). Which server offers a tool is known from
// the catalog's `tools:` lists and from what each server listed when first
// activated.

// statelessOwner is the owner key of one sessionless caller's
// activations: a new generation each time the previous one expired, as an
// ended session's key is never reused.
type statelessOwner struct {
	key   string
	timer *time.Timer // stopped while busy
	busy  int         // calls under way: the idle time starts when the last ends
}

// ownerRef is who an activation belongs to: key names its sessionState,
// notify whom Notify tells of changes (the session, or the sessionless
// caller; "" for nobody).
type ownerRef struct{ key, notify string }

// EntryForTool returns the catalog server that offers tool name, nil when
// none is known to.
func (o *OnDemand) EntryForTool(name string) *CatalogEntry {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.toolIndex[name]
}

// learnLocked records the tools an activated server listed, so later
// calls of them by name find it.
func (o *OnDemand) learnLocked(e *CatalogEntry, tools []switchboard.Tool) {
	for _, t := range tools {
		if _, ok := o.toolIndex[t.UpstreamName]; !ok {
			o.toolIndex[t.UpstreamName] = e
		}
	}
	if o.learned[e.Name] == nil && len(tools) > 0 {
		o.learned[e.Name] = tools
	}
}

// owner is who a request's activations belong to: its session, or the
// current owner key of its sessionless caller. A sessionless caller's idle
// time is stopped until done is called (at the end of the request), so
// nothing it activated is removed under a running call.
func (o *OnDemand) owner(project, session, caller string) (ow ownerRef, done func()) {
	if session != "" {
		return ownerRef{session, session}, func() {}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := sessionKey{project, caller}
	so := o.stateless[k]
	// A timer that fired already (Stop is false) is ending its key: the
	// call gets a new one rather than a key about to end.
	if so == nil || (so.busy == 0 && !so.timer.Stop()) {
		o.statelessGen++
		so = &statelessOwner{key: fmt.Sprintf("stateless-%d", o.statelessGen)}
		o.stateless[k] = so
		key := so.key
		so.timer = time.AfterFunc(o.opts.IdleTimeout, func() { o.expire(project, caller, key) })
		so.timer.Stop()
	}
	so.busy++
	return ownerRef{so.key, caller}, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if so.busy--; so.busy == 0 && o.stateless[k] == so {
			so.timer.Reset(o.opts.IdleTimeout)
		}
	}
}

// stateLocked returns the state of a session or a sessionless caller,
// nil when it has activated nothing; it starts no timer.
func (o *OnDemand) stateLocked(project, session, caller string) *sessionState {
	if session == "" {
		so := o.stateless[sessionKey{project, caller}]
		if so == nil {
			return nil
		}
		session = so.key
	}
	return o.sessions[sessionKey{project, session}]
}

// expire ends key, an owner key of project's sessionless caller: what it
// activated is removed (the caller's listen streams are told), and its
// next call starts a new generation.
func (o *OnDemand) expire(project, caller, key string) {
	o.mu.Lock()
	k := sessionKey{project, caller}
	if cur := o.stateless[k]; cur != nil && cur.key == key {
		cur.timer.Stop()
		delete(o.stateless, k)
	}
	st := o.sessions[sessionKey{project, key}]
	had := st != nil && len(st.acts) > 0
	o.mu.Unlock()
	o.SessionEnded(project, key)
	if had && caller != "" {
		o.opts.Notify(project, caller)
	}
}

// activation returns owner's activation of e (a long-lived one only while
// its container runs), nil when there is none.
func (o *OnDemand) activation(project, owner string, e *CatalogEntry) *activation {
	o.mu.Lock()
	defer o.mu.Unlock()
	if st := o.sessions[sessionKey{project, owner}]; st != nil {
		for _, a := range st.acts {
			if a.entry == e && (a.inst == nil || a.inst.alive()) {
				return a
			}
		}
	}
	return nil
}

// CallCatalogTool calls tool req.Tool of the catalog server that offers
// it, activating that server for the caller first when it is not yet
// (per-call: a fresh container for this call, from the warm pool when
// one is ready; long-lived: started once and kept). A call of a server
// the caller has active takes no lock: it does not wait for the caller's
// activation of another server. Errors: ErrNotFound (no catalog server
// offers the tool), and those of mcp-add and of the call.
func (t *SessionTools) CallCatalogTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	o := t.o
	e := o.EntryForTool(req.Tool)
	if e == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; tools/list shows the tools available, and mcp-find the catalog's", switchboard.Clip(req.Tool))
	}
	ow, done := o.owner(t.project, req.Session, req.Caller)
	defer done()
	if act := o.activation(t.project, ow.key, e); act != nil {
		return o.callOn(ctx, act, req)
	}
	var taken func(string) bool
	if pc := o.opts.ProjectCatalog; pc != nil {
		own := pc(ctx, t.project)
		taken = func(name string) bool {
			_, ok := own.Lookup(name)
			return ok
		}
	}
	if _, err := o.add(ctx, t.project, ow, e.Name, taken, pullNotifier(req)); err != nil {
		return nil, err
	}
	// This server's activation, whatever else the owner added that may
	// offer a tool of the same name.
	act := o.activation(t.project, ow.key, e)
	if act == nil {
		return nil, switchboard.Errorf(switchboard.ErrCanceled, "catalog server %q was removed before the call of %s ran", e.Name, switchboard.Clip(req.Tool))
	}
	return o.callOn(ctx, act, req)
}

// ProvidesTool reports whether a catalog server is known to offer tool
// name (the edge's check before calling it by name).
func (t *SessionTools) ProvidesTool(name string) bool { return t.o.EntryForTool(name) != nil }

// toolObjects are e's tools as mcp-find shows them (FoundServer.Tools).
func (o *OnDemand) toolObjects(e *CatalogEntry) []json.RawMessage {
	o.mu.Lock()
	tools := o.learned[e.Name]
	o.mu.Unlock()
	var out []json.RawMessage
	for _, t := range tools {
		out = append(out, t.Raw)
	}
	if out != nil {
		return out
	}
	for _, n := range e.Tools {
		b, _ := json.Marshal(map[string]string{"name": n})
		out = append(out, b)
	}
	return out
}
