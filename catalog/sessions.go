package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard"
)

// SessionTools are the tools each client session of one project added
// with mcp-add (server.SessionTools).
type SessionTools struct {
	o       *OnDemand
	project string
}

// SessionCatalog returns the own tools of session, a client session or a
// sessionless caller (CallRequest.Caller), nil when it added none.
func (t *SessionTools) SessionCatalog(session string) *switchboard.Catalog {
	o := t.o
	if o.owning.Load() == 0 {
		return nil
	}
	o.mu.Lock()
	st := o.sessions[sessionKey{t.project, session}]
	if st == nil {
		st = o.stateLocked(t.project, "", session)
	}
	o.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.catalog.Load()
}

// CallSessionTool calls a tool of a server the caller (req.Session, or
// req.Caller without one) added: through its long-lived container, or in
// a fresh container removed after the call.
func (t *SessionTools) CallSessionTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	o := t.o
	ow, done := o.owner(t.project, req.Session, req.Caller)
	defer done()
	o.mu.Lock()
	st := o.sessions[sessionKey{t.project, ow.key}]
	var act *activation
	var tool switchboard.Tool
	if st != nil {
		if c := st.catalog.Load(); c != nil {
			tool, _ = c.Lookup(req.Tool)
		}
		for _, a := range st.acts {
			if a.entry.Name == tool.Server {
				act = a
			}
		}
	}
	o.mu.Unlock()
	if act == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; tools/list shows the tools available", switchboard.Clip(req.Tool))
	}
	req.Tool = tool.UpstreamName
	return o.callOn(ctx, act, req)
}

// callOn calls req.Tool (the server's own name for it) on activation
// act: its long-lived container, or a fresh one removed after the call.
func (o *OnDemand) callOn(ctx context.Context, act *activation, req switchboard.CallRequest) (json.RawMessage, error) {
	if act.inst != nil {
		return act.inst.mgr.Call(ctx, req)
	}
	in, err := o.take(ctx, act.pool, pullNotifier(req))
	if err != nil {
		return nil, err
	}
	in.used = true
	defer o.retire(in) // one call per container
	return in.mgr.Call(ctx, req)
}

// session returns the state of a live client session, made on first use;
// a session that ended (or a closed service) gets ErrCanceled.
func (o *OnDemand) session(project, session string) (*sessionState, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "the gateway is shutting down")
	}
	k := sessionKey{project, session}
	if o.ended[k] {
		return nil, switchboard.Errorf(switchboard.ErrCanceled, "the client session ended")
	}
	st := o.sessions[k]
	if st == nil {
		st = &sessionState{}
		o.sessions[k] = st
	}
	return st, nil
}

// AddResult is what mcp-add reports.
type AddResult struct {
	Server    string   `json:"server"`
	LongLived bool     `json:"long_lived"`
	Already   bool     `json:"already_added"`
	Tools     []string `json:"tools"`
	// Shadowed are tools of the server that the session already has
	// under the same name (the project's, or an earlier server's): they
	// are not reachable.
	Shadowed []string `json:"shadowed,omitempty"`
	Message  string   `json:"message"`
}

// Add activates catalog server name for a client session of project (""
// for the sessionless caller ""): starts its container (long-lived) or its
// warm pool (per-call), lists its tools and makes them the session's.
// taken reports names the session already sees (the project's tools); it
// is called without locks. Errors: ErrInvalid (no such server),
// ErrResourceLimit, ErrConfig (no engine, image missing, secret missing),
// ErrUnavailable (the server did not start), ErrCanceled (the session
// ended, or ctx while another activation of name waited).
func (o *OnDemand) Add(ctx context.Context, project, session, name string, taken func(string) bool) (AddResult, error) {
	ow, done := o.owner(project, session, "")
	defer done()
	return o.add(ctx, project, ow, name, taken, nil)
}

