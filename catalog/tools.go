package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/switchboard-mcp/switchboard"
)

// CatalogTools are mcp-find, mcp-add and mcp-remove for one project: an
// upstreams.Builtin.
type CatalogTools struct {
	o       *OnDemand
	project string
}

var catalogToolDefs = []json.RawMessage{
	json.RawMessage(`{"name":"mcp-find","title":"Find catalog MCP servers","description":"Search the gateway's catalog of MCP servers that can be added to this session with mcp-add. Matches the query against each server's name, title and description (case-insensitive); an empty query lists every server. Each result says whether the server runs one container for the whole session (long_lived) or a fresh container per tool call, whether this client has added it, and its tools, which can also be called by name without mcp-add.","inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"Words to look for; empty lists all servers."},"limit":{"type":"integer","minimum":1,"maximum":200,"description":"At most this many results (default 50)."}},"additionalProperties":false},"outputSchema":{"type":"object","properties":{"servers":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"title":{"type":"string"},"description":{"type":"string"},"image":{"type":"string"},"long_lived":{"type":"boolean"},"added":{"type":"boolean"}},"required":["name","long_lived","added"]}},"total":{"type":"integer"}},"required":["servers","total"]},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`),
	json.RawMessage(`{"name":"mcp-add","title":"Add a catalog MCP server to this session","description":"Start a catalog MCP server (see mcp-find) for this client and add its tools to its tools/list; the client is sent notifications/tools/list_changed (a 2025 session on its stream, a 2026-07-28 client on its subscriptions/listen streams). Arguments: {\"name\": \"fetch\"}. Works with or without a session: without one, what is added belongs to the token and client identity (clientInfo) of the request and is removed after the catalog's idle time without a call; with one, when the session ends. mcp-remove removes it sooner.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The catalog server's name, as mcp-find lists it."}},"required":["name"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"server":{"type":"string"},"long_lived":{"type":"boolean"},"already_added":{"type":"boolean"},"tools":{"type":"array","items":{"type":"string"}},"shadowed":{"type":"array","items":{"type":"string"}},"message":{"type":"string"}},"required":["server","long_lived","already_added","tools","message"]},"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`),
	json.RawMessage(`{"name":"mcp-remove","title":"Remove a catalog MCP server from this session","description":"Remove a server added with mcp-add from this session: its tools leave this session's tools/list and its container is removed.","inputSchema":{"type":"object","properties":{"name":{"type":"string","description":"The server's name."}},"required":["name"],"additionalProperties":false},"outputSchema":{"type":"object","properties":{"server":{"type":"string"},"removed":{"type":"boolean"},"message":{"type":"string"}},"required":["server","removed","message"]},"annotations":{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":false,"openWorldHint":false}}`),
}

// Tools lists the catalog tools.
func (t *CatalogTools) Tools() []json.RawMessage { return catalogToolDefs }

// FoundServer is one mcp-find result.
type FoundServer struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Image       string `json:"image"`
	LongLived   bool   `json:"long_lived"`
	Added       bool   `json:"added"`
	// Tools are the server's tools: the objects it listed when it was
	// first activated (name, description, inputSchema), or the names the
	// catalog lists ({"name": ...}) before that; call them by name.
	Tools []json.RawMessage `json:"tools,omitempty"`
}

