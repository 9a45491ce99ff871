package postgres

import (
	"context"
)

// InstanceID returns the gateway instance id this database keeps, storing
// fallback first when it keeps none (a database that served before the id
// was introduced). Replicas sharing the database all get the one stored.
func (s *Store) InstanceID(ctx context.Context, fallback string) (string, error) {
	if _, err := s.pool.Exec(ctx, "INSERT INTO kb.gateway_instance (id) VALUES ($1) ON CONFLICT DO NOTHING", fallback); err != nil {
		return "", fail("store instance id", err)
	}
	var id string
	if err := s.pool.QueryRow(ctx, "SELECT id FROM kb.gateway_instance").Scan(&id); err != nil {
		return "", fail("read instance id", err)
	}
	return id, nil
}
