package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const workspaceCols = `id::text, project_id, container_type::text, image, config, status, provider,
	container_id, agent_session_id, last_used_at, created_at, updated_at`

func scanWorkspace(row pgx.Row) (switchboard.Workspace, error) {
	var w switchboard.Workspace
	var ctype string
	var lastUsed pgtype.Timestamptz
	err := row.Scan(&w.ID, &w.ProjectID, &ctype, &w.Image, &w.Config, &w.Status, &w.Provider,
		&w.ContainerID, &w.AgentSessionID, &lastUsed, &w.CreatedAt, &w.UpdatedAt)
	w.ContainerType = switchboard.ContainerType(ctype)
	if lastUsed.Valid {
		w.LastUsedAt = lastUsed.Time.UTC()
	}
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, err
}

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: ts(t), Valid: !t.IsZero()}
}

// CreateWorkspace implements switchboard.WorkspaceStore.
func (s *Store) CreateWorkspace(ctx context.Context, w switchboard.Workspace) (switchboard.Workspace, error) {
	if err := w.Validate(); err != nil {
		return switchboard.Workspace{}, err
	}
	out, err := scanWorkspace(s.pool.QueryRow(ctx, `
		INSERT INTO kb.agent_workspaces
			(id, project_id, container_type, image, config, status, provider, container_id, agent_session_id,
			 last_used_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
		RETURNING `+workspaceCols,
		schema.NewID(), w.ProjectID, string(w.ContainerType), w.Image, object(w.Config), w.Status, w.Provider,
		w.ContainerID, w.AgentSessionID, nullTime(w.LastUsedAt), schema.Now()))
	if isCode(err, foreignKeyViolation) {
		return switchboard.Workspace{}, schema.ProjectNotFound(w.ProjectID)
	}
	if err != nil {
		return switchboard.Workspace{}, fail("create workspace", err)
	}
	return out, nil
}

// GetWorkspace implements switchboard.WorkspaceStore.
func (s *Store) GetWorkspace(ctx context.Context, id string) (switchboard.Workspace, error) {
	if !validID(id) {
		return switchboard.Workspace{}, schema.WorkspaceNotFound(id)
	}
	w, err := scanWorkspace(s.pool.QueryRow(ctx, "SELECT "+workspaceCols+" FROM kb.agent_workspaces WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Workspace{}, schema.WorkspaceNotFound(id)
	}
	if err != nil {
		return switchboard.Workspace{}, fail("get workspace", err)
	}
	return w, nil
}

// ListWorkspaces implements switchboard.WorkspaceStore.
func (s *Store) ListWorkspaces(ctx context.Context, f switchboard.WorkspaceFilter) ([]switchboard.Workspace, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{
		{"project_id", f.ProjectID},
		{"container_type::text", string(f.ContainerType)},
		{"status", f.Status},
		{"provider", f.Provider},
		{"agent_session_id", f.AgentSessionID},
	} {
		if c.val != "" {
			args = append(args, c.val)
			where = append(where, fmt.Sprintf("%s = $%d", c.col, len(args)))
		}
	}
	q := "SELECT " + workspaceCols + " FROM kb.agent_workspaces"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY created_at, id", args...)
	if err != nil {
		return nil, fail("list workspaces", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Workspace, error) { return scanWorkspace(r) })
	if err != nil {
		return nil, fail("list workspaces", err)
	}
	return out, nil
}

// UpdateWorkspace implements switchboard.WorkspaceStore.
func (s *Store) UpdateWorkspace(ctx context.Context, w switchboard.Workspace) (switchboard.Workspace, error) {
	if err := w.Validate(); err != nil {
		return switchboard.Workspace{}, err
	}
	if !validID(w.ID) {
		return switchboard.Workspace{}, schema.WorkspaceNotFound(w.ID)
	}
	out, err := scanWorkspace(s.pool.QueryRow(ctx, `
		UPDATE kb.agent_workspaces
		SET container_type = $2, image = $3, config = $4, status = $5, provider = $6, container_id = $7,
			agent_session_id = $8, last_used_at = $9, updated_at = $10
		WHERE id = $1 AND project_id = $11
		RETURNING `+workspaceCols,
		w.ID, string(w.ContainerType), w.Image, object(w.Config), w.Status, w.Provider, w.ContainerID,
		w.AgentSessionID, nullTime(w.LastUsedAt), schema.Now(), w.ProjectID))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Workspace{}, schema.WorkspaceNotFound(w.ID)
	}
	if err != nil {
		return switchboard.Workspace{}, fail("update workspace", err)
	}
	return out, nil
}

// DeleteWorkspace implements switchboard.WorkspaceStore.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	if !validID(id) {
		return schema.WorkspaceNotFound(id)
	}
	tag, err := s.pool.Exec(ctx, "DELETE FROM kb.agent_workspaces WHERE id = $1", id)
	if err != nil {
		return fail("delete workspace", err)
	}
	if tag.RowsAffected() == 0 {
		return schema.WorkspaceNotFound(id)
	}
	return nil
}
