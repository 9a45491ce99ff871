// The upstream type and its lifecycle: connect (through the circuit
// breaker), the handshake, loss and reconnect, status and close. The tool
// list is in toollist.go, calls are in call.go.

package upstreams

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/switchboard-mcp/switchboard"
)

// ProtocolVersion is the 2025 MCP version Switchboard asks for in
// initialize, with every upstream that is not spoken to in 2026-07-28
// (see revision.go for which are).
const ProtocolVersion = "2025-06-18"

// upstream is one configured server: its current connection (if any), its
// last known tools, its circuit breaker and its state for status.
type upstream struct {
	spec switchboard.ServerSpec
	m    *Manager
	log  *slog.Logger

	ctx    context.Context // lifetime; cancelled by shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	breaker *gobreaker.CircuitBreaker[conn]
	// openUntil is when the breaker's cooldown ends (Unix nanoseconds),
	// set each time it opens; never earlier than gobreaker's own expiry.
	openUntil atomic.Int64

	mu   sync.Mutex
	conn conn
	// active counts calls in flight, so close can let them finish (each
	// is bounded by its call timeout) before the connection goes; drained
	// is closed when the last one ends while close waits.
	active       int
	drained      chan struct{}
	stderr       func() string // the current connection's stderr tail, if any
	protocol     string        // the revision of the current (or last) connection
	state        switchboard.ServerState
	lastErr      string
	tools        []rawTool
	listed       bool          // tools were listed at least once
	tried        bool          // a connect attempt has ended at least once
	connecting   chan struct{} // closed when the in-flight connect ends
	reconnecting bool          // background reconnect (SSE) under way
	closed       bool
	shadowed     []string
	debounce     *time.Timer
	// feats are its prompts, resources and templates (features.go), with
	// what of them earlier servers shadow; featDebounce re-lists them.
	feats             features
	shadowedPrompts   []string
	shadowedResources []string
	featDebounce      *time.Timer
	// callers are the client requests in flight (peer.go).
	callers map[*caller]struct{}
	// OnState reports not delivered yet, in order, and whether a
	// goroutine is delivering them.
	stateQueue      []switchboard.ServerState
	stateDelivering bool

	progressSeq atomic.Int64
	progress    sync.Map // upstream token string -> *progressSink

	// queue serializes the requests of a hosted server in arrival order
	// (nil for other transports). It belongs to the upstream, not to one
	// connection, so callers waiting while it (re)connects keep their
	// place in line.
	queue *fifo
	// builtin is set for an in-process server (TransportBuiltin).
	builtin Builtin
}

func newUpstream(m *Manager, spec switchboard.ServerSpec) *upstream {
	ctx, cancel := context.WithCancel(context.Background())
	u := &upstream{spec: spec, m: m, ctx: ctx, cancel: cancel, state: switchboard.StateIdle,
		log: m.log.With("server", spec.Name)}
	if spec.Transport == switchboard.TransportHosted {
		u.queue = newFIFO()
	}
	if spec.Err != nil {
		u.setStateLocked(switchboard.StateInvalid)
		u.lastErr = switchboard.Message(spec.Err)
	}
	u.breaker = gobreaker.NewCircuitBreaker[conn](gobreaker.Settings{
		Name:        spec.Name,
		MaxRequests: 1,
		Timeout:     m.opts.BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= m.opts.BreakerFailures },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			if to == gobreaker.StateOpen {
				u.openUntil.Store(time.Now().Add(m.opts.BreakerCooldown).UnixNano())
			}
			u.log.Warn("circuit breaker", "from", from.String(), "to", to.String())
		},
	})
	return u
}

// setStateLocked records a state change and reports it through
// Options.OnState once u.mu is released. u.mu must be held.
func (u *upstream) setStateLocked(st switchboard.ServerState) {
	if u.state == st {
		return
	}
	u.state = st
	fn := u.m.opts.OnState
	if fn == nil {
		return
	}
	// One goroutine at a time drains the queue, so reports arrive in the
	// order the changes happened.
	u.stateQueue = append(u.stateQueue, st)
	if u.stateDelivering {
		return
	}
	u.stateDelivering = true
	name := u.spec.Name
	u.wg.Go(func() {
		for {
			u.mu.Lock()
			if len(u.stateQueue) == 0 {
				u.stateDelivering = false
				u.mu.Unlock()
				return
			}
			next := u.stateQueue[0]
			u.stateQueue = u.stateQueue[1:]
			u.mu.Unlock()
			fn(name, next)
		}
	})
}

