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
// A client session owns what it activated until it ends; a client
// without a session (2026-07-28, a plain POST) activates for its
// project's stateless owner, which keeps the activation until
// OnDemandOptions.IdleTimeout passes without a call, then removes its
// containers (a per-call server's warm pool, a long-lived one's
// container). Which server offers a tool is known from the catalog's
// `tools:` lists and from what each server listed when first activated.

// statelessOwner is the owner key of a project's sessionless callers: a
// new generation each time the previous one expired, as an ended
// session's key is never reused.
type statelessOwner struct {
	key   string
	timer *time.Timer
}

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

// owner is who an activation without mcp-add belongs to: the session,
// or the project's current stateless owner (its idle timer reset).
func (o *OnDemand) owner(project, session string) string {
	if session != "" {
		return session
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	so := o.stateless[project]
	if so == nil {
		o.statelessGen++
		so = &statelessOwner{key: fmt.Sprintf("stateless-%d", o.statelessGen)}
		o.stateless[project] = so
		key := so.key
		so.timer = time.AfterFunc(o.opts.IdleTimeout, func() { o.expire(project, key) })
		return so.key
	}
	so.timer.Reset(o.opts.IdleTimeout)
	return so.key
}

// expire ends project's stateless owner key: what it activated is
// removed, and the next sessionless call starts a new generation.
func (o *OnDemand) expire(project, key string) {
	o.mu.Lock()
	if cur := o.stateless[project]; cur != nil && cur.key == key {
		cur.timer.Stop()
		delete(o.stateless, project)
	}
	o.mu.Unlock()
	o.SessionEnded(project, key)
}

// CallCatalogTool calls tool req.Tool of the catalog server that offers
// it, activating that server for the caller first when it is not yet
// (per-call: a fresh container for this call, from the warm pool when
// one is ready; long-lived: started once and kept). Errors: ErrNotFound
// (no catalog server offers the tool), and those of mcp-add and of the
// call.
func (t *SessionTools) CallCatalogTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	o := t.o
	e := o.EntryForTool(req.Tool)
	if e == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; tools/list shows the tools available, and mcp-find the catalog's", switchboard.Clip(req.Tool))
	}
	owner := o.owner(t.project, req.Session)
	var taken func(string) bool
	if pc := o.opts.ProjectCatalog; pc != nil {
		own := pc(ctx, t.project)
		taken = func(name string) bool {
			_, ok := own.Lookup(name)
			return ok
		}
	}
	if _, err := o.add(ctx, t.project, owner, e.Name, taken, pullNotifier(req)); err != nil {
		return nil, err
	}
	// This server's activation, whatever else the owner added that may
	// offer a tool of the same name.
	var act *activation
	o.mu.Lock()
	if st := o.sessions[sessionKey{t.project, owner}]; st != nil {
		for _, a := range st.acts {
			if a.entry == e {
				act = a
			}
		}
	}
	o.mu.Unlock()
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
