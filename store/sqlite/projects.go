package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const projectCols = "id, description, sandbox_enabled, created_at, updated_at"

// scanner is what *sql.Row and *sql.Rows have in common.
type scanner interface{ Scan(dest ...any) error }

func scanProject(row scanner) (switchboard.Project, error) {
	var p switchboard.Project
	var created, updated int64
	var sandbox sql.NullBool
	err := row.Scan(&p.ID, &p.Description, &sandbox, &created, &updated)
	p.CreatedAt, p.UpdatedAt = fromUS(created), fromUS(updated)
	if sandbox.Valid {
		p.Sandbox = &sandbox.Bool
	}
	return p, err
}

// collect scans every row with scan.
func collect[T any](rows *sql.Rows, err error, scan func(scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// CreateProject implements switchboard.ProjectStore.
func (s *Store) CreateProject(ctx context.Context, p switchboard.Project) (switchboard.Project, error) {
	if err := p.Validate(); err != nil {
		return switchboard.Project{}, err
	}
	t := us(schema.Now())
	// Tool-call records of an earlier project of this id that arrived
	// after its deletion (a batch in flight, a spool replayed) go with
	// the creation, in one transaction: a failed create purges nothing.
	var out switchboard.Project
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM kb_agent_run_tool_calls WHERE project_id = ?", p.ID); err != nil {
			return err
		}
		var err error
		out, err = scanProject(tx.QueryRowContext(ctx,
			"INSERT INTO kb_projects ("+projectCols+") VALUES (?, ?, ?, ?, ?) RETURNING "+projectCols,
			p.ID, p.Description, nullBool(p.Sandbox), t, t))
		return err
	})
	if isCode(err, sqliteUnique) || isCode(err, sqlitePrimaryKey) {
		return switchboard.Project{}, schema.ProjectExists(p.ID)
	}
	if err != nil {
		return switchboard.Project{}, fail("create project", err)
	}
	return out, nil
}

// GetProject implements switchboard.ProjectStore.
func (s *Store) GetProject(ctx context.Context, id string) (switchboard.Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx, "SELECT "+projectCols+" FROM kb_projects WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(id)
	}
	if err != nil {
		return switchboard.Project{}, fail("get project", err)
	}
	return p, nil
}

// ListProjects implements switchboard.ProjectStore.
func (s *Store) ListProjects(ctx context.Context) ([]switchboard.Project, error) {
	rows, err := s.r.QueryContext(ctx, "SELECT "+projectCols+" FROM kb_projects ORDER BY id")
	out, err := collect(rows, err, scanProject)
	if err != nil {
		return nil, fail("list projects", err)
	}
	return out, nil
}

// UpdateProject implements switchboard.ProjectStore.
func (s *Store) UpdateProject(ctx context.Context, p switchboard.Project) (switchboard.Project, error) {
	if err := p.Validate(); err != nil {
		return switchboard.Project{}, err
	}
	out, err := scanProject(s.w.QueryRowContext(ctx,
		"UPDATE kb_projects SET description = ?, updated_at = ? WHERE id = ? RETURNING "+projectCols,
		p.Description, us(schema.Now()), p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(p.ID)
	}
	if err != nil {
		return switchboard.Project{}, fail("update project", err)
	}
	return out, nil
}

// SetProjectSandbox implements switchboard.ProjectStore.
func (s *Store) SetProjectSandbox(ctx context.Context, id string, on *bool) (switchboard.Project, error) {
	out, err := scanProject(s.w.QueryRowContext(ctx,
		"UPDATE kb_projects SET sandbox_enabled = ?, updated_at = ? WHERE id = ? RETURNING "+projectCols,
		nullBool(on), us(schema.Now()), id))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(id)
	}
	if err != nil {
		return switchboard.Project{}, fail("set project sandbox", err)
	}
	return out, nil
}

func nullBool(b *bool) sql.NullBool {
	if b == nil {
		return sql.NullBool{}
	}
	return sql.NullBool{Bool: *b, Valid: true}
}

// DeleteProject implements switchboard.ProjectStore. Foreign keys cascade
// to everything but the tool-call log, which has none.
func (s *Store) DeleteProject(ctx context.Context, id string) error {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, "DELETE FROM kb_projects WHERE id = ?", id)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		_, err = tx.ExecContext(ctx, "DELETE FROM kb_agent_run_tool_calls WHERE project_id = ?", id)
		return err
	})
	if err != nil {
		return fail("delete project", err)
	}
	if n == 0 {
		return schema.ProjectNotFound(id)
	}
	return nil
}

// affected returns notFound when a write touched no row.
func affected(res sql.Result, op string, notFound error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fail(op, err)
	}
	if n == 0 {
		return notFound
	}
	return nil
}

// inTx runs fn in a write transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// projectExists tells an empty listing from a missing project.
func (s *Store) projectExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.r.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM kb_projects WHERE id = ?)", id).Scan(&ok)
	return ok, err
}

// requireProject returns ErrNotFound when the project does not exist.
func (s *Store) requireProject(ctx context.Context, op, id string) error {
	ok, err := s.projectExists(ctx, id)
	if err != nil {
		return fail(op, err)
	}
	if !ok {
		return schema.ProjectNotFound(id)
	}
	return nil
}
