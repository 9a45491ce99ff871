// MCP beyond tools: an upstream's prompts, resources and resource
// templates (listed at connect, every page, re-listed after their
// list_changed), the project-wide view of them (first server wins, as
// for tools), routing of prompts/get, resources/read, resources/subscribe,
// completion/complete, and log levels.

package upstreams

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// rawItem is one listed object (a prompt, a resource or a template) with
// the member that identifies it: name, uri or uriTemplate.
type rawItem struct {
	key string
	raw json.RawMessage
}

// serverCaps are the capabilities of an upstream that matter for routing.
type serverCaps struct {
	prompts, resources, subscribe, completions, logging bool
	raw                                                 json.RawMessage // as the server sent them
}

func parseCaps(raw json.RawMessage) serverCaps {
	var c struct {
		Prompts   json.RawMessage `json:"prompts"`
		Resources *struct {
			Subscribe bool `json:"subscribe"`
		} `json:"resources"`
		Completions json.RawMessage `json:"completions"`
		Logging     json.RawMessage `json:"logging"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return serverCaps{}
	}
	present := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	return serverCaps{raw: raw, prompts: present(c.Prompts), resources: c.Resources != nil,
		subscribe:   c.Resources != nil && c.Resources.Subscribe,
		completions: present(c.Completions), logging: present(c.Logging)}
}

// features is what one upstream offers besides tools.
type features struct {
	caps      serverCaps
	prompts   []rawItem
	resources []rawItem
	templates []rawItem
}

// listPages fetches every page of a list method (prompts/list,
// resources/list, resources/templates/list) as raw objects keyed by their
// idKey member; objects without a string key are skipped.
func listPages(ctx context.Context, c conn, method, arrayKey, idKey string) ([]rawItem, error) {
	var out []rawItem
	var cursor string
	for range maxToolPages {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		res, err := c.call(ctx, method, params)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, fmt.Errorf("%s result is malformed: %w", method, err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(page[arrayKey], &items); err != nil && len(page[arrayKey]) > 0 {
			return nil, fmt.Errorf("%s result is malformed: %w", method, err)
		}
		for _, raw := range items {
			var members map[string]json.RawMessage
			var key string
			if json.Unmarshal(raw, &members) != nil || json.Unmarshal(members[idKey], &key) != nil || key == "" {
				continue
			}
			out = append(out, rawItem{key: key, raw: raw})
		}
		var next string
		_ = json.Unmarshal(page["nextCursor"], &next)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("%s returned more than %d pages", method, maxToolPages)
}

// listFeatures lists what caps promise. A list that fails is left empty
// (and logged): the tools still work.
func (u *upstream) listFeatures(ctx context.Context, c conn, caps serverCaps) features {
	f := features{caps: caps}
	var err error
	if caps.prompts {
		if f.prompts, err = listPages(ctx, c, "prompts/list", "prompts", "name"); err != nil {
			u.log.Warn("listing prompts failed", "err", err)
		}
	}
	if caps.resources {
		if f.resources, err = listPages(ctx, c, "resources/list", "resources", "uri"); err != nil {
			u.log.Warn("listing resources failed", "err", err)
		}
		if f.templates, err = listPages(ctx, c, "resources/templates/list", "resourceTemplates", "uriTemplate"); err != nil {
			u.log.Warn("listing resource templates failed", "err", err)
		}
	}
	return f
}

func (u *upstream) setFeatures(f features) {
	u.mu.Lock()
	u.feats = f
	u.mu.Unlock()
	u.m.rebuildFeatures()
}

// relistFeatures re-reads prompts, resources and templates after the
// upstream said they changed.
func (u *upstream) relistFeatures() {
	u.withConn(func(ctx context.Context, c conn) {
		u.mu.Lock()
		caps := u.feats.caps
		u.mu.Unlock()
		u.setFeatures(u.listFeatures(ctx, c, caps))
	})
}

// featureNote schedules a re-list of prompts and resources, debounced.
func (u *upstream) featureNote() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	if u.featDebounce != nil {
		u.featDebounce.Stop()
	}
	u.featDebounce = time.AfterFunc(u.m.opts.ListDebounce, func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if !u.closed {
			u.wg.Go(u.relistFeatures)
		}
	})
}

// featureEntry is one prompt, resource or template as clients see it.
type featureEntry struct {
	key      string // the name (prefixed) or URI clients use
	upstream string // the key the server knows (prompt name without prefix)
	server   string
	raw      json.RawMessage
	match    *regexp.Regexp // templates: the URIs the template covers
}

// featureCatalog is the project's prompts, resources and templates, in
// server order, each server's in its own order.
type featureCatalog struct {
	prompts, resources, templates []featureEntry
	promptIdx, resourceIdx        map[string]int
	templateIdx                   map[string]int // by uriTemplate
}

func (fc *featureCatalog) samePrompts(o *featureCatalog) bool {
	return sameEntries(fc.prompts, o.prompts)
}

func (fc *featureCatalog) sameResources(o *featureCatalog) bool {
	return sameEntries(fc.resources, o.resources) && sameEntries(fc.templates, o.templates)
}

func sameEntries(a, b []featureEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || a[i].server != b[i].server || !bytes.Equal(a[i].raw, b[i].raw) {
			return false
		}
	}
	return true
}

// Events are what the Manager tells the edge besides tool-list changes.
// Each runs without locks held and must not block.
type Events struct {
	// PromptsChanged and ResourcesChanged: the project's prompt list, or
	// its resource or template list, changed (or may have: a server was
	// added).
	PromptsChanged, ResourcesChanged func()
	// ResourceUpdated: server sent notifications/resources/updated
	// (params raw), for the clients subscribed to its URI.
	ResourceUpdated func(server string, params json.RawMessage)
	// Log: server sent notifications/message (params raw).
	Log func(server string, params json.RawMessage)
}

// OnEvents registers the edge's handlers of Events.
func (m *Manager) OnEvents(e Events) {
	m.mu.Lock()
	m.events = e
	m.mu.Unlock()
}

// rebuildFeatures recomputes the feature catalog and tells the edge what
// changed. Prompts clash like tools (the server's toolPrefix applies to
// its prompt names); resources clash by URI, which is never rewritten:
// the first server in order that lists a URI serves every read of it.
func (m *Manager) rebuildFeatures() {
	m.mu.Lock()
	fc := &featureCatalog{promptIdx: map[string]int{}, resourceIdx: map[string]int{}, templateIdx: map[string]int{}}
	for _, u := range m.order {
		u.mu.Lock()
		f := u.feats
		var shadowedP, shadowedR []string
		for _, p := range f.prompts {
			name := u.spec.ToolPrefix + p.key
			if _, taken := fc.promptIdx[name]; taken {
				shadowedP = append(shadowedP, name)
				continue
			}
			raw := p.raw
			if u.spec.ToolPrefix != "" {
				raw = renamed(raw, name)
			}
			fc.promptIdx[name] = len(fc.prompts)
			fc.prompts = append(fc.prompts, featureEntry{key: name, upstream: p.key, server: u.spec.Name, raw: raw})
		}
		for _, r := range f.resources {
			if _, taken := fc.resourceIdx[r.key]; taken {
				if owner := fc.resources[fc.resourceIdx[r.key]].server; owner != u.spec.Name {
					shadowedR = append(shadowedR, r.key)
				}
				// A server listing one URI twice (two names for one
				// resource) keeps both entries, as it lists them.
				if fc.resources[fc.resourceIdx[r.key]].server != u.spec.Name {
					continue
				}
			} else {
				fc.resourceIdx[r.key] = len(fc.resources)
			}
			fc.resources = append(fc.resources, featureEntry{key: r.key, upstream: r.key, server: u.spec.Name, raw: r.raw})
		}
		for _, t := range f.templates {
			if _, taken := fc.templateIdx[t.key]; !taken {
				fc.templateIdx[t.key] = len(fc.templates)
			}
			fc.templates = append(fc.templates, featureEntry{key: t.key, upstream: t.key, server: u.spec.Name, raw: t.raw, match: templateRegexp(t.key)})
		}
		u.shadowedPrompts, u.shadowedResources = shadowedP, shadowedR
		u.mu.Unlock()
	}
	prev := m.features.Load()
	m.features.Store(fc)
	ev := m.events
	m.mu.Unlock()
	if prev == nil {
		return
	}
	if !fc.samePrompts(prev) && ev.PromptsChanged != nil {
		ev.PromptsChanged()
	}
	if !fc.sameResources(prev) && ev.ResourcesChanged != nil {
		ev.ResourcesChanged()
	}
}

// templateRegexp compiles an RFC 6570 URI template into a pattern of the
// URIs it expands to: a simple {var} stands for one path segment (no
// '/', '?', '#'), any other expression ({+var}, {/var}, {?var}, ...) for
// anything. nil when the template cannot be read.
func templateRegexp(tmpl string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(tmpl))
			break
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			return nil
		}
		b.WriteString(regexp.QuoteMeta(tmpl[:i]))
		expr := tmpl[i+1 : i+j]
		if expr != "" && strings.ContainsRune("+#./;?&", rune(expr[0])) {
			b.WriteString(".*")
		} else {
			b.WriteString("[^/?#]*")
		}
		tmpl = tmpl[i+j+1:]
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// featureStatus is the Features member of u's status.
func (u *upstream) featureStatusLocked() *switchboard.FeatureStatus {
	f := u.feats
	if len(f.prompts)+len(f.resources)+len(f.templates) == 0 {
		return nil
	}
	return &switchboard.FeatureStatus{Prompts: len(f.prompts), Resources: len(f.resources), ResourceTemplates: len(f.templates),
		ShadowedPrompts: u.shadowedPrompts, ShadowedResources: u.shadowedResources}
}

// featureCatalogNow returns the feature catalog after the first connect
// of servers never tried (as Tools does).
func (m *Manager) featureCatalogNow(ctx context.Context) *featureCatalog {
	m.tools(ctx, false)
	if fc := m.features.Load(); fc != nil {
		return fc
	}
	return &featureCatalog{}
}

// Feature serves one client request of req.Method (see
// switchboard.FeatureRequest): lists are the project's, rendered with
// every server's objects byte for byte (a prompt's name changed by
// toolPrefix only), PageSize at a time; the others go to the server that
// owns the prompt, the URI or the template, and its raw result comes
// back. Errors: *switchboard.RPCError from the server unchanged, or
// CodeResourceNotFound, or errors wrapping ErrArgNotFound (an unknown
// prompt, an unknown completion reference), ErrInvalid (params),
// ErrNotFound (a method no server serves), ErrUnavailable, ErrTimeout,
// ErrCanceled.
func (m *Manager) Feature(ctx context.Context, req switchboard.FeatureRequest) (json.RawMessage, error) {
	switch req.Method {
	case "prompts/list":
		return m.listPage(ctx, req.Params, "prompts", func(fc *featureCatalog) []featureEntry { return fc.prompts })
	case "resources/list":
		return m.listPage(ctx, req.Params, "resources", func(fc *featureCatalog) []featureEntry { return fc.resources })
	case "resources/templates/list":
		return m.listPage(ctx, req.Params, "resourceTemplates", func(fc *featureCatalog) []featureEntry { return fc.templates })
	case "prompts/get":
		var p struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(req.Params, &p) != nil || p.Name == "" {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, `params must be an object with "name" (string)`)
		}
		fc := m.featureCatalogNow(ctx)
		i, ok := fc.promptIdx[p.Name]
		if !ok {
			return nil, switchboard.Errorf(switchboard.ErrArgNotFound, "unknown prompt %q; prompts/list shows the prompts available", switchboard.Clip(p.Name))
		}
		e := fc.prompts[i]
		params, err := setMember(req.Params, "name", mustJSON(e.upstream))
		if err != nil {
			return nil, err
		}
		return m.forward(ctx, e.server, req.Method, params, req)
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		var p struct {
			URI string `json:"uri"`
		}
		if json.Unmarshal(req.Params, &p) != nil || p.URI == "" {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, `params must be an object with "uri" (string)`)
		}
		server, ok := m.resourceOwner(ctx, p.URI)
		if !ok {
			data, _ := json.Marshal(map[string]string{"uri": p.URI})
			return nil, &switchboard.RPCError{Code: switchboard.CodeResourceNotFound, Message: "Resource not found: no server of this project offers " + switchboard.Clip(p.URI), Data: data}
		}
		params, err := setMember(req.Params, "", nil)
		if err != nil {
			return nil, err
		}
		res, err := m.forward(ctx, server, req.Method, params, req)
		if err == nil && req.Method != "resources/read" {
			m.mu.Lock()
			if m.subs == nil {
				m.subs = map[string]string{}
			}
			if req.Method == "resources/subscribe" {
				m.subs[p.URI] = server
			} else {
				delete(m.subs, p.URI)
			}
			m.mu.Unlock()
		}
		return res, err
	case "completion/complete":
		var p struct {
			Ref struct {
				Type string `json:"type"`
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"ref"`
		}
		if json.Unmarshal(req.Params, &p) != nil {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, `params must be an object with "ref" and "argument"`)
		}
		fc := m.featureCatalogNow(ctx)
		switch p.Ref.Type {
		case "ref/prompt":
			i, ok := fc.promptIdx[p.Ref.Name]
			if !ok {
				return nil, switchboard.Errorf(switchboard.ErrArgNotFound, "unknown prompt %q in ref", switchboard.Clip(p.Ref.Name))
			}
			e := fc.prompts[i]
			var all map[string]json.RawMessage
			_ = json.Unmarshal(req.Params, &all)
			ref, err := setMember(all["ref"], "name", mustJSON(e.upstream))
			if err != nil {
				return nil, err
			}
			params, err := setMember(req.Params, "ref", ref)
			if err != nil {
				return nil, err
			}
			return m.forward(ctx, e.server, req.Method, params, req)
		case "ref/resource":
			server := ""
			if i, ok := fc.templateIdx[p.Ref.URI]; ok {
				server = fc.templates[i].server
			} else if s, ok := m.resourceOwner(ctx, p.Ref.URI); ok {
				server = s
			}
			if server == "" {
				return nil, switchboard.Errorf(switchboard.ErrArgNotFound, "unknown resource template %q in ref", switchboard.Clip(p.Ref.URI))
			}
			params, err := setMember(req.Params, "", nil)
			if err != nil {
				return nil, err
			}
			return m.forward(ctx, server, req.Method, params, req)
		}
		return nil, switchboard.Errorf(switchboard.ErrInvalid, `ref.type must be "ref/prompt" or "ref/resource"`)
	}
	return nil, switchboard.Errorf(switchboard.ErrNotFound, "method not found: %s", switchboard.Clip(req.Method))
}