// ensure returns a live connection, connecting first if needed. Concurrent
// callers share one connect; each waits only as long as its own ctx allows.
func (u *upstream) ensure(ctx context.Context) (conn, error) {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, u.errRemoved()
		}
		if u.spec.Err != nil {
			u.mu.Unlock()
			return nil, u.spec.Err
		}
		if u.conn != nil {
			select {
			case <-u.conn.done():
				u.lostLocked()
			default:
				c := u.conn
				u.mu.Unlock()
				return c, nil
			}
		}
		if u.reconnecting {
			lastErr := strings.TrimPrefix(u.lastErr, sseLost)
			open := u.breaker.State() == gobreaker.StateOpen
			u.mu.Unlock()
			if open {
				return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q is unavailable: its SSE stream was lost and %d reconnect attempts failed (last: %s); next retry within %s",
					u.spec.Name, u.m.opts.BreakerFailures, lastErr, u.m.opts.BreakerCooldown)
			}
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q is reconnecting after losing its connection; try again shortly", u.spec.Name)
		}
		ch := u.startConnectLocked()
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		u.mu.Lock()
		c, lastErr, state := u.conn, u.lastErr, u.state
		u.mu.Unlock()
		if c == nil {
			kind := switchboard.ErrUnavailable
			if state == switchboard.StateUnavailable {
				return nil, switchboard.Errorf(kind, "server %q is unavailable after %d failed connection attempts (last: %s); next retry within %s",
					u.spec.Name, u.m.opts.BreakerFailures, lastErr, u.m.opts.BreakerCooldown)
			}
			if strings.HasPrefix(lastErr, fmt.Sprintf("server %q", u.spec.Name)) {
				return nil, switchboard.Errorf(kind, "%s", lastErr)
			}
			return nil, switchboard.Errorf(kind, "server %q: %s", u.spec.Name, lastErr)
		}
	}
}

// startConnectLocked starts a connect unless one is in flight and returns
// the channel closed when it ends. u.mu must be held.
func (u *upstream) startConnectLocked() chan struct{} {
	if u.connecting != nil {
		return u.connecting
	}
	ch := make(chan struct{})
	u.connecting = ch
	if u.state != switchboard.StateReady {
		u.setStateLocked(switchboard.StateConnecting)
	}
	u.wg.Go(func() {
		c, err := u.breaker.Execute(func() (conn, error) { return u.connect() })
		u.mu.Lock()
		defer u.mu.Unlock()
		defer close(ch)
		u.connecting = nil
		u.tried = true
		if err == nil && u.closed {
			_ = c.close()
			err = errors.New("server removed")
		}
		if err != nil {
			u.setStateLocked(switchboard.StateFailed)
			if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) || u.breaker.State() == gobreaker.StateOpen {
				u.setStateLocked(switchboard.StateUnavailable)
			}
			if !errors.Is(err, gobreaker.ErrOpenState) && !errors.Is(err, gobreaker.ErrTooManyRequests) {
				u.lastErr = switchboard.Message(err)
				if u.reconnecting {
					u.lastErr = sseLost + u.lastErr
				}
				u.log.Warn("upstream connect failed", "err", err)
			}
			return
		}
		u.conn = c
		u.setStateLocked(switchboard.StateReady)
		u.lastErr = ""
		u.wg.Go(func() { u.watch(c) })
	})
	return ch
}

