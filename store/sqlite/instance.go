package sqlite

import (
	"context"
)

// InstanceID returns the gateway instance id this store keeps, storing
// fallback first when it keeps none (a store that served before the id
// was introduced). Concurrent callers all get the one stored.
func (s *Store) InstanceID(ctx context.Context, fallback string) (string, error) {
	if _, err := s.w.ExecContext(ctx, "INSERT INTO kb_gateway_instance (singleton, id) VALUES (1, ?) ON CONFLICT DO NOTHING", fallback); err != nil {
		return "", fail("store instance id", err)
	}
	var id string
	if err := s.r.QueryRowContext(ctx, "SELECT id FROM kb_gateway_instance").Scan(&id); err != nil {
		return "", fail("read instance id", err)
	}
	return id, nil
}
