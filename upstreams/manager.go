package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Options tune a Manager. Zero values take the documented defaults; tests
// shorten the timings.
type Options struct {
	Version        string
	CallTimeout    time.Duration // default 30s
	ConnectTimeout time.Duration // default 30s
	// ListWait bounds how long a listing (Tools) waits for servers' first
	// connects: what is ready by then is listed, the rest is added (and
	// list_changed sent) as each arrives; default 5s. Calls wait for their
	// server up to ConnectTimeout.
	ListWait        time.Duration
	StopTimeout     time.Duration // SIGTERM -> SIGKILL for stdio children; default 5s
	BreakerFailures uint32        // consecutive connect failures that open the breaker; default 3
	BreakerCooldown time.Duration // default 60s
	ListDebounce    time.Duration // upstream list_changed debounce; default 200ms
	// PageSize is how many prompts, resources or templates one page of
	// their lists holds towards clients; default DefaultPageSize.
	PageSize int
	// MaxMessageBytes bounds one message from a server on every transport
	// (a stdio or hosted line, an HTTP body, an SSE event); default
	// DefaultMaxMessageBytes. A larger one resets that connection and the
	// caller is told the limit.
	MaxMessageBytes int64
	// StallTimeout ends a stdio or hosted connection whose server has
	// sent more than stallBytes of one line (1 MiB, or half of
	// MaxMessageBytes if smaller) without finishing it within this time:
	// status then says the stream is broken, long before a slow endless
	// line reaches MaxMessageBytes; default 5s.
	StallTimeout time.Duration
	// HopID, when set, is sent in switchboard.HopHeader on every request
	// to a remote server, so a gateway that is its own upstream notices.
	HopID        string
	ReconnectMin time.Duration // SSE reconnect backoff start; default 250ms
	ReconnectMax time.Duration // SSE reconnect backoff cap; default 30s
	Logger       *slog.Logger
	// OnState, when set, is called after every change of a server's state
	// (without locks held), for metrics and for tests that wait on a state.
	OnState func(server string, state switchboard.ServerState)
	// Streams opens the streams of hosted servers (Transport ==
	// switchboard.TransportHosted). Without it such servers fail to
	// connect with ErrConfig.
	Streams StreamOpener

	// isolation of stdio children: probed once per process unless a test
	// sets it.
	isolation isolation
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.CallTimeout, 30*time.Second)
	def(&o.ConnectTimeout, 30*time.Second)
	def(&o.ListWait, 5*time.Second)
	def(&o.StopTimeout, 5*time.Second)
	def(&o.StallTimeout, 5*time.Second)
	def(&o.BreakerCooldown, 60*time.Second)
	def(&o.ReconnectMin, 250*time.Millisecond)
	def(&o.ReconnectMax, 30*time.Second)
	if o.ListDebounce < 0 {
		o.ListDebounce = 0
	} else if o.ListDebounce == 0 {
		o.ListDebounce = 200 * time.Millisecond
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.BreakerFailures == 0 {
		o.BreakerFailures = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.isolation == isolationProbe {
		o.isolation = processIsolation(o.Logger)
	}
}

// Manager owns a project's upstreams: it connects each lazily on first
// need, shares one connection among all client sessions, keeps every tool
// list in memory and routes calls by tool name.
//
// Collision policy: servers are ranked in configured order and the first
// one to offer a name owns it; later servers' tools with that name are
// reported as shadowed in status and logs. A per-server toolPrefix avoids
// the collision.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	order    []*upstream
	byName   map[string]*upstream
	builtins map[string]*upstream // in-process servers, ranked after order
	onChange func()
	// events, features, logLevel and subs serve MCP beyond tools
	// (features.go).
	events   Events
	features atomic.Pointer[featureCatalog]
	logLevel string
	subs     map[string]string // subscribed URI -> the server subscribed
	applied  bool              // Apply ran before: what it adds is news to clients
	version  uint64
	catalog  atomic.Pointer[switchboard.Catalog]
	// collisions is the set of shadowed tools last logged ("tool\x00server"
	// -> owner), under mu: a collision is logged when it appears, not at
	// every rebuild (each store sync rebuilds).
	collisions map[string]string
	closeOnce  sync.Once
	closed     bool // set by Close, under mu: Apply starts nothing after it

	// stopping counts upstreams being closed: servers a reload removed or
	// replaced, draining their calls in flight in the background, and on
	// Close every other one. Added to under mu while !closed, so Close's
	// Wait sees them all.
	stopping sync.WaitGroup
	// cutOff ends, when Close's ctx does, the wait for calls in flight.
	cutOffCtx context.Context
	cutOff    context.CancelFunc
}

