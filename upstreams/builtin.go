package upstreams

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard"
)

// Builtin is a server that lives inside the gateway (the sandbox tools):
// listed and called like an upstream, but in-process. Builtins rank AFTER
// every configured server for name collisions: a configured server's tool
// of the same name wins, and the builtin's is reported shadowed in status.
type Builtin interface {
	// Tools returns raw tool objects, as tools/list returns them. The
	// Manager reads it when the builtin is set (SetBuiltin again to
	// re-read it); a tool without a string "name" is skipped.
	Tools() []json.RawMessage
	// CallTool runs one tool. req.Tool is the builtin's own tool name;
	// req.Project and req.Session are the caller's (see CallRequest). It
	// returns the raw tools/call result. An *switchboard.RPCError passes to
	// the client unchanged (code, message, data); other errors map as
	// upstream errors do (a *switchboard.Error keeps its kind and message,
	// anything else reads "server <name>: unavailable"). The gateway's
	// call timeout does not apply: a builtin bounds its own work, and
	// returns when ctx ends (the client cancelled or went away).
	CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error)
}

// builtinConn is the "connection" of a builtin: requests are answered in
// process. It serves tools/call (without session or progress: the
// Manager's Call reaches the builtin directly), tools/list and ping, for
// Request.
type builtinConn struct {
	name string
	b    Builtin
}

func (c builtinConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	switch method {
	case "ping":
		return json.RawMessage(`{}`), nil
	case "tools/list":
		return renderToolList(c.b.Tools()), nil
	case "tools/call":
		raw, _ := params.(json.RawMessage)
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Meta      json.RawMessage `json:"_meta"`
		}
		if err := json.Unmarshal(raw, &p); err != nil || p.Name == "" {
			return nil, &switchboard.RPCError{Code: switchboard.CodeInvalidParams, Message: `params must be an object with "name" (string) and optional "arguments" (object)`}
		}
		return c.b.CallTool(ctx, switchboard.CallRequest{Tool: p.Name, Arguments: p.Arguments, Meta: p.Meta})
	}
	return nil, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound, Message: "built-in server " + c.name + " does not offer " + method}
}

func (builtinConn) notify(context.Context, string, any) error { return nil }
func (builtinConn) done() <-chan struct{}                     { return nil } // never lost
func (builtinConn) close() error                              { return nil }

func renderToolList(tools []json.RawMessage) json.RawMessage {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(t)
	}
	b.WriteString("]}")
	return json.RawMessage(b.String())
}

// newBuiltin returns the upstream of builtin b, ready: its tools read,
// its "connection" in place.
func newBuiltin(m *Manager, name string, b Builtin) *upstream {
	u := newUpstream(m, switchboard.ServerSpec{Name: name, Transport: switchboard.TransportBuiltin})
	tools, _, err := parseToolsPage(renderToolList(b.Tools()))
	if err != nil {
		u.log.Warn("built-in server listed tools that are not JSON objects; ignoring them", "err", err)
	}
	u.mu.Lock()
	u.builtin = b
	u.conn = builtinConn{name: name, b: b}
	u.tools = tools
	u.listed = true
	u.setStateLocked(switchboard.StateReady)
	u.mu.Unlock()
	return u
}

// SetBuiltin sets (or, with b == nil, removes) the built-in server name.
// Setting a name again replaces the previous builtin and re-reads its
// Tools(). Clients get notifications/tools/list_changed when the catalog
// changes. A builtin is ranked after every configured server (builtins in
// name order); a configured server of the same name hides the builtin
// entirely (its status says so). Calls in flight on a replaced builtin
// finish; the new one serves calls from now on. SetBuiltin after Close
// does nothing.
func (m *Manager) SetBuiltin(name string, b Builtin) {
	var u *upstream
	if b != nil {
		u = newBuiltin(m, name, b) // Tools() is called without our locks
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		if u != nil {
			u.close(m.cutOffCtx)
		}
		return
	}
	prev := m.builtins[name]
	if u == nil {
		delete(m.builtins, name)
	} else {
		m.builtins[name] = u
	}
	if prev != nil {
		drained := prev.beginClose()
		m.stopping.Go(func() { prev.finishClose(m.cutOffCtx, drained) })
	}
	m.mu.Unlock()
	m.rebuild()
}

// rankedLocked returns every upstream in ranking order: configured servers
// in configured order, then builtins by name. m.mu must be held.
func (m *Manager) rankedLocked() []*upstream {
	out := make([]*upstream, 0, len(m.order)+len(m.builtins))
	out = append(out, m.order...)
	names := make([]string, 0, len(m.builtins))
	for n := range m.builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		out = append(out, m.builtins[n])
	}
	return out
}

// serverLocked finds server name: a configured one first, then a builtin
// (a builtin whose name a configured server has is hidden). m.mu must be
// held.
func (m *Manager) serverLocked(name string) *upstream {
	if u := m.byName[name]; u != nil {
		return u
	}
	return m.builtins[name]
}

// callBuiltin runs a tools/call on a builtin, carrying the request.
func (u *upstream) callBuiltin(ctx context.Context, tool string, req switchboard.CallRequest) (json.RawMessage, error) {
	if !u.enter() {
		return nil, u.errRemoved()
	}
	defer u.leave()
	req.Tool = tool
	res, err := u.builtin.CallTool(ctx, req)
	if err != nil {
		return nil, u.callErr(ctx, "tool", tool, 0, err)
	}
	if res == nil {
		res = json.RawMessage(`{"content":[]}`)
	}
	return res, nil
}
