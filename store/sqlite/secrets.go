package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const secretCols = "project_id, name, ciphertext, created_at, updated_at"

func scanSecret(row scanner) (switchboard.Secret, error) {
	var s switchboard.Secret
	var created, updated int64
	err := row.Scan(&s.ProjectID, &s.Name, &s.Ciphertext, &created, &updated)
	s.CreatedAt, s.UpdatedAt = fromUS(created), fromUS(updated)
	return s, err
}

// PutSecret implements switchboard.SecretStore.
func (s *Store) PutSecret(ctx context.Context, sec switchboard.Secret) (switchboard.Secret, error) {
	if err := sec.Validate(); err != nil {
		return switchboard.Secret{}, err
	}
	t := us(schema.Now())
	out, err := scanSecret(s.w.QueryRowContext(ctx, `
		INSERT INTO kb_project_secrets (`+secretCols+`) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (project_id, name) DO UPDATE SET ciphertext = excluded.ciphertext, updated_at = excluded.updated_at
		RETURNING `+secretCols,
		sec.ProjectID, sec.Name, sec.Ciphertext, t, t))
	if isCode(err, sqliteForeignKey) {
		return switchboard.Secret{}, schema.ProjectNotFound(sec.ProjectID)
	}
	if err != nil {
		return switchboard.Secret{}, fail("put secret", err)
	}
	return out, nil
}

// GetSecret implements switchboard.SecretStore.
func (s *Store) GetSecret(ctx context.Context, projectID, name string) (switchboard.Secret, error) {
	out, err := scanSecret(s.r.QueryRowContext(ctx,
		"SELECT "+secretCols+" FROM kb_project_secrets WHERE project_id = ? AND name = ?", projectID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.Secret{}, schema.SecretNotFound(projectID, name)
	}
	if err != nil {
		return switchboard.Secret{}, fail("get secret", err)
	}
	return out, nil
}

// ListSecrets implements switchboard.SecretStore.
func (s *Store) ListSecrets(ctx context.Context, projectID string) ([]switchboard.Secret, error) {
	rows, err := s.r.QueryContext(ctx,
		"SELECT "+secretCols+" FROM kb_project_secrets WHERE project_id = ? ORDER BY name", projectID)
	out, err := collect(rows, err, scanSecret)
	if err != nil {
		return nil, fail("list secrets", err)
	}
	if len(out) == 0 {
		if err := s.requireProject(ctx, "list secrets", projectID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DeleteSecret implements switchboard.SecretStore.
func (s *Store) DeleteSecret(ctx context.Context, projectID, name string) error {
	res, err := s.w.ExecContext(ctx, "DELETE FROM kb_project_secrets WHERE project_id = ? AND name = ?", projectID, name)
	if err != nil {
		return fail("delete secret", err)
	}
	return affected(res, "delete secret", schema.SecretNotFound(projectID, name))
}