// New returns a Manager with no servers; call Apply to configure it.
func New(opts Options) *Manager {
	opts.defaults()
	m := &Manager{opts: opts, log: opts.Logger, byName: map[string]*upstream{}, builtins: map[string]*upstream{}}
	m.cutOffCtx, m.cutOff = context.WithCancel(context.Background())
	m.catalog.Store(switchboard.NewCatalog(0, nil))
	return m
}

// OnToolsChanged registers fn, called (without locks held) after the tool
// catalog changed: a server connected, re-listed or was removed.
func (m *Manager) OnToolsChanged(fn func()) {
	m.mu.Lock()
	m.onChange = fn
	m.mu.Unlock()
}

// Apply makes specs the configured set. Servers whose spec is unchanged
// keep their connection. A changed server's replacement connects before
// the old connection closes when the old one was in use. Removed and
// replaced servers close once the new set is in place: those with no
// calls in flight before Apply returns (children reaped), those with
// calls in flight in the background once the calls finish (each bounded
// by its call timeout), so a reload never waits on a slow call; Close
// waits for them. Nothing connects that was not connected before:
// connections stay lazy.
func (m *Manager) Apply(ctx context.Context, specs []switchboard.ServerSpec) {
	m.mu.Lock()
	old, closed := m.byName, m.closed
	m.mu.Unlock()
	if closed {
		return // nothing may start after Close
	}

	next := make([]*upstream, 0, len(specs))
	nextBy := make(map[string]*upstream, len(specs))
	var started []*upstream
	for _, s := range specs {
		if prev, ok := old[s.Name]; ok && prev.spec.Fingerprint() == s.Fingerprint() {
			next = append(next, prev)
			nextBy[s.Name] = prev
			continue
		}
		u := newUpstream(m, s)
		next = append(next, u)
		nextBy[s.Name] = u
		if prev, ok := old[s.Name]; ok && prev.wasUsed() && s.Err == nil {
			started = append(started, u)
		}
	}
	// Start replacements of servers that were in use before switching, so
	// their tools do not disappear from clients during the reload.
	var wg sync.WaitGroup
	for _, u := range started {
		wg.Go(func() {
			u.mu.Lock()
			ch := u.startConnectLocked()
			u.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
			}
		})
	}
	wg.Wait()

	m.mu.Lock()
	if m.closed {
		// Close ran while replacements connected: they are nobody's.
		m.mu.Unlock()
		for name, u := range nextBy {
			if old[name] != u {
				u.close(m.cutOffCtx)
			}
		}
		return
	}
	m.order, m.byName = next, nextBy
	var idle []chan struct{}
	for name, prev := range old {
		if nextBy[name] == prev {
			continue
		}
		drained := prev.beginClose()
		done := make(chan struct{})
		m.stopping.Go(func() {
			defer close(done)
			prev.finishClose(m.cutOffCtx, drained)
		})
		if drained == nil {
			idle = append(idle, done)
		}
	}
	fn, ev, reload := m.onChange, m.events, m.applied
	m.applied = true
	m.mu.Unlock()
	notified := m.rebuild()
	m.rebuildFeatures()
	if reload && added(old, nextBy) {
		// A new server connects lazily, so nothing it offers is known
		// yet and no list changed; a client must still hear that what it
		// can call changed. Listing connects it.
		if fn != nil && !notified {
			fn()
		}
		if ev.PromptsChanged != nil {
			ev.PromptsChanged()
		}
		if ev.ResourcesChanged != nil {
			ev.ResourcesChanged()
		}
	}
	for _, done := range idle {
		<-done // bounded by the stop timeout: there is no call to wait for
	}
}

// added reports whether next holds a server old did not.
func added(old, next map[string]*upstream) bool {
	for name, u := range next {
		if _, ok := old[name]; !ok && u.spec.Err == nil {
			return true
		}
	}
	return false
}

func (u *upstream) wasUsed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.listed || u.conn != nil
}

// rebuild recomputes the catalog from every upstream's last known tools
// and notifies when it differs, reporting whether it did.
func (m *Manager) rebuild() bool {
	m.mu.Lock()
	seen := map[string]string{}
	collisions := map[string]string{}
	var tools []switchboard.Tool
	for _, u := range m.rankedLocked() {
		u.mu.Lock()
		var shadowed []string
		if u.builtin != nil {
			u.lastErr = ""
			if _, hidden := m.byName[u.spec.Name]; hidden {
				// Calls route by server name: the configured one owns it.
				u.lastErr = fmt.Sprintf("hidden: a configured server is also named %q; its tools are not offered", u.spec.Name)
				for _, t := range u.tools {
					shadowed = append(shadowed, t.name)
				}
				u.shadowed = shadowed
				u.mu.Unlock()
				continue
			}
		}
		for _, t := range u.tools {
			tool, owner := catalogEntry(seen, u.spec.Name, u.spec.ToolPrefix, t)
			if owner != "" {
				shadowed = append(shadowed, tool.Name)
				key := tool.Name + "\x00" + u.spec.Name
				collisions[key] = owner
				if m.collisions[key] != owner {
					m.log.Warn("tool name collision: first configured server wins (built-in servers rank last)", "tool", tool.Name, "owner", owner, "shadowed", u.spec.Name)
				}
				continue
			}
			tools = append(tools, tool)
		}
		u.shadowed = shadowed
		u.mu.Unlock()
	}
	m.collisions = collisions
	prev := m.catalog.Load()
	if sameTools(prev.Tools, tools) {
		m.mu.Unlock()
		return false
	}
	m.version++
	m.catalog.Store(switchboard.NewCatalog(m.version, tools))
	fn := m.onChange
	m.mu.Unlock()
	if fn != nil {
		fn()
	}
	return true
}