// resourceOwner finds the server a URI is read from: the first server
// (in order) that lists it, else the first whose template matches it.
func (m *Manager) resourceOwner(ctx context.Context, uri string) (string, bool) {
	fc := m.featureCatalogNow(ctx)
	if i, ok := fc.resourceIdx[uri]; ok {
		return fc.resources[i].server, true
	}
	for _, t := range fc.templates {
		if t.match != nil && t.match.MatchString(uri) {
			return t.server, true
		}
	}
	return "", false
}

// DefaultPageSize is how many objects one page of a prompts or resources
// list holds towards clients.
const DefaultPageSize = 500

// listPage renders one page of a list: the objects from the cursor's
// offset, and a nextCursor when more follow. A cursor is the offset,
// opaque to clients; one that does not decode is invalid params.
func (m *Manager) listPage(ctx context.Context, params json.RawMessage, key string, pick func(*featureCatalog) []featureEntry) (json.RawMessage, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "params must be an object")
		}
	}
	size := m.opts.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	from := 0
	if p.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "o:"))
		if err != nil || err2 != nil || !strings.HasPrefix(string(b), "o:") || n < 0 {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "invalid cursor")
		}
		from = n
	}
	items := pick(m.featureCatalogNow(ctx))
	from = min(from, len(items))
	to := min(from+size, len(items))
	b := append(make([]byte, 0, 256), `{"`...)
	b = append(b, key...)
	b = append(b, `":[`...)
	for i, e := range items[from:to] {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.raw...)
	}
	b = append(b, ']')
	if to < len(items) {
		b = append(b, `,"nextCursor":`...)
		b = append(b, mustJSON(base64.RawURLEncoding.EncodeToString([]byte("o:"+strconv.Itoa(to))))...)
	}
	return append(b, '}'), nil
}

