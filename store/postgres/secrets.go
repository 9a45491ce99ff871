package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const secretCols = "project_id, name, ciphertext, created_at, updated_at"

func scanSecret(row pgx.Row) (switchboard.Secret, error) {
	var s switchboard.Secret
	err := row.Scan(&s.ProjectID, &s.Name, &s.Ciphertext, &s.CreatedAt, &s.UpdatedAt)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return s, err
}

// PutSecret implements switchboard.SecretStore.
func (s *Store) PutSecret(ctx context.Context, sec switchboard.Secret) (switchboard.Secret, error) {
	if err := sec.Validate(); err != nil {
		return switchboard.Secret{}, err
	}
	out, err := scanSecret(s.pool.QueryRow(ctx, `
		INSERT INTO kb.project_secrets (`+secretCols+`) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (project_id, name) DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at
		RETURNING `+secretCols,
		sec.ProjectID, sec.Name, sec.Ciphertext, schema.Now()))
	if isCode(err, foreignKeyViolation) {
		return switchboard.Secret{}, schema.ProjectNotFound(sec.ProjectID)
	}
	if err != nil {
		return switchboard.Secret{}, fail("put secret", err)
	}
	return out, nil
}

// GetSecret implements switchboard.SecretStore.
func (s *Store) GetSecret(ctx context.Context, projectID, name string) (switchboard.Secret, error) {
	out, err := scanSecret(s.pool.QueryRow(ctx,
		"SELECT "+secretCols+" FROM kb.project_secrets WHERE project_id = $1 AND name = $2", projectID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Secret{}, schema.SecretNotFound(projectID, name)
	}
	if err != nil {
		return switchboard.Secret{}, fail("get secret", err)
	}
	return out, nil
}

// ListSecrets implements switchboard.SecretStore.
func (s *Store) ListSecrets(ctx context.Context, projectID string) ([]switchboard.Secret, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT "+secretCols+" FROM kb.project_secrets WHERE project_id = $1 ORDER BY name", projectID)
	if err != nil {
		return nil, fail("list secrets", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.Secret, error) { return scanSecret(r) })
	if err != nil {
		return nil, fail("list secrets", err)
	}
	if len(out) == 0 {
		ok, err := projectExists(ctx, s.pool, projectID)
		if err != nil {
			return nil, fail("list secrets", err)
		}
		if !ok {
			return nil, schema.ProjectNotFound(projectID)
		}
	}
	return out, nil
}

// DeleteSecret implements switchboard.SecretStore.
func (s *Store) DeleteSecret(ctx context.Context, projectID, name string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM kb.project_secrets WHERE project_id = $1 AND name = $2", projectID, name)
	if err != nil {
		return fail("delete secret", err)
	}
	if tag.RowsAffected() == 0 {
		return schema.SecretNotFound(projectID, name)
	}
	return nil
}