// catalogEntry is how server's listed tool t appears to clients: named
// with the server's prefix, its object renamed to match. seen maps the
// names taken so far to their servers; when an earlier server already
// owns the name, owner is that server and the tool is shadowed (only
// tool.Name is set).
func catalogEntry(seen map[string]string, server, prefix string, t rawTool) (tool switchboard.Tool, owner string) {
	name := prefix + t.name
	if owner, taken := seen[name]; taken {
		return switchboard.Tool{Name: name}, owner
	}
	seen[name] = server
	raw := t.raw
	if prefix != "" {
		raw = renamed(raw, name)
	}
	return switchboard.Tool{Name: name, Server: server, UpstreamName: t.name, Raw: raw}, ""
}

func sameTools(a, b []switchboard.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Server != b[i].Server || string(a[i].Raw) != string(b[i].Raw) {
			return false
		}
	}
	return true
}

// renamed returns a tool object with its name replaced and every other
// byte unchanged (member order, escapes, number spellings), by splicing the
// new value over each top-level "name" member. Input that is not an object
// comes back as is.
func renamed(raw json.RawMessage, name string) json.RawMessage {
	if !json.Valid(raw) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return raw
	}
	type span struct{ from, to int64 }
	var names []span
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return raw
		}
		from := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return raw
		}
		if tok == "name" {
			names = append(names, span{from, dec.InputOffset()})
		}
	}
	value := append([]byte(":"), mustJSON(name)...)
	if len(names) == 0 {
		// Listed tools always have a name; be total anyway.
		open := bytes.IndexByte(raw, '{') + 1
		out := append([]byte{}, raw[:open]...)
		out = append(append(append(out, `"name"`...), value...), ',')
		if rest := bytes.TrimSpace(raw[open:]); len(rest) > 0 && rest[0] == '}' {
			out = out[:len(out)-1]
		}
		return append(out, raw[open:]...)
	}
	out := make([]byte, 0, len(raw)+len(name))
	prev := int64(0)
	for _, n := range names {
		out = append(out, raw[prev:n.from]...)
		out = append(out, value...)
		prev = n.to
	}
	return append(out, raw[prev:]...)
}

// Catalog returns the current tools without connecting anything.
func (m *Manager) Catalog() *switchboard.Catalog { return m.catalog.Load() }

// Tools returns the catalog after making sure every server has been tried
// once: on first need, servers never tried connect (concurrently) and Tools
// waits for that first attempt, bounded by ctx and by ListWait (a server
// still connecting then is listed when it arrives, with list_changed, and
// Status says it is connecting, so one slow server does not hold every
// client's first list for the connect timeout). It never waits on a
// reconnect or a retry, whoever started it: servers that failed and never
// listed tools are retried in the background (their breaker permitting),
// and the catalog holds what is connected (and the last known tools of a
// server that is reconnecting); Status says which servers are unavailable.
// So a tools/list waits on a known-bad server once, not once per retry.
func (m *Manager) Tools(ctx context.Context) *switchboard.Catalog { return m.tools(ctx, false) }