// setMember returns params (a JSON object) with member key set to value
// and the protocol keys of its _meta dropped (they describe the client's
// hop, not ours). key "" only drops them.
func setMember(params json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(params, &all); err != nil || all == nil {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "params must be a JSON object")
	}
	if key != "" {
		all[key] = value
	}
	if meta, ok := all["_meta"]; ok {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) == nil && mm != nil {
			if dropProtocolMeta(mm) > 0 {
				if len(mm) == 0 {
					delete(all, "_meta")
				} else {
					all["_meta"] = mustJSON(mm)
				}
			}
		}
	}
	return mustJSON(all), nil
}

// forward sends one request to server and returns its raw result,
// connecting it if needed, bounded by its call timeout, with client as
// the peer of requests the server makes meanwhile.
func (m *Manager) forward(ctx context.Context, server, method string, params json.RawMessage, req switchboard.FeatureRequest) (json.RawMessage, error) {
	if req.Routed != nil {
		req.Routed(server)
	}
	m.mu.Lock()
	u := m.byName[server]
	m.mu.Unlock()
	if u == nil {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q was removed from the configuration", server)
	}
	ctx, span := startHop(ctx, u.spec, method)
	res, err := u.request(ctx, method, params, origin{peer: req.Client, session: req.Session, onLog: req.OnLog})
	endHop(span, err)
	return res, err
}

