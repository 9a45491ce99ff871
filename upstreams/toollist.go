// An upstream's tool list: listing every page, the cache the Manager's
// catalog is built from, and re-listing after list_changed. Resources and
// prompts belong here too.

package upstreams

import (
	"context"
	"encoding/json"
	"fmt"
)

// maxToolPages bounds tools/list pagination against a server that hands
// out cursors forever.
const maxToolPages = 1000

type rawTool struct {
	name string
	raw  json.RawMessage
}

// listChanged reports whether server capabilities (raw JSON) promise
// notifications/tools/list_changed.
func listChanged(caps json.RawMessage) bool {
	var c struct {
		Tools *struct {
			ListChanged bool `json:"listChanged"`
		} `json:"tools"`
	}
	return json.Unmarshal(caps, &c) == nil && c.Tools != nil && c.Tools.ListChanged
}

// listChanged is called when the upstream's tools may have changed.
func (u *upstream) listChanged() { u.onNote("notifications/tools/list_changed", nil) }

// listTools fetches every page of tools/list as raw tool objects.
func listTools(ctx context.Context, c conn) ([]rawTool, error) {
	var out []rawTool
	var cursor string
	for range maxToolPages {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		res, err := c.call(ctx, "tools/list", params)
		if err != nil {
			return nil, fmt.Errorf("tools/list: %w", err)
		}
		tools, next, err := parseToolsPage(res)
		if err != nil {
			return nil, err
		}
		out = append(out, tools...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("tools/list returned more than %d pages", maxToolPages)
}

// parseToolsPage reads one tools/list result: each tool's raw object and
// its name, and the next cursor. The name is the exact "name" member (the
// last one, if repeated), as a client's JSON parser reads it: encoding/json
// would also take "NAME" or "Name", and then the gateway would route a
// name no client can see. A tool without a string name is skipped: it
// cannot be called.
func parseToolsPage(res json.RawMessage) ([]rawTool, string, error) {
	var page struct {
		Tools      []json.RawMessage `json:"tools"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(res, &page); err != nil {
		return nil, "", fmt.Errorf("tools/list result is malformed: %w", err)
	}
	var out []rawTool
	for _, raw := range page.Tools {
		var members map[string]json.RawMessage
		var name string
		if json.Unmarshal(raw, &members) != nil || json.Unmarshal(members["name"], &name) != nil || name == "" {
			continue
		}
		out = append(out, rawTool{name: name, raw: raw})
	}
	return out, page.NextCursor, nil
}

func (u *upstream) setTools(tools []rawTool) {
	u.mu.Lock()
	u.tools = tools
	u.listed = true
	u.mu.Unlock()
	u.m.rebuild()
}

func (u *upstream) relist() {
	u.withConn(func(ctx context.Context, c conn) {
		tools, err := listTools(ctx, c)
		if err != nil {
			u.log.Warn("re-listing tools after list_changed failed", "err", err)
			return
		}
		u.log.Info("upstream tools changed", "tools", len(tools))
		u.setTools(tools)
	})
}

// withConn runs fn on u's connection, in turn with calls on a hosted
// server, within the connect timeout; not when u is closing or has no
// connection (the next connect lists anyway).
func (u *upstream) withConn(fn func(ctx context.Context, c conn)) {
	if u.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(u.ctx, u.m.opts.ConnectTimeout)
	defer cancel()
	if u.takeTurn(ctx) != nil {
		return
	}
	defer u.endTurn()
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	if c != nil {
		fn(ctx, c)
	}
}