// tools is Tools; for a call (Lookup of a tool not known yet) it also
// waits on a connect under way or due (a retry, a restarted hosted
// server): the call needs its server, where a listing only shows what
// there is.
func (m *Manager) tools(ctx context.Context, forCall bool) *switchboard.Catalog {
	// Connects end by themselves at the connect timeout; the grace only
	// guards against a transport that ignores it. A listing waits at most
	// ListWait.
	wait := m.opts.ConnectTimeout + 2*time.Second
	if !forCall {
		wait = min(wait, m.opts.ListWait)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m.mu.Lock()
	order := m.order
	m.mu.Unlock()
	var waits []chan struct{}
	for _, u := range order {
		u.mu.Lock()
		switch {
		case u.closed || u.spec.Err != nil || u.conn != nil || u.reconnecting:
		case !u.tried, forCall && (u.state == switchboard.StateIdle || u.connecting != nil):
			// The first attempt, starting now or already under way
			// (another list, a call, a reload's replacement); for a call,
			// any attempt.
			waits = append(waits, u.startConnectLocked())
		case !u.listed:
			u.startConnectLocked()
		}
		u.mu.Unlock()
	}
	for _, ch := range waits {
		select {
		case <-ch:
		case <-ctx.Done():
			return m.catalog.Load()
		}
	}
	return m.catalog.Load()
}

// Lookup finds a tool, trying first connections if it is not known yet.
// It returns false for a name no server offers.
func (m *Manager) Lookup(ctx context.Context, name string) (switchboard.Tool, bool) {
	if t, ok := m.catalog.Load().Lookup(name); ok {
		return t, true
	}
	return m.tools(ctx, true).Lookup(name)
}

// Call calls the tool clients know as req.Tool with the client's raw
// arguments and _meta. Progress notifications for the call are passed to
// req.OnProgress (may be nil) with the client's own progress token. A
// builtin's tool gets req itself (Tool set to its own name), session and
// project included. It returns the upstream's raw result, an upstream
// *switchboard.RPCError unchanged, or an error wrapping ErrNotFound (no
// such tool), ErrUnavailable (server down or breaker open), ErrTimeout,
// ErrCanceled or ErrConfig.
func (m *Manager) Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	t, ok := m.Lookup(ctx, req.Tool)
	if !ok {
		if down := m.unlisted(); len(down) > 0 {
			// It may be one of theirs: say so rather than only "unknown".
			return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q: no server offers it now, and %s never listed tools (see the project's status for why); tools/list shows the tools available", switchboard.Clip(req.Tool), strings.Join(down, ", "))
		}
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; tools/list shows the tools available", switchboard.Clip(req.Tool))
	}
	m.mu.Lock()
	u := m.serverLocked(t.Server)
	m.mu.Unlock()
	if u == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q; its server was removed", req.Tool)
	}
	ctx, span := startHop(ctx, u.spec, t.UpstreamName)
	var res json.RawMessage
	var err error
	if u.builtin != nil {
		res, err = u.callBuiltin(ctx, t.UpstreamName, req)
	} else {
		res, err = u.callTool(ctx, t.UpstreamName, req.Arguments, req.Meta, req.OnProgress, origin{peer: req.Client, session: req.Session, onLog: req.OnLog})
	}
	endHop(span, err)
	return res, err
}

// LastError is server's last error, "" when it has none or there is no
// such server: the one field of Status a caller watching states needs,
// without what Status also gathers (a hosted server's stderr asks its
// container).
func (m *Manager) LastError(server string) string {
	m.mu.Lock()
	u := m.serverLocked(server)
	m.mu.Unlock()
	if u == nil {
		return ""
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lastErr
}

// unlisted names the servers that never listed tools because they could
// not start ("server \"x\" (failed)"), whose tools a call may have meant.
func (m *Manager) unlisted() []string {
	m.mu.Lock()
	order := m.rankedLocked()
	m.mu.Unlock()
	var out []string
	for _, u := range order {
		u.mu.Lock()
		if !u.listed && u.builtin == nil && u.state != switchboard.StateIdle && u.state != switchboard.StateReady {
			out = append(out, fmt.Sprintf("server %q (%s)", u.spec.Name, u.state))
		}
		u.mu.Unlock()
	}
	return out
}

// Status reports every configured server in configured order, then the
// built-in servers by name.
func (m *Manager) Status() []switchboard.ServerStatus {
	m.mu.Lock()
	order := m.rankedLocked()
	m.mu.Unlock()
	out := make([]switchboard.ServerStatus, 0, len(order))
	for _, u := range order {
		out = append(out, u.status())
	}
	return out
}

// Close stops every upstream, including those a reload removed that are
// still draining. Calls in flight may finish until ctx ends; then they
// are cut off. Children get SIGTERM, then SIGKILL after the stop timeout,
// and Close returns once every one is reaped, even after ctx ended (at
// most the stop timeout later): no child outlives it. It returns ctx.Err()
// when ctx ended first.
func (m *Manager) Close(ctx context.Context) error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		order := m.rankedLocked()
		m.order, m.byName, m.builtins = nil, map[string]*upstream{}, map[string]*upstream{}
		m.version++
		m.catalog.Store(switchboard.NewCatalog(m.version, nil))
		m.features.Store(&featureCatalog{})
		for _, u := range order {
			m.stopping.Go(func() { u.close(m.cutOffCtx) })
		}
		m.mu.Unlock()
		stop := context.AfterFunc(ctx, m.cutOff)
		m.stopping.Wait()
		stop()
		m.cutOff()
	})
	return ctx.Err()
}