// request is a client's request of method on u (not tools/call).
func (u *upstream) request(ctx context.Context, method string, params json.RawMessage, from origin) (json.RawMessage, error) {
	return u.exchange(ctx, "method", method, method, from, func(conn) any { return params })
}

// Log levels of MCP, from the most verbose.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// LogLevelRank returns level's place in MCP's order (0 debug ... 7
// emergency), -1 for an unknown level.
func LogLevelRank(level string) int {
	for i, l := range logLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// SetLogLevel asks every connected server that offers logging for level
// (logging/setLevel), and servers that connect later at connect. The
// connection is shared, so the edge passes the most verbose level any of
// its clients asked for and filters per client; "" stops asking (servers
// already told keep their level until they reconnect).
func (m *Manager) SetLogLevel(ctx context.Context, level string) {
	m.mu.Lock()
	m.logLevel = level
	order := m.order
	m.mu.Unlock()
	if level == "" {
		return
	}
	for _, u := range order {
		c := u.live()
		u.mu.Lock()
		logging := u.feats.caps.logging
		u.mu.Unlock()
		if c == nil || !logging {
			continue
		}
		u.setLevel(ctx, c, level)
	}
}

// resubscribe subscribes a new connection of u to the URIs clients hold
// there: the server forgot them with the connection it lost (a crash, a
// lost session, a reload that changed it), and clients would hear of no
// update again.
func (u *upstream) resubscribe(ctx context.Context, c conn) {
	u.m.mu.Lock()
	var uris []string
	for uri, server := range u.m.subs {
		if server == u.spec.Name {
			uris = append(uris, uri)
		}
	}
	u.m.mu.Unlock()
	for _, uri := range uris {
		if _, err := c.call(ctx, "resources/subscribe", map[string]string{"uri": uri}); err != nil {
			u.log.Warn("resources/subscribe again after reconnecting failed", "uri", uri, "err", err)
		}
	}
}

func (u *upstream) setLevel(ctx context.Context, c conn, level string) {
	ctx, cancel := context.WithTimeout(ctx, u.m.opts.ConnectTimeout)
	defer cancel()
	if err := u.takeTurn(ctx); err != nil {
		return
	}
	defer u.endTurn()
	if _, err := c.call(ctx, "logging/setLevel", map[string]string{"level": level}); err != nil {
		u.log.Warn("logging/setLevel failed", "err", err)
	}
}
