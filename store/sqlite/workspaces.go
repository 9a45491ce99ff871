package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const workspaceCols = `id, project_id, container_type, image, config, status, provider,
	container_id, agent_session_id, last_used_at, created_at, updated_at`

func scanWorkspace(row scanner) (switchboard.Workspace, error) {
	var w switchboard.Workspace
	var ctype, config string
	var lastUsed sql.NullInt64
	var created, updated int64
	err := row.Scan(&w.ID, &w.ProjectID, &ctype, &w.Image, &config, &w.Status, &w.Provider,
		&w.ContainerID, &w.AgentSessionID, &lastUsed, &created, &updated)
	w.ContainerType = switchboard.ContainerType(ctype)
	w.Config = json.RawMessage(config)
	w.LastUsedAt = fromNullUS(lastUsed)
	w.CreatedAt, w.UpdatedAt = fromUS(created), fromUS(updated)
	return w, err
}

// CreateWorkspace implements switchboard.WorkspaceStore.
func (s *Store) CreateWorkspace(ctx context.Context, w switchboard.Workspace) (switchboard.Workspace, error) {
	if err := w.Validate(); err != nil {
		return switchboard.Workspace{}, err
	}
	config, err := canonical(w.Config)
	if err != nil {
		return switchboard.Workspace{}, err
	}
	t := us(schema.Now())
	out, err := scanWorkspace(s.w.QueryRowContext(ctx, `
		INSERT INTO kb_agent_workspaces
			(id, project_id, container_type, image, config, status, provider, container_id, agent_session_id,
			 last_used_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING `+workspaceCols,
		schema.NewID(), w.ProjectID, string(w.ContainerType), w.Image, config, w.Status, w.Provider,
		w.ContainerID, w.AgentSessionID, nullUS(w.LastUsedAt), t, t))
	if isCode(err, sqliteForeignKey) {
		return switchboard.Workspace{}, schema.ProjectNotFound(w.ProjectID)
	}
	if err != nil {
		return switchboard.Workspace{}, fail("create workspace", err)
	}
	return out, nil
}

// GetWorkspace implements switchboard.WorkspaceStore.
func (s *Store) GetWorkspace(ctx context.Context, id string) (switchboard.Workspace, error) {
	w, err := scanWorkspace(s.r.QueryRowContext(ctx, "SELECT "+workspaceCols+" FROM kb_agent_workspaces WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
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
		{"container_type", string(f.ContainerType)},
		{"status", f.Status},
		{"provider", f.Provider},
		{"agent_session_id", f.AgentSessionID},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	q := "SELECT " + workspaceCols + " FROM kb_agent_workspaces"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.r.QueryContext(ctx, q+" ORDER BY created_at, id", args...)
	out, err := collect(rows, err, scanWorkspace)
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
	config, err := canonical(w.Config)
	if err != nil {
		return switchboard.Workspace{}, err
	}
	out, err := scanWorkspace(s.w.QueryRowContext(ctx, `
		UPDATE kb_agent_workspaces
		SET container_type = ?, image = ?, config = ?, status = ?, provider = ?, container_id = ?,
			agent_session_id = ?, last_used_at = ?, updated_at = ?
		WHERE id = ? AND project_id = ?
		RETURNING `+workspaceCols,
		string(w.ContainerType), w.Image, config, w.Status, w.Provider, w.ContainerID,
		w.AgentSessionID, nullUS(w.LastUsedAt), us(schema.Now()), w.ID, w.ProjectID))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Workspace{}, schema.WorkspaceNotFound(w.ID)
	}
	if err != nil {
		return switchboard.Workspace{}, fail("update workspace", err)
	}
	return out, nil
}

// DeleteWorkspace implements switchboard.WorkspaceStore.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, "DELETE FROM kb_agent_workspaces WHERE id = ?", id)
	if err != nil {
		return fail("delete workspace", err)
	}
	return affected(res, "delete workspace", schema.WorkspaceNotFound(id))
}
