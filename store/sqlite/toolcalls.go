package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/keyset"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

// InsertToolCalls implements switchboard.ToolCallStore: one transaction,
// one prepared statement, skipping records whose record_id is stored.
func (s *Store) InsertToolCalls(ctx context.Context, batch []switchboard.ToolCallRecord) error {
	if err := schema.ValidateBatch(batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO kb_agent_run_tool_calls
			(record_id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at)
			VALUES (nullif(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (record_id) DO NOTHING`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, c := range batch {
			args := "{}"
			if c.Arguments != nil {
				args = string(c.Arguments)
			}
			if _, err := st.ExecContext(ctx, c.RecordID, c.ProjectID, c.Session, c.Server, c.Tool, args, c.Outcome, c.Code,
				c.Duration.Microseconds(), us(c.StartedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fail("insert tool calls", err)
	}
	return nil
}

// ListToolCalls implements switchboard.ToolCallStore.
func (s *Store) ListToolCalls(ctx context.Context, f switchboard.ToolCallFilter) (switchboard.ToolCallPage, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{
		{"project_id", f.ProjectID}, {"server", f.Server}, {"tool", f.Tool}, {"outcome", f.Outcome},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if !f.Since.IsZero() {
		where = append(where, "started_at >= ?")
		args = append(args, us(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "started_at < ?")
		args = append(args, us(f.Until))
	}
	if f.Cursor != "" {
		c, err := keyset.Parse(f.Cursor)
		if err != nil {
			return switchboard.ToolCallPage{}, err
		}
		where = append(where, "(started_at, id) < (?, ?)")
		args = append(args, us(c.At), c.ID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = switchboard.DefaultToolCallLimit
	}
	limit = min(limit, switchboard.MaxToolCallLimit)

	q := "SELECT id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at, coalesce(record_id, '') FROM kb_agent_run_tool_calls"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY started_at DESC, id DESC LIMIT ?"
	args = append(args, limit+1) // one more tells whether a next page exists

	rows, err := s.r.QueryContext(ctx, q, args...)
	calls, err := collect(rows, err, func(r scanner) (switchboard.ToolCallRecord, error) {
		var c switchboard.ToolCallRecord
		var arguments string
		var dur, started int64
		err := r.Scan(&c.ID, &c.ProjectID, &c.Session, &c.Server, &c.Tool, &arguments, &c.Outcome, &c.Code, &dur, &started, &c.RecordID)
		c.Arguments = []byte(arguments)
		c.Duration = time.Duration(dur) * time.Microsecond
		c.StartedAt = fromUS(started)
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
