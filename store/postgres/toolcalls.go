package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/keyset"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

// InsertToolCalls implements switchboard.ToolCallStore with one INSERT
// of the batch as arrays: one statement, so atomic, and unlike COPY it can
// skip records whose record_id is stored already.
func (s *Store) InsertToolCalls(ctx context.Context, batch []switchboard.ToolCallRecord) error {
	if err := schema.ValidateBatch(batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	n := len(batch)
	recordIDs, projects, sessions, servers, tools := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	arguments, outcomes, codes := make([]string, n), make([]string, n), make([]int64, n)
	durations, started, kinds := make([]int64, n), make([]time.Time, n), make([]string, n)
	principals, names := make([]string, n), make([]string, n)
	for i, c := range batch {
		recordIDs[i], projects[i], sessions[i], servers[i], tools[i] = c.RecordID, c.ProjectID, c.Session, c.Server, c.Tool
		arguments[i], outcomes[i], codes[i] = string(object(c.Arguments)), c.Outcome, int64(c.Code)
		durations[i], started[i], kinds[i] = c.Duration.Microseconds(), ts(c.StartedAt), c.Kind
		principals[i], names[i] = c.Principal, c.PrincipalName
	}
	// unnest yields the rows in batch order, so ids grow with it.
	_, err := s.pool.Exec(ctx, `INSERT INTO kb.agent_run_tool_calls
			(record_id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at, kind, principal, principal_name)
		SELECT nullif(r, ''), p, se, sv, t, a::json, o, c, d, st, k, pr, pn
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int[], $9::bigint[], $10::timestamptz[], $11::text[], $12::text[], $13::text[])
			AS u(r, p, se, sv, t, a, o, c, d, st, k, pr, pn)
		ON CONFLICT (record_id) DO NOTHING`,
		recordIDs, projects, sessions, servers, tools, arguments, outcomes, codes, durations, started, kinds, principals, names)
	if err != nil {
		return fail("insert tool calls", err)
	}
	return nil
}

// ListToolCalls implements switchboard.ToolCallStore.
func (s *Store) ListToolCalls(ctx context.Context, f switchboard.ToolCallFilter) (switchboard.ToolCallPage, error) {
	var where []string
	var args []any
	cond := func(format string, v ...any) {
		ph := make([]any, len(v))
		for i := range v {
			args = append(args, v[i])
			ph[i] = fmt.Sprintf("$%d", len(args))
		}
		where = append(where, fmt.Sprintf(format, ph...))
	}
	for _, c := range []struct{ col, val string }{
		{"project_id", f.ProjectID}, {"server", f.Server}, {"tool", f.Tool}, {"outcome", f.Outcome},
	} {
		if c.val != "" {
			cond(c.col+" = %s", c.val)
		}
	}
	if !f.Since.IsZero() {
		cond("started_at >= %s", ts(f.Since))
	}
	if !f.Until.IsZero() {
		cond("started_at < %s", ts(f.Until))
	}
	if f.Cursor != "" {
		c, err := keyset.Parse(f.Cursor)
		if err != nil {
			return switchboard.ToolCallPage{}, err
		}
		cond("(started_at, id) < (%s, %s)", c.At, c.ID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = switchboard.DefaultToolCallLimit
	}
	limit = min(limit, switchboard.MaxToolCallLimit)

	q := "SELECT id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at, coalesce(record_id, ''), kind, principal, principal_name FROM kb.agent_run_tool_calls"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1) // one more tells whether a next page exists
	q += fmt.Sprintf(" ORDER BY started_at DESC, id DESC LIMIT $%d", len(args))

	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return switchboard.ToolCallPage{}, fail("list tool calls", err)
	}
	calls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.ToolCallRecord, error) {
		var c switchboard.ToolCallRecord
		var us int64
		err := r.Scan(&c.ID, &c.ProjectID, &c.Session, &c.Server, &c.Tool, &c.Arguments, &c.Outcome, &c.Code, &us, &c.StartedAt, &c.RecordID, &c.Kind, &c.Principal, &c.PrincipalName)
		c.Duration = time.Duration(us) * time.Microsecond
		c.StartedAt = c.StartedAt.UTC()
		return c, err
	})
	if err != nil {
		return switchboard.ToolCallPage{}, fail("list tool calls", err)
	}
	page := switchboard.ToolCallPage{Calls: calls}
	if len(calls) > limit {
		page.Calls = calls[:limit]
		last := page.Calls[limit-1]
		page.Next = keyset.Cursor{At: last.StartedAt, ID: last.ID}.String()
	}
	return page, nil
}
