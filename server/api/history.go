package api

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/jsonscan"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

// toolCallParams are the query parameters of GET tool-calls.
var toolCallParams = []string{"server", "tool", "outcome", "since", "until", "limit", "cursor"}

// toolCallQuery parses the query of GET tool-calls strictly: a malformed
// query, an unknown parameter (a typo such as "limt" would otherwise give a
// default page silently) or a parameter given twice is ErrInvalid.
func toolCallQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "the query string is malformed: separate parameters with '&' and percent-encode values")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(toolCallParams, k):
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "unknown query parameter %q; use %s", switchboard.Clip(k), strings.Join(toolCallParams, ", "))
		case len(q[k]) > 1:
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "query parameter %q is given more than once", k)
		}
	}
	return q, nil
}

func (a *API) listToolCalls(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("project")
	if _, err := a.st.GetProject(r.Context(), p); err != nil {
		return err
	}
	q, err := toolCallQuery(r.URL.RawQuery)
	if err != nil {
		return err
	}
	f := switchboard.ToolCallFilter{ProjectID: p, Server: q.Get("server"), Tool: q.Get("tool"), Outcome: q.Get("outcome"), Cursor: q.Get("cursor")}
	switch f.Outcome {
	case "", switchboard.OutcomeOK, switchboard.OutcomeToolError, switchboard.OutcomeError:
	default:
		return switchboard.Errorf(switchboard.ErrInvalid, "outcome must be ok, tool_error or error")
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return switchboard.Errorf(switchboard.ErrInvalid, "%s must be an RFC 3339 time such as 2026-11-22T10:00:00Z", t.name)
			}
			*t.dst = ts
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > switchboard.MaxToolCallLimit {
			return switchboard.Errorf(switchboard.ErrInvalid, "limit must be an integer from 1 to %d", switchboard.MaxToolCallLimit)
		}
		f.Limit = n
	}
	for _, v := range []string{f.Server, f.Tool, f.Cursor} {
		if err := text("a filter", v); err != nil {
			return err
		}
	}
	page, err := a.st.ListToolCalls(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]apiclient.Call, len(page.Calls))
	for i, c := range page.Calls {
		// Go clients (go-sdk, mcp-go, this CLI) write &, < and > as
		// HTML-safe escapes; the history shows the characters.
		out[i] = apiclient.Call{ID: c.ID, Session: c.Session, Server: c.Server, Tool: c.Tool, Kind: c.Kind, Arguments: jsonscan.UnescapeHTML(c.Arguments),
			Outcome: c.Outcome, Code: c.Code, DurationMS: float64(c.Duration.Microseconds()) / 1000, StartedAt: c.StartedAt}
		if c.Principal != "" {
			iss, sub, _ := strings.Cut(c.Principal, " ")
			out[i].Principal = &apiclient.Principal{Issuer: iss, Subject: sub, Name: c.PrincipalName}
		}
	}
	writeJSON(w, http.StatusOK, apiclient.CallPage{Calls: out, Next: page.Next})
	return nil
}