// add is Add for owner ow, telling onPull (when set) how a pull of the
// image goes.
func (o *OnDemand) add(ctx context.Context, project string, ow ownerRef, name string, taken func(string) bool, onPull func(switchboard.PullProgress)) (AddResult, error) {
	session := ow.key
	e := o.cat.Entry(name)
	if e == nil {
		return AddResult{}, switchboard.Errorf(switchboard.ErrInvalid, "no catalog server named %q; %s lists them", switchboard.Clip(name), ToolFind)
	}
	st, err := o.session(project, session)
	if err != nil {
		return AddResult{}, err
	}
	unlock, err := o.lockEntry(ctx, st, e.Name)
	if err != nil {
		return AddResult{}, err
	}
	defer unlock()
	res := AddResult{Server: e.Name, LongLived: e.LongLived}
	o.mu.Lock()
	var dead *activation
	for _, a := range st.acts {
		if a.entry != e {
			continue
		}
		if a.inst == nil || a.inst.alive() {
			o.mu.Unlock()
			res.Already = true
			res.Tools = toolNames(a.tools)
			res.Message = fmt.Sprintf("%s was already added to this session", e.Name)
			return res, nil
		}
		dead = a // a long-lived one whose container exited: replaced
	}
	if dead != nil {
		st.acts = slices.DeleteFunc(st.acts, func(a *activation) bool { return a == dead })
		if len(st.acts) == 0 {
			o.owning.Add(-1)
		}
		o.rebuildLocked(st, nil, nil)
	}
	o.mu.Unlock()
	if dead != nil {
		o.discard(dead.inst, false) // its place is the new container's
	}

	act := &activation{entry: e}
	if e.LongLived {
		ok, evicted := dead != nil, (*instance)(nil)
		if !ok {
			o.mu.Lock()
			ok, evicted = o.reserveEvictLocked()
			o.mu.Unlock()
		}
		if evicted != nil {
			o.discard(evicted, false)
		}
		if !ok {
			return res, o.errFull()
		}
		in, err := o.start(ctx, project, session, e, true, onPull)
		if err != nil {
			o.unreserve()
			return res, err
		}
		o.mu.Lock()
		o.long++
		o.mu.Unlock()
		act.inst = in
		act.tools = in.mgr.Catalog().Tools
	} else {
		o.mu.Lock()
		p := o.acquireLocked(project, e)
		tools := p.tools
		o.mu.Unlock()
		if tools == nil {
			// A fresh container lists the tools; no call ran on it, so it
			// goes back to the pool as a warm one before the pool is
			// topped up (which would otherwise start one too many).
			in, err := o.get(ctx, p, false, onPull)
			if err != nil {
				o.mu.Lock()
				dead := o.releaseLocked(p)
				o.mu.Unlock()
				for _, in := range dead {
					o.retire(in)
				}
				return res, err
			}
			tools = in.mgr.Catalog().Tools
			o.mu.Lock()
			p.tools = tools
			kept := o.keepLocked(p, in)
			o.mu.Unlock()
			if !kept {
				o.retire(in)
			}
		}
		o.refill(p)
		act.pool = p
		act.tools = tools
	}
	o.mu.Lock()
	o.learnLocked(e, act.tools)
	o.mu.Unlock()

	o.mu.Lock()
	if st.ended || o.closed {
		// The session ended (or the gateway is stopping) while the server
		// started: it is nobody's.
		gone := o.detachLocked(act)
		o.mu.Unlock()
		for _, in := range gone {
			o.retire(in)
		}
		return res, switchboard.Errorf(switchboard.ErrCanceled, "the session ended while %s started", e.Name)
	}
	if len(st.acts) == 0 {
		o.owning.Add(1)
	}
	st.acts = append(st.acts, act)
	res.Shadowed = o.rebuildLocked(st, act, taken)
	o.mu.Unlock()
	res.Tools = toolNames(act.tools)
	res.Message = fmt.Sprintf("added %s to this session: %d tool(s)", e.Name, len(act.tools))
	if len(res.Tools) > 0 {
		res.Message += " (" + strings.Join(res.Tools, ", ") + ")"
	}
	if e.LongLived {
		res.Message += "; one container serves them until the session ends or " + ToolRemove
	} else {
		res.Message += "; each call runs in a fresh container"
	}
	o.notify(project, ow.notify)
	return res, nil
}