// CallTool runs one catalog tool. Errors are domain errors, mapped by the
// one table (switchboard.RPCCode: ErrInvalid is -32602, ErrResourceLimit
// and ErrConflict -32600, the rest -32603).
func (t *CatalogTools) CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	switch req.Tool {
	case ToolFind:
		var a struct {
			Query *string `json:"query"`
			Limit *int    `json:"limit"`
		}
		if err := strictArgs(req, &a); err != nil {
			return nil, err
		}
		limit := 50
		if a.Limit != nil {
			if *a.Limit < 1 || *a.Limit > 200 {
				return nil, switchboard.Errorf(switchboard.ErrInvalid, "%s: limit must be between 1 and 200", ToolFind)
			}
			limit = *a.Limit
		}
		q := ""
		if a.Query != nil {
			q = strings.ToLower(strings.TrimSpace(*a.Query))
		}
		added := map[string]bool{}
		for _, n := range t.o.Added(t.project, req.Session, req.Caller) {
			added[n] = true
		}
		found := []FoundServer{}
		total := 0
		for _, e := range t.o.cat.Entries {
			if !matches(e, q) {
				continue
			}
			total++
			if len(found) < limit {
				found = append(found, FoundServer{Name: e.Name, Title: e.Title, Description: e.Description, Image: e.Image, LongLived: e.LongLived, Added: added[e.Name], Tools: t.o.toolObjects(e)})
			}
		}
		return switchboard.StructuredResult(map[string]any{"servers": found, "total": total})
	case ToolAdd:
		name, err := nameArg(req)
		if err != nil {
			return nil, err
		}
		// The project's own tools win a name at the edge; asked before
		// any lock, as it may connect the project's servers.
		var taken func(string) bool
		if pc := t.o.opts.ProjectCatalog; pc != nil {
			own := pc(ctx, t.project)
			taken = func(name string) bool {
				_, ok := own.Lookup(name)
				return ok
			}
		}
		ow, done := t.o.owner(t.project, req.Session, req.Caller)
		defer done()
		res, err := t.o.add(ctx, t.project, ow, name, taken, pullNotifier(req))
		if err != nil {
			return nil, err
		}
		return switchboard.StructuredResult(res)
	case ToolRemove:
		name, err := nameArg(req)
		if err != nil {
			return nil, err
		}
		if err := t.o.Remove(ctx, t.project, req.Session, req.Caller, name); err != nil {
			return nil, err
		}
		return switchboard.StructuredResult(map[string]any{"server": name, "removed": true, "message": "removed " + name + " from this session; its container is being removed"})
	}
	return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q", switchboard.Clip(req.Tool))
}

// matches reports whether e matches every word of q.
func matches(e *CatalogEntry, q string) bool {
	if q == "" {
		return true
	}
	hay := strings.ToLower(e.Name + "\n" + e.Title + "\n" + e.Description)
	for _, w := range strings.Fields(q) {
		if !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

// strictArgs decodes a tool's arguments, refusing unknown members.
func strictArgs(req switchboard.CallRequest, v any) error {
	if len(req.Arguments) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(req.Arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return switchboard.Errorf(switchboard.ErrInvalid, "%s: invalid arguments: %s", req.Tool, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func nameArg(req switchboard.CallRequest) (string, error) {
	var a struct {
		Name *string `json:"name"`
	}
	if err := strictArgs(req, &a); err != nil {
		return "", err
	}
	if a.Name == nil || *a.Name == "" {
		return "", switchboard.Errorf(switchboard.ErrInvalid, `%s: "name" (string) is required, such as {"name": "fetch"}; %s lists the servers`, req.Tool, ToolFind)
	}
	return *a.Name, nil
}

// pullNotifier sends the client MCP progress notifications of an image
// pull its call waits for, when it asked for progress (a progressToken):
// one each time the pull's figures change, progress counting up as the
// revision requires, the figures in the message. nil when it did not ask.
func pullNotifier(req switchboard.CallRequest) func(switchboard.PullProgress) {
	token := req.ProgressToken()
	if token == nil {
		return nil
	}
	var mu sync.Mutex
	n, last := 0, ""
	return func(p switchboard.PullProgress) {
		msg := "pulling image " + p.Image + ": " + p.Figures()
		mu.Lock()
		defer mu.Unlock()
		if msg == last {
			return
		}
		n++
		last = msg
		if b, err := json.Marshal(map[string]any{"progressToken": token, "progress": n, "message": msg}); err == nil {
			req.OnProgress(b)
		}
	}
}
