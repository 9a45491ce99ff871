package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const projectCols = "id, description, sandbox_enabled, created_at, updated_at"

func scanProject(row pgx.Row) (switchboard.Project, error) {
	var p switchboard.Project
	err := row.Scan(&p.ID, &p.Description, &p.Sandbox, &p.CreatedAt, &p.UpdatedAt)
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, err
}

// CreateProject implements switchboard.ProjectStore.
func (s *Store) CreateProject(ctx context.Context, p switchboard.Project) (switchboard.Project, error) {
	if err := p.Validate(); err != nil {
		return switchboard.Project{}, err
	}
	t := schema.Now()
	// Tool-call records of an earlier project of this id that arrived
	// after its deletion (a batch in flight, a spool replayed) go with
	// the creation, in the same statement: a failed create purges nothing.
	out, err := scanProject(s.pool.QueryRow(ctx,
		"WITH purge AS (DELETE FROM kb.agent_run_tool_calls WHERE project_id = $1) "+
			"INSERT INTO kb.projects ("+projectCols+") VALUES ($1, $2, $3, $4, $4) RETURNING "+projectCols,
		p.ID, p.Description, p.Sandbox, t))
	if isCode(err, uniqueViolation) {
		return switchboard.Project{}, schema.ProjectExists(p.ID)
	}
	if err != nil {
		return switchboard.Project{}, fail("create project", err)
	}
	return out, nil
}

// GetProject implements switchboard.ProjectStore.
func (s *Store) GetProject(ctx context.Context, id string) (switchboard.Project, error) {
	p, err := scanProject(s.pool.QueryRow(ctx, "SELECT "+projectCols+" FROM kb.projects WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(id)
	}
	if err != nil {
		return switchboard.Project{}, fail("get project", err)
	}
	return p, nil
}

// ListProjects implements switchboard.ProjectStore.
func (s *Store) ListProjects(ctx context.Context) ([]switchboard.Project, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+projectCols+" FROM kb.projects ORDER BY id")
	if err != nil {
		return nil, fail("list projects", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Project, error) { return scanProject(r) })
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
	out, err := scanProject(s.pool.QueryRow(ctx,
		"UPDATE kb.projects SET description = $2, updated_at = $3 WHERE id = $1 RETURNING "+projectCols,
		p.ID, p.Description, schema.Now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(p.ID)
	}
	if err != nil {
		return switchboard.Project{}, fail("update project", err)
	}
	return out, nil
}

// SetProjectSandbox implements switchboard.ProjectStore.
func (s *Store) SetProjectSandbox(ctx context.Context, id string, on *bool) (switchboard.Project, error) {
	out, err := scanProject(s.pool.QueryRow(ctx,
		"UPDATE kb.projects SET sandbox_enabled = $2, updated_at = $3 WHERE id = $1 RETURNING "+projectCols,
		id, on, schema.Now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Project{}, schema.ProjectNotFound(id)
	}
	if err != nil {
		return switchboard.Project{}, fail("set project sandbox", err)
	}
	return out, nil
}

// DeleteProject implements switchboard.ProjectStore. Foreign keys cascade
// to everything but the tool-call log, which has none.
func (s *Store) DeleteProject(ctx context.Context, id string) error {
	var n int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM kb.projects WHERE id = $1", id)
		if err != nil {
			return err
		}
		if n = tag.RowsAffected(); n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, "DELETE FROM kb.agent_run_tool_calls WHERE project_id = $1", id)
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

// querier is what pool and transactions have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// projectExists tells an empty listing from a missing project.
func projectExists(ctx context.Context, q querier, id string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM kb.projects WHERE id = $1)", id).Scan(&ok)
	return ok, err
}
