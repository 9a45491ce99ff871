package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const serverCols = "id::text, project_id, coalesce(product_id, ''), name, description, transport::text, config, enabled, created_at, updated_at"

func scanServer(row pgx.Row) (switchboard.ServerRecord, error) {
	var r switchboard.ServerRecord
	var transport string
	err := row.Scan(&r.ID, &r.ProjectID, &r.ProductID, &r.Name, &r.Description, &transport, &r.Config, &r.Enabled, &r.CreatedAt, &r.UpdatedAt)
	r.Transport = schema.DomainTransport(transport)
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	return r, err
}

func collectServers(rows pgx.Rows) ([]switchboard.ServerRecord, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (switchboard.ServerRecord, error) { return scanServer(r) })
}

// object returns b, or {} for nil.
func object(b json.RawMessage) json.RawMessage {
	if b == nil {
		return json.RawMessage("{}")
	}
	return b
}

// CreateServer implements switchboard.ServerStore.
func (s *Store) CreateServer(ctx context.Context, r switchboard.ServerRecord) (switchboard.ServerRecord, error) {
	if err := r.Validate(); err != nil {
		return switchboard.ServerRecord{}, err
	}
	t := schema.Now()
	out, err := scanServer(s.pool.QueryRow(ctx, `
		INSERT INTO kb.project_mcp_servers
			(id, project_id, product_id, name, description, transport, config, enabled, created_at, updated_at)
		VALUES ($1, $2, NULLIF($3, ''), $4, $5, $6, $7, $8, $9, $9)
		RETURNING `+serverCols,
		schema.NewID(), r.ProjectID, r.ProductID, r.Name, r.Description, schema.DBTransport(r.Transport), object(r.Config), r.Enabled, t))
	switch {
	case isCode(err, uniqueViolation):
		return switchboard.ServerRecord{}, schema.ServerExists(r)
	case isCode(err, foreignKeyViolation):
		return switchboard.ServerRecord{}, schema.ProjectNotFound(r.ProjectID)
	case err != nil:
		return switchboard.ServerRecord{}, fail("create server", err)
	}
	return out, nil
}

// GetServer implements switchboard.ServerStore.
func (s *Store) GetServer(ctx context.Context, projectID, name string) (switchboard.ServerRecord, error) {
	r, err := scanServer(s.pool.QueryRow(ctx,
		"SELECT "+serverCols+" FROM kb.project_mcp_servers WHERE project_id = $1 AND name = $2", projectID, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return switchboard.ServerRecord{}, schema.ServerNotFound(projectID, name)
	}
	if err != nil {
		return switchboard.ServerRecord{}, fail("get server", err)
	}
	return r, nil
}

// ListServers implements switchboard.ServerStore.
func (s *Store) ListServers(ctx context.Context, projectID string) ([]switchboard.ServerRecord, error) {
	rows, err := s.pool.Query(ctx,
		"SELECT "+serverCols+" FROM kb.project_mcp_servers WHERE project_id = $1 ORDER BY name", projectID)
	if err != nil {
		return nil, fail("list servers", err)
	}
	out, err := collectServers(rows)
	if err != nil {
		return nil, fail("list servers", err)
	}
	if len(out) == 0 {
		ok, err := projectExists(ctx, s.pool, projectID)
		if err != nil {
			return nil, fail("list servers", err)
		}
		if !ok {
			return nil, schema.ProjectNotFound(projectID)
		}
	}
	return out, nil
}

// UpdateServer implements switchboard.ServerStore.
func (s *Store) UpdateServer(ctx context.Context, r switchboard.ServerRecord) (switchboard.ServerRecord, error) {
	if err := r.Validate(); err != nil {
		return switchboard.ServerRecord{}, err
	}
	if !validID(r.ID) {
		return switchboard.ServerRecord{}, schema.ServerIDNotFound(r)
	}
	out, err := scanServer(s.pool.QueryRow(ctx, `
		UPDATE kb.project_mcp_servers
		SET name = $3, description = $4, transport = $5, config = $6, enabled = $7, updated_at = $8
		WHERE id = $1 AND project_id = $2
		RETURNING `+serverCols,
		r.ID, r.ProjectID, r.Name, r.Description, schema.DBTransport(r.Transport), object(r.Config), r.Enabled, schema.Now()))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return switchboard.ServerRecord{}, schema.ServerIDNotFound(r)
	case isCode(err, uniqueViolation):
		return switchboard.ServerRecord{}, schema.ServerExists(r)
	case err != nil:
		return switchboard.ServerRecord{}, fail("update server", err)
	}
	return out, nil
}

