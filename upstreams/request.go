package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/switchboard-mcp/switchboard"
)

// server finds a configured or built-in server by name.
func (m *Manager) server(name string) (*upstream, error) {
	m.mu.Lock()
	u := m.serverLocked(name)
	m.mu.Unlock()
	if u == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown server %q", switchboard.Clip(name))
	}
	return u, nil
}

// Connect connects server name now (server/discover or initialize, then
// tools/list) unless
// it is connected already, waiting for a connect another caller started.
// It is bounded by ctx and by the connect timeout, and goes through the
// server's circuit breaker like any first use. Errors wrap ErrNotFound (no
// such server), ErrConfig (misconfigured), ErrUnavailable (the connect
// failed, or the breaker is open), ErrTimeout or ErrCanceled (ctx ended).
func (m *Manager) Connect(ctx context.Context, name string) error {
	u, err := m.server(name)
	if err != nil {
		return err
	}
	if _, err := u.ensure(ctx); err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return switchboard.Errorf(switchboard.ErrTimeout, "server %q: not connected before the deadline", name)
		case errors.Is(err, context.Canceled):
			return switchboard.Errorf(switchboard.ErrCanceled, "connecting server %q cancelled", name)
		}
		return err
	}
	return nil
}

// Capabilities returns the capabilities server name announced in its
// initialize result, as it sent them; nil while it is not connected (or
// there is no such server).
func (m *Manager) Capabilities(name string) json.RawMessage {
	u, err := m.server(name)
	if err != nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.conn == nil {
		return nil
	}
	return u.feats.caps.raw
}

// Request sends any JSON-RPC request (method, with params: a JSON object,
// or nil for none) through server name's current connection and returns
// the raw result. It never connects: a server that is not connected gets
// ErrUnavailable, so a heartbeat cannot restart a server stopped for
// idleness; call Connect first to connect on purpose. On a hosted server
// it waits its turn like a call. It is bounded by ctx and by the server's
// call timeout. A JSON-RPC error from the server comes back as
// *switchboard.RPCError; other errors wrap ErrNotFound (no such server),
// ErrInvalid (params not JSON), ErrUnavailable, ErrTimeout or ErrCanceled.
// It is for the hosted /call admin endpoint and the idle ping heartbeat:
// client tool calls go through Call.
func (m *Manager) Request(ctx context.Context, name, method string, params json.RawMessage) (json.RawMessage, error) {
	u, err := m.server(name)
	if err != nil {
		return nil, err
	}
	var p any
	if len(bytes.TrimSpace(params)) > 0 {
		// Compact: a newline must never reach a stdio frame.
		var buf bytes.Buffer
		if err := json.Compact(&buf, params); err != nil {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "params are not valid JSON")
		}
		p = json.RawMessage(buf.Bytes())
	}
	timeout := u.callTimeout()
	if u.builtin != nil {
		timeout = 0 // a builtin bounds its own work
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if !u.enter() {
		return nil, u.errRemoved()
	}
	defer u.leave()
	if err := u.takeTurn(ctx); err != nil {
		return nil, u.callErr(ctx, "method", method, timeout, err)
	}
	defer u.endTurn()
	c := u.live()
	if c == nil {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q is not connected", u.spec.Name)
	}
	res, err := c.call(ctx, method, p)
	if errors.Is(err, errSessionLost) {
		// As for calls: the request never ran; re-initialize and send it
		// once more.
		if c, err = u.ensure(ctx); err == nil {
			res, err = c.call(ctx, method, p)
		}
	}
	if err != nil {
		return nil, u.callErr(ctx, "method", method, timeout, err)
	}
	return res, nil
}

// live returns the upstream's connection if it has a live one.
func (u *upstream) live() conn {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.conn == nil {
		return nil
	}
	select {
	case <-u.conn.done():
		return nil // the watcher records the loss
	default:
		return u.conn
	}
}

// Busy reports whether a call or request is in flight on server name
// (waiting for its turn included). It is false for unknown servers.
func (m *Manager) Busy(name string) bool {
	m.mu.Lock()
	u := m.serverLocked(name)
	m.mu.Unlock()
	if u == nil {
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.active > 0
}
