package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

const serverCols = "id, project_id, coalesce(product_id, ''), name, description, transport, config, enabled, created_at, updated_at"

func scanServer(row scanner) (switchboard.ServerRecord, error) {
	var r switchboard.ServerRecord
	var transport, config string
	var created, updated int64
	err := row.Scan(&r.ID, &r.ProjectID, &r.ProductID, &r.Name, &r.Description, &transport, &config, &r.Enabled, &created, &updated)
	r.Transport = schema.DomainTransport(transport)
	r.Config = json.RawMessage(config)
	r.CreatedAt, r.UpdatedAt = fromUS(created), fromUS(updated)
	return r, err
}

// nullable stores "" as NULL.
func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// CreateServer implements switchboard.ServerStore.
func (s *Store) CreateServer(ctx context.Context, r switchboard.ServerRecord) (switchboard.ServerRecord, error) {
	if err := r.Validate(); err != nil {
		return switchboard.ServerRecord{}, err
	}
	config, err := canonical(r.Config)
	if err != nil {
		return switchboard.ServerRecord{}, err
	}
	t := us(schema.Now())
	out, err := scanServer(s.w.QueryRowContext(ctx, `
		INSERT INTO kb_project_mcp_servers
			(id, project_id, product_id, name, description, transport, config, enabled, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING `+serverCols,
		schema.NewID(), r.ProjectID, nullable(r.ProductID), r.Name, r.Description, schema.DBTransport(r.Transport), config, r.Enabled, t, t))
	switch {
	case isCode(err, sqliteUnique):
		return switchboard.ServerRecord{}, schema.ServerExists(r)
	case isCode(err, sqliteForeignKey):
		return switchboard.ServerRecord{}, schema.ProjectNotFound(r.ProjectID)
	case err != nil:
		return switchboard.ServerRecord{}, fail("create server", err)
	}
	return out, nil
}

// GetServer implements switchboard.ServerStore.
func (s *Store) GetServer(ctx context.Context, projectID, name string) (switchboard.ServerRecord, error) {
	r, err := scanServer(s.r.QueryRowContext(ctx,
		"SELECT "+serverCols+" FROM kb_project_mcp_servers WHERE project_id = ? AND name = ?", projectID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return switchboard.ServerRecord{}, schema.ServerNotFound(projectID, name)
	}
	if err != nil {
		return switchboard.ServerRecord{}, fail("get server", err)
	}
	return r, nil
}

// ListServers implements switchboard.ServerStore.
func (s *Store) ListServers(ctx context.Context, projectID string) ([]switchboard.ServerRecord, error) {
	rows, err := s.r.QueryContext(ctx,
		"SELECT "+serverCols+" FROM kb_project_mcp_servers WHERE project_id = ? ORDER BY name", projectID)
	out, err := collect(rows, err, scanServer)
	if err != nil {
		return nil, fail("list servers", err)
	}
	if len(out) == 0 {
		if err := s.requireProject(ctx, "list servers", projectID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpdateServer implements switchboard.ServerStore.
func (s *Store) UpdateServer(ctx context.Context, r switchboard.ServerRecord) (switchboard.ServerRecord, error) {
	if err := r.Validate(); err != nil {
		return switchboard.ServerRecord{}, err
	}
	config, err := canonical(r.Config)
	if err != nil {
		return switchboard.ServerRecord{}, err
	}
	out, err := scanServer(s.w.QueryRowContext(ctx, `
		UPDATE kb_project_mcp_servers
		SET name = ?, description = ?, transport = ?, config = ?, enabled = ?, updated_at = ?
		WHERE id = ? AND project_id = ?
		RETURNING `+serverCols,
		r.Name, r.Description, schema.DBTransport(r.Transport), config, r.Enabled, us(schema.Now()), r.ID, r.ProjectID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return switchboard.ServerRecord{}, schema.ServerIDNotFound(r)
	case isCode(err, sqliteUnique):
		return switchboard.ServerRecord{}, schema.ServerExists(r)
	case err != nil:
		return switchboard.ServerRecord{}, fail("update server", err)
	}
	return out, nil
}

// DeleteServer implements switchboard.ServerStore.
func (s *Store) DeleteServer(ctx context.Context, projectID, name string) error {
	res, err := s.w.ExecContext(ctx, "DELETE FROM kb_project_mcp_servers WHERE project_id = ? AND name = ?", projectID, name)
	if err != nil {
		return fail("delete server", err)
	}
	return affected(res, "delete server", schema.ServerNotFound(projectID, name))
}

// ImportManifest implements switchboard.ServerStore. Each server is one
// upsert that only updates a row of the same product (and only bumps
// updated_at when something changed; config is canonical, so text
// equality is JSON equality); a row of another owner makes the upsert
// return nothing, which rolls the whole import back.
func (s *Store) ImportManifest(ctx context.Context, projectID, productID string, servers []switchboard.ServerRecord) ([]switchboard.ServerRecord, error) {
	if productID == "" {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "manifest import: product ID is required")
	}
	names := make([]string, 0, len(servers))
	configs := make([]string, 0, len(servers))
	for _, r := range servers {
		r.ProjectID, r.ProductID = projectID, productID
		if err := r.Validate(); err != nil {
			return nil, err
		}
		if slices.Contains(names, r.Name) {
			return nil, switchboard.Errorf(switchboard.ErrInvalid, "manifest of product %q lists server %q twice", productID, r.Name)
		}
		config, err := canonical(r.Config)
		if err != nil {
			return nil, err
		}
		names = append(names, r.Name)
		configs = append(configs, config)
	}
	namesJSON, _ := json.Marshal(names)

	var out []switchboard.ServerRecord
	var domainErr error
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM kb_projects WHERE id = ?)", projectID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			domainErr = schema.ProjectNotFound(projectID)
			return domainErr
		}
		t := us(schema.Now())
		for i, r := range servers {
			_, err := scanServer(tx.QueryRowContext(ctx, `
				INSERT INTO kb_project_mcp_servers AS s
					(id, project_id, product_id, name, description, transport, config, enabled, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (project_id, name) DO UPDATE
				SET description = excluded.description, transport = excluded.transport,
					config = excluded.config, enabled = excluded.enabled,
					updated_at = CASE
						WHEN s.description IS NOT excluded.description OR s.transport IS NOT excluded.transport
							OR s.config IS NOT excluded.config OR s.enabled IS NOT excluded.enabled
						THEN excluded.updated_at ELSE s.updated_at END
				WHERE s.product_id IS excluded.product_id
				RETURNING `+serverCols,
				schema.NewID(), projectID, productID, r.Name, r.Description, schema.DBTransport(r.Transport), configs[i], r.Enabled, t, t))
			if errors.Is(err, sql.ErrNoRows) {
				domainErr = schema.ServerNotOfProduct(projectID, productID, r.Name)
				return domainErr
			}
			if err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `
			DELETE FROM kb_project_mcp_servers
			WHERE project_id = ? AND product_id = ? AND name NOT IN (SELECT value FROM json_each(?))`,
			projectID, productID, string(namesJSON)); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx,
			"SELECT "+serverCols+" FROM kb_project_mcp_servers WHERE project_id = ? AND product_id = ? ORDER BY name",
			projectID, productID)
		out, err = collect(rows, err, scanServer)
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