// DeleteServer implements switchboard.ServerStore.
func (s *Store) DeleteServer(ctx context.Context, projectID, name string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM kb.project_mcp_servers WHERE project_id = $1 AND name = $2", projectID, name)
	if err != nil {
		return fail("delete server", err)
	}
	if tag.RowsAffected() == 0 {
		return schema.ServerNotFound(projectID, name)
	}
	return nil
}

// ImportManifest implements switchboard.ServerStore. Each server is one
// upsert that only updates a row of the same product (and only bumps
// updated_at when something changed); a row of another owner makes the
// upsert return nothing, which rolls the whole import back.
func (s *Store) ImportManifest(ctx context.Context, projectID, productID string, servers []switchboard.ServerRecord) ([]switchboard.ServerRecord, error) {
	if productID == "" {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "manifest import: product ID is required")
	}
	names := make([]string, 0, len(servers))
	for _, r := range servers {
		r.ProjectID, r.ProductID = projectID, productID
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if slices.Contains(names, r.Name) {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "manifest of product %q lists server %q twice", productID, r.Name)
		}
		names = append(names, r.Name)
	}

	var out []switchboard.ServerRecord
	var domainErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// FOR KEY SHARE keeps the project from being deleted under us.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT true FROM kb.projects WHERE id = $1 FOR KEY SHARE", projectID).Scan(&exists); errors.Is(err, pgx.ErrNoRows) {
			domainErr = schema.ProjectNotFound(projectID)
			return domainErr
		} else if err != nil {
			return err
		}
		t := schema.Now()
		for _, r := range servers {
			_, err := scanServer(tx.QueryRow(ctx, `
				INSERT INTO kb.project_mcp_servers AS s
					(id, project_id, product_id, name, description, transport, config, enabled, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
				ON CONFLICT (project_id, name) DO UPDATE
				SET description = excluded.description, transport = excluded.transport,
					config = excluded.config, enabled = excluded.enabled,
					updated_at = CASE
						WHEN (s.description, s.transport, s.config, s.enabled)
							IS DISTINCT FROM (excluded.description, excluded.transport, excluded.config, excluded.enabled)
						THEN excluded.updated_at ELSE s.updated_at END
				WHERE s.product_id IS NOT DISTINCT FROM excluded.product_id
				RETURNING `+serverCols,
				schema.NewID(), projectID, productID, r.Name, r.Description, schema.DBTransport(r.Transport), object(r.Config), r.Enabled, t))
			if errors.Is(err, pgx.ErrNoRows) {
				domainErr = schema.ServerNotOfProduct(projectID, productID, r.Name)
				return domainErr
			}
			if err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx,
			"DELETE FROM kb.project_mcp_servers WHERE project_id = $1 AND product_id = $2 AND NOT (name = ANY ($3))",
			projectID, productID, names); err != nil {
			return err
		}
		rows, err := tx.Query(ctx,
			"SELECT "+serverCols+" FROM kb.project_mcp_servers WHERE project_id = $1 AND product_id = $2 ORDER BY name",
			projectID, productID)
		if err != nil {
			return err
		}
		out, err = collectServers(rows)
		return err
	})
	if domainErr != nil {
		return nil, domainErr
	}
	if err != nil {
		return nil, fail("import manifest", err)
	}
	return out, nil
}