// connect starts the transport, initializes and lists tools.
func (u *upstream) connect() (conn, error) {
	ctx, cancel := context.WithTimeout(u.ctx, u.m.opts.ConnectTimeout)
	defer cancel()
	var c conn
	switch u.spec.Transport {
	case switchboard.TransportStdio:
		sc, err := startStdio(u.spec, u.m.opts.StopTimeout, u.m.opts.isolation, u.m.opts.lineLimits(), u.onNote, u.log)
		if err != nil {
			return nil, err
		}
		u.mu.Lock()
		u.stderr = sc.stderr.String
		u.mu.Unlock()
		c = sc
	case switchboard.TransportHosted:
		sc, err := u.openStream(ctx)
		if err != nil {
			return nil, err
		}
		u.mu.Lock()
		u.stderr = sc.stderr
		u.mu.Unlock()
		c = sc
	default:
		rc, err := startRemote(u.ctx, ctx, u.spec, u.m.opts.MaxMessageBytes, u.m.opts.HopID, u.onNote, u.log)
		if err != nil {
			// A *url.Error carries the whole URL, whose path or query may
			// hold an interpolated secret: keep only the cause.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: cannot connect: %v", u.spec.Name, err)
		}
		c = rc
	}
	switch c := c.(type) {
	case *stdioConn:
		c.setRequestHandler(u.answerServerRequest)
	case *streamConn:
		c.setRequestHandler(u.answerServerRequest)
	case *remoteConn:
		h := u.serverRequest
		c.requests.Store(&h)
	}
	tools, caps, err := u.handshake(ctx, c)
	if err != nil {
		_ = c.close()
		// The connect timeout first: it is why a process killed at it
		// died ("killed during initialize" said nothing of the 30 s).
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q did not finish initialize within %s (MCP_SERVER_CONNECT_TIMEOUT)", u.spec.Name, u.m.opts.ConnectTimeout)
		}
		if sc, ok := c.(*stdioConn); ok && sc.exitStatus() != "" {
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: process %s during initialize", u.spec.Name, sc.exitStatus())
		}
		msg := switchboard.Message(err)
		if errors.Is(err, errConnLost) {
			msg = err.Error() // "connection lost: <cause>", never a URL
		}
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: initialize failed: %s", u.spec.Name, msg)
	}
	if sc, ok := c.(*streamConn); ok {
		sc.initialized()
	}
	u.mu.Lock()
	u.protocol = revisionOf(c)
	u.mu.Unlock()
	u.log.Debug("upstream connected", "protocol", revisionOf(c))
	feats := u.listFeatures(ctx, c, parseCaps(caps))
	u.m.mu.Lock()
	level := u.m.logLevel
	u.m.mu.Unlock()
	if level != "" && feats.caps.logging {
		if _, err := c.call(ctx, "logging/setLevel", map[string]string{"level": level}); err != nil {
			u.log.Warn("logging/setLevel failed", "err", err)
		}
	}
	if feats.caps.subscribe {
		u.resubscribe(ctx, c)
	}
	u.setTools(tools)
	u.setFeatures(feats)
	return c, nil
}

// openStream opens a hosted server's stream through Options.Streams and
// runs the shared framing over it.
func (u *upstream) openStream(ctx context.Context) (*streamConn, error) {
	if u.m.opts.Streams == nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "server %q: hosted servers are not available in this gateway", u.spec.Name)
	}
	st, err := u.m.opts.Streams.OpenStream(ctx, u.spec)
	if err != nil {
		var de *switchboard.Error
		if errors.As(err, &de) {
			return nil, err
		}
		if ctx.Err() != nil && u.ctx.Err() == nil {
			return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q did not start within %s", u.spec.Name, u.m.opts.ConnectTimeout)
		}
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: cannot open its stream: %s", u.spec.Name, switchboard.Message(err))
	}
	if st == nil {
		return nil, switchboard.Errorf(switchboard.ErrInternal, "server %q: no stream was opened", u.spec.Name)
	}
	return newStreamConn(st, u.m.opts.StopTimeout, u.m.opts.lineLimits(), u.onNote, u.log), nil
}

// handshake settles the connection's revision (see revision.go: discover
// first on streamable HTTP, initialize first elsewhere) and lists the
// tools.
func (u *upstream) handshake(ctx context.Context, c conn) ([]rawTool, json.RawMessage, error) {
	if rc, ok := c.(*remoteConn); ok && u.spec.Transport == switchboard.TransportStreamableHTTP {
		modern, caps, err := rc.discover(ctx, u.m.opts.Version)
		if err != nil {
			return nil, nil, err
		}
		if modern {
			if listChanged(caps) {
				// Before tools/list, so no change after the list is missed.
				if err := rc.listen(ctx, u.listChanged, u.log); err != nil {
					if ctx.Err() != nil {
						return nil, nil, err
					}
					u.log.Warn("upstream refused subscriptions/listen; its tool list is re-read on reconnect only", "err", err)
				}
			}
			tools, err := listTools(ctx, c)
			return tools, caps, err
		}
	}
	caps, err := u.initialize(ctx, c)
	if err != nil {
		// A stdio or hosted server that refuses initialize with a
		// JSON-RPC error may have dropped the 2025 handshake: it is asked
		// server/discover next (it answered, so it is reading).
		var rpc *switchboard.RPCError
		f, ok := c.(interface {
			discover(context.Context, string) bool
		})
		if !ok || !errors.As(err, &rpc) || !f.discover(ctx, u.m.opts.Version) {
			return nil, nil, err
		}
	}
	tools, err := listTools(ctx, c)
	return tools, caps, err
}