// notify tells whom (a session or a sessionless caller) that its tools
// changed.
func (o *OnDemand) notify(project, whom string) {
	if whom != "" {
		o.opts.Notify(project, whom)
	}
}

// lockEntry serializes the mcp-add and mcp-remove of server name for one
// owner; other servers' go on. The wait ends with ctx (ErrCanceled).
func (o *OnDemand) lockEntry(ctx context.Context, st *sessionState, name string) (unlock func(), err error) {
	o.mu.Lock()
	if st.ops == nil {
		st.ops = map[string]chan struct{}{}
	}
	op := st.ops[name]
	if op == nil {
		op = make(chan struct{}, 1)
		st.ops[name] = op
	}
	o.mu.Unlock()
	select {
	case op <- struct{}{}:
		return func() { <-op }, nil
	case <-ctx.Done():
		return nil, switchboard.Errorf(switchboard.ErrCanceled, "the call ended while it waited for another activation of catalog server %q", name)
	}
}

// rebuildLocked renders st's catalog from its activations in the order
// they were added (first wins a name) and returns the tools of act that
// another tool shadows: an earlier server's, or one taken reports (the
// project's, which win at the edge).
func (o *OnDemand) rebuildLocked(st *sessionState, act *activation, taken func(string) bool) []string {
	var tools []switchboard.Tool
	seen := map[string]bool{}
	var shadowed []string
	for _, a := range st.acts {
		for _, t := range a.tools {
			if a == act && (seen[t.Name] || (taken != nil && taken(t.Name))) {
				shadowed = append(shadowed, t.Name)
			}
			if seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			tools = append(tools, switchboard.Tool{Name: t.Name, Server: a.entry.Name, UpstreamName: t.UpstreamName, Raw: t.Raw})
		}
	}
	st.version++
	if len(st.acts) == 0 {
		st.catalog.Store(nil)
	} else {
		st.catalog.Store(switchboard.NewCatalog(st.version, tools))
	}
	return shadowed
}

// Remove deactivates catalog server name for a client session (or, with
// session "", for the sessionless caller caller): its container
// (long-lived) is removed, and its tools leave the session. Errors:
// ErrInvalid (server not added), ErrCanceled (ctx ended while an
// activation of name was under way).
func (o *OnDemand) Remove(ctx context.Context, project, session, caller, name string) error {
	o.mu.Lock()
	st := o.stateLocked(project, session, caller)
	o.mu.Unlock()
	if st == nil {
		if session == "" {
			return switchboard.Errorf(switchboard.ErrInvalid, "%q is not added for this caller (this token and client, without a session)", switchboard.Clip(name))
		}
		return switchboard.Errorf(switchboard.ErrInvalid, "%q is not added to this session", switchboard.Clip(name))
	}
	unlock, err := o.lockEntry(ctx, st, name)
	if err != nil {
		return err
	}
	defer unlock()
	o.mu.Lock()
	var gone *activation
	st.acts = slices.DeleteFunc(st.acts, func(a *activation) bool {
		if a.entry.Name == name {
			gone = a
			return true
		}
		return false
	})
	if gone == nil {
		o.mu.Unlock()
		return switchboard.Errorf(switchboard.ErrInvalid, "%q is not added to this session", switchboard.Clip(name))
	}
	if len(st.acts) == 0 {
		o.owning.Add(-1)
	}
	o.rebuildLocked(st, nil, nil)
	dead := o.detachLocked(gone)
	o.mu.Unlock()
	for _, in := range dead {
		o.retire(in)
	}
	if session == "" {
		o.notify(project, caller)
	} else {
		o.notify(project, session)
	}
	return nil
}

// Added lists the servers a session (or, with session "", the sessionless
// caller caller) added, in order.
func (o *OnDemand) Added(project, session, caller string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := o.stateLocked(project, session, caller)
	if st == nil {
		return nil
	}
	var out []string
	for _, a := range st.acts {
		out = append(out, a.entry.Name)
	}
	return out
}

func toolNames(tools []switchboard.Tool) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}
