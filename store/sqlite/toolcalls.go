package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/keyset"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

// InsertToolCalls implements switchboard.ToolCallStore: one transaction
// of multi-row inserts (insertRows records per statement, prepared once
// per row count and reused), skipping records whose record_id is stored.
func (s *Store) InsertToolCalls(ctx context.Context, batch []switchboard.ToolCallRecord) error {
	if err := schema.ValidateBatch(batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	// Prepared before the transaction: it holds the one writer connection.
	full, err := s.inserts.get(ctx, s.w, min(len(batch), insertRows))
	if err != nil {
		return fail("insert tool calls", err)
	}
	last := full
	if r := len(batch) % insertRows; r != 0 && len(batch) > insertRows {
		if last, err = s.inserts.get(ctx, s.w, r); err != nil {
			return fail("insert tool calls", err)
		}
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		args := make([]any, 0, insertCols*min(len(batch), insertRows))
		for chunk := range slices.Chunk(batch, insertRows) {
			st := full
			if len(chunk) < insertRows {
				st = last
			}
			args = args[:0]
			for _, c := range chunk {
				a := "{}"
				if c.Arguments != nil {
					a = string(c.Arguments)
				}
				args = append(args, c.RecordID, c.ProjectID, c.Session, c.Server, c.Tool, a, c.Outcome, c.Code,
					c.Duration.Microseconds(), us(c.StartedAt), c.Kind, c.Principal, c.PrincipalName)
			}
			if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
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

const (
	insertRows = 64 // records per INSERT statement (832 parameters)
	insertCols = 13
)

// insertStmts caches the tool-call INSERT prepared on the writer, one per
// row count (1..insertRows), for the life of the store.
type insertStmts struct {
	mu     sync.Mutex
	byRows map[int]*sql.Stmt
	closed bool
}

func (c *insertStmts) get(ctx context.Context, db *sql.DB, rows int) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.byRows[rows]; st != nil {
		return st, nil
	}
	if c.closed {
		return nil, sql.ErrConnDone
	}
	var q strings.Builder
	q.WriteString(`INSERT INTO kb_agent_run_tool_calls
		(record_id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at, kind, principal, principal_name) VALUES `)
	for i := range rows {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(`(nullif(?, ''), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	}
	q.WriteString(` ON CONFLICT (record_id) DO NOTHING`)
	st, err := db.PrepareContext(ctx, q.String())
	if err != nil {
		return nil, err
	}
	if c.byRows == nil {
		c.byRows = map[int]*sql.Stmt{}
	}
	c.byRows[rows] = st
	return st, nil
}

func (c *insertStmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, st := range c.byRows {
		errs = append(errs, st.Close())
	}
	c.byRows = nil
	return errors.Join(errs...)
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

	q := "SELECT id, project_id, session_id, server, tool, arguments, outcome, code, duration_us, started_at, coalesce(record_id, ''), kind, principal, principal_name FROM kb_agent_run_tool_calls"
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
		err := r.Scan(&c.ID, &c.ProjectID, &c.Session, &c.Server, &c.Tool, &arguments, &c.Outcome, &c.Code, &dur, &started, &c.RecordID, &c.Kind, &c.Principal, &c.PrincipalName)
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
