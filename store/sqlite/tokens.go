package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const tokenCols = "id, project_id, name, hash, created_at, revoked_at"

func scanToken(row scanner) (switchboard.Token, error) {
	var t switchboard.Token
	var created int64
	var revoked sql.NullInt64
	err := row.Scan(&t.ID, &t.ProjectID, &t.Name, &t.Hash, &created, &revoked)
	t.CreatedAt, t.RevokedAt = fromUS(created), fromNullUS(revoked)
	return t, err
}

// CreateToken implements switchboard.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t switchboard.Token) (switchboard.Token, error) {
	if err := t.Validate(); err != nil {
		return switchboard.Token{}, err
	}
	out, err := scanToken(s.w.QueryRowContext(ctx,
		"INSERT INTO kb_project_tokens (id, project_id, name, hash, created_at) VALUES (?, ?, ?, ?, ?) RETURNING "+tokenCols,
		schema.NewID(), t.ProjectID, t.Name, t.Hash, us(schema.Now())))
	switch {
	case isCode(err, sqliteForeignKey):
		return switchboard.Token{}, schema.ProjectNotFound(t.ProjectID)
	case isCode(err, sqliteUnique):
		return switchboard.Token{}, schema.TokenHashExists(t.Name)
	case err != nil:
		return switchboard.Token{}, fail("create token", err)
	}
	return out, nil
}

// TokenByHash implements switchboard.TokenStore.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (switchboard.Token, error) {
	t, err := scanToken(s.r.QueryRowContext(ctx,
		"SELECT "+tokenCols+" FROM kb_project_tokens WHERE hash = ? AND revoked_at IS NULL", hash))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Token{}, schema.TokenNotFoundOrRevoked()
	}
	if err != nil {
		return switchboard.Token{}, fail("find token", err)
	}
	return t, nil
}

// ListTokens implements switchboard.TokenStore.
func (s *Store) ListTokens(ctx context.Context, projectID string) ([]switchboard.Token, error) {
	rows, err := s.r.QueryContext(ctx,
		"SELECT "+tokenCols+" FROM kb_project_tokens WHERE project_id = ? ORDER BY created_at, id", projectID)
	out, err := collect(rows, err, scanToken)
	if err != nil {
		return nil, fail("list tokens", err)
	}
	if len(out) == 0 {
		if err := s.requireProject(ctx, "list tokens", projectID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RevokeToken implements switchboard.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, projectID, id string) (switchboard.Token, error) {
	t, err := scanToken(s.w.QueryRowContext(ctx, `
		UPDATE kb_project_tokens SET revoked_at = coalesce(revoked_at, ?)
		WHERE id = ? AND project_id = ?
		RETURNING `+tokenCols,
		us(schema.Now()), id, projectID))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Token{}, schema.TokenNotFound(projectID, id)
	}
	if err != nil {
		return switchboard.Token{}, fail("revoke token", err)
	}
	return t, nil
}
