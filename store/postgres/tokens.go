package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const tokenCols = "id::text, project_id, name, hash, created_at, revoked_at"

func scanToken(row pgx.Row) (switchboard.Token, error) {
	var t switchboard.Token
	var revoked pgtype.Timestamptz
	err := row.Scan(&t.ID, &t.ProjectID, &t.Name, &t.Hash, &t.CreatedAt, &revoked)
	t.CreatedAt = t.CreatedAt.UTC()
	if revoked.Valid {
		t.RevokedAt = revoked.Time.UTC()
	}
	return t, err
}

// CreateToken implements switchboard.TokenStore.
func (s *Store) CreateToken(ctx context.Context, t switchboard.Token) (switchboard.Token, error) {
	if err := t.Validate(); err != nil {
		return switchboard.Token{}, err
	}
	out, err := scanToken(s.pool.QueryRow(ctx,
		"INSERT INTO kb.project_tokens (id, project_id, name, hash, created_at) VALUES ($1, $2, $3, $4, $5) RETURNING "+tokenCols,
		schema.NewID(), t.ProjectID, t.Name, t.Hash, schema.Now()))
	switch {
	case isCode(err, foreignKeyViolation):
		return switchboard.Token{}, schema.ProjectNotFound(t.ProjectID)
	case isCode(err, uniqueViolation):
		return switchboard.Token{}, schema.TokenHashExists(t.Name)
	case err != nil:
		return switchboard.Token{}, fail("create token", err)
	}
	return out, nil
}

// TokenByHash implements switchboard.TokenStore.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (switchboard.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx,
		"SELECT "+tokenCols+" FROM kb.project_tokens WHERE hash = $1 AND revoked_at IS NULL", hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Token{}, schema.TokenNotFoundOrRevoked()
	}
	if err != nil {
		return switchboard.Token{}, fail("find token", err)
	}
	return t, nil
}

// ListTokens implements switchboard.TokenStore.
func (s *Store) ListTokens(ctx context.Context, projectID string) ([]switchboard.Token, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT "+tokenCols+" FROM kb.project_tokens WHERE project_id = $1 ORDER BY created_at, id", projectID)
	if err != nil {
		return nil, fail("list tokens", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Token, error) { return scanToken(r) })
	if err != nil {
		return nil, fail("list tokens", err)
	}
	if len(out) == 0 {
		ok, err := projectExists(ctx, s.pool, projectID)
		if err != nil {
			return nil, fail("list tokens", err)
		}
		if !ok {
			return nil, schema.ProjectNotFound(projectID)
		}
	}
	return out, nil
}

// RevokeToken implements switchboard.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, projectID, id string) (switchboard.Token, error) {
	if !validID(id) {
		return switchboard.Token{}, schema.TokenNotFound(projectID, id)
	}
	t, err := scanToken(s.pool.QueryRow(ctx, `
		UPDATE kb.project_tokens SET revoked_at = coalesce(revoked_at, $3)
		WHERE id = $1 AND project_id = $2
		RETURNING `+tokenCols,
		id, projectID, schema.Now()))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Token{}, schema.TokenNotFound(projectID, id)
	}
	if err != nil {
		return switchboard.Token{}, fail("revoke token", err)
	}
	return t, nil
}