// initialize runs the 2025 handshake.
func (u *upstream) initialize(ctx context.Context, c conn) (json.RawMessage, error) {
	res, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    clientCapabilities,
		"clientInfo":      map[string]any{"name": "switchboard", "version": u.m.opts.Version},
	})
	if err != nil {
		return nil, err
	}
	var ir struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(res, &ir); err != nil {
		return nil, fmt.Errorf("initialize result is not an object: %w", err)
	}
	if h, ok := c.(interface{ setLegacy(string) }); ok {
		h.setLegacy(cmp.Or(ir.ProtocolVersion, ProtocolVersion))
	}
	if rc, ok := c.(*remoteConn); ok && ir.ProtocolVersion != "" {
		rc.setProtocolVersion(ir.ProtocolVersion)
	}
	return ir.Capabilities, c.notify(ctx, "notifications/initialized", nil)
}

// lostLocked records that the current connection died. u.mu must be held.
func (u *upstream) lostLocked() {
	c := u.conn
	u.conn = nil
	u.setStateLocked(switchboard.StateFailed)
	msg := "connection lost; it is re-established on next use"
	broken := ""
	if b, ok := c.(interface{ brokenReason() string }); ok {
		broken = b.brokenReason()
	}
	if sc, ok := c.(*stdioConn); ok && broken == "" {
		if st := sc.exitStatus(); st != "" {
			msg = "process " + st + "; it is restarted on next use"
		}
	}
	if broken != "" {
		msg = broken + "; the connection was reset and is re-established on next use"
	}
	u.lastErr = msg
	// Reap the child / release the transport without holding the lock.
	u.wg.Go(func() { _ = c.close() })
	// An SSE stream is re-established in the background, whoever noticed
	// the loss first (the watcher or a failing call); stdio and streamable
	// upstreams reconnect on next use.
	if u.spec.Transport == switchboard.TransportSSE && !u.closed && !u.reconnecting {
		u.reconnecting = true
		u.lastErr = strings.TrimSuffix(sseLost, ": ")
		if broken != "" {
			u.lastErr = sseLost + broken
		}
		u.wg.Go(u.reconnectLoop)
	}
}

// watch notices a lost connection as soon as it happens, so status is
// right and an SSE upstream starts reconnecting in the background.
func (u *upstream) watch(c conn) {
	select {
	case <-u.ctx.Done():
		return
	case <-c.done():
	}
	u.mu.Lock()
	if u.conn != c || u.closed {
		u.mu.Unlock()
		return
	}
	u.lostLocked()
	u.log.Warn("upstream connection lost", "detail", u.lastErr)
	u.mu.Unlock()
}

// sseLost starts the status text of an SSE upstream that is reconnecting.
const sseLost = "SSE stream lost; reconnecting: "

// reconnectLoop re-establishes a lost SSE stream with exponential backoff.
// Calls meanwhile fail at once (ensure checks reconnecting).
//
// Each attempt is a connect through the breaker, so an outage opens it
// like any other run of connect failures. While it is open the loop does
// not poll it on the backoff schedule, which could be late by up to
// ReconnectMax: it waits exactly until the cooldown ends and then makes
// the one half-open attempt. Success closes the breaker; failure opens it
// for another cooldown. An outage thus costs the cooldown, not the
// cooldown plus a backoff step.
func (u *upstream) reconnectLoop() {
	delay := u.m.opts.ReconnectMin
	for {
		wait := delay
		if u.breaker.State() == gobreaker.StateOpen {
			// A hair later than the cooldown's end if it is (nearly) due:
			// gobreaker only half-opens strictly after its expiry.
			wait = max(time.Until(time.Unix(0, u.openUntil.Load())), time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-u.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if u.breaker.State() == gobreaker.StateOpen {
			continue // it would only refuse; wait for the cooldown's end
		}
		u.mu.Lock()
		if u.closed { // removed, draining its calls: nothing to reconnect for
			u.reconnecting = false
			u.mu.Unlock()
			return
		}
		ch := u.startConnectLocked()
		u.mu.Unlock()
		<-ch
		u.mu.Lock()
		ok := u.conn != nil
		if ok || u.closed {
			u.reconnecting = false
			u.mu.Unlock()
			if ok {
				u.log.Info("upstream reconnected")
			}
			return
		}
		u.mu.Unlock()
		delay = min(delay*2, u.m.opts.ReconnectMax)
	}
}

func (u *upstream) onNote(method string, params json.RawMessage) {
	switch method {
	case "notifications/tools/list_changed":
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.closed {
			return // no goroutine may join u.wg once close waits on it
		}
		if u.debounce != nil {
			u.debounce.Stop()
		}
		u.debounce = time.AfterFunc(u.m.opts.ListDebounce, func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			if !u.closed {
				u.wg.Go(u.relist)
			}
		})
	case "notifications/progress":
		var p map[string]json.RawMessage
		if json.Unmarshal(params, &p) != nil {
			return
		}
		var tok string
		if json.Unmarshal(p["progressToken"], &tok) != nil {
			return
		}
		if s, ok := u.progress.Load(tok); ok {
			sink := s.(*progressSink)
			p["progressToken"] = sink.token
			out, _ := json.Marshal(p)
			select {
			case sink.ch <- out:
			default:
			}
		}
	case "notifications/prompts/list_changed", "notifications/resources/list_changed":
		u.featureNote()
	case "notifications/resources/updated":
		u.m.mu.Lock()
		fn := u.m.events.ResourceUpdated
		u.m.mu.Unlock()
		if fn != nil {
			fn(u.spec.Name, params)
		}
	case "notifications/message":
		u.log.Debug("upstream log", "params", string(params))
		u.logMessage(params)
	}
}

// status reports the upstream for status endpoints.
func (u *upstream) status() switchboard.ServerStatus {
	u.mu.Lock()
	st := switchboard.ServerStatus{Name: u.spec.Name, Transport: u.spec.Transport, State: u.state,
		Tools: len(u.tools), LastError: u.lastErr, Shadowed: u.shadowed, Protocol: u.protocol,
		Features: u.featureStatusLocked()}
	if u.state == switchboard.StateFailed && u.breaker.State() == gobreaker.StateOpen {
		st.State = switchboard.StateUnavailable
	}
	stderr := u.stderr
	u.mu.Unlock()
	// Outside the lock: a hosted stream's Stderr may have to ask its
	// container, and calls must not wait on that.
	if stderr != nil {
		st.Stderr = stderr()
	}
	return st
}

func (u *upstream) errRemoved() error {
	return switchboard.Errorf(switchboard.ErrUnavailable, "server %q was removed from the configuration", u.spec.Name)
}

// enter counts a call in flight; it reports false once close has begun.
func (u *upstream) enter() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.active++
	return true
}

func (u *upstream) leave() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.active--
	if u.active == 0 && u.drained != nil {
		close(u.drained)
		u.drained = nil
	}
}

// close stops the upstream for good: new calls fail at once, calls in
// flight may finish until ctx ends, then the connection closes (a child
// gets SIGTERM, and SIGKILL after the stop timeout; calls still in flight
// fail) and close waits for the upstream's goroutines.
func (u *upstream) close(ctx context.Context) {
	u.finishClose(ctx, u.beginClose())
}

// beginClose makes new calls fail at once and returns a channel closed
// when the calls in flight have ended, or nil if there are none.
func (u *upstream) beginClose() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	if u.debounce != nil {
		u.debounce.Stop()
	}
	if u.featDebounce != nil {
		u.featDebounce.Stop()
	}
	if u.active == 0 {
		return nil
	}
	if u.drained == nil {
		u.drained = make(chan struct{})
	}
	return u.drained
}

// finishClose waits for drained (from beginClose) or ctx, then closes the
// connection and waits for the upstream's goroutines.
func (u *upstream) finishClose(ctx context.Context, drained <-chan struct{}) {
	if drained != nil {
		select {
		case <-drained:
		case <-ctx.Done():
			u.log.Warn("closing with calls in flight: they are cut off")
		}
	}
	u.mu.Lock()
	c := u.conn
	u.conn = nil
	u.mu.Unlock()
	u.cancel()
	if c != nil {
		_ = c.close()
	}
	u.wg.Wait()
}
