package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

// AcquireLease implements switchboard.LeaseStore. One writer connection
// serializes the upsert, so two processes never both win a free lease.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if err := switchboard.ValidLease(name, holder, ttl); err != nil {
		return switchboard.Lease{}, err
	}
	now := schema.Now()
	exp := now.Add(ttl).Truncate(time.Microsecond)
	var got string
	var gotExp int64
	err := s.w.QueryRowContext(ctx, `
		INSERT INTO kb_leases (name, holder, expires_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE kb_leases.holder = excluded.holder OR kb_leases.expires_at <= ?
		RETURNING holder, expires_at`, name, holder, us(exp), us(now)).Scan(&got, &gotExp)
	if err == nil {
		return switchboard.Lease{Name: name, Holder: got, ExpiresAt: fromUS(gotExp)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return switchboard.Lease{}, fail("acquire lease", err)
	}
	// The upsert's WHERE refused: someone else holds it.
	if err := s.r.QueryRowContext(ctx, "SELECT holder FROM kb_leases WHERE name = ?", name).Scan(&got); err != nil {
		got = "another process" // released meanwhile: still not ours
	}
	return switchboard.Lease{}, switchboard.Errorf(switchboard.ErrConflict, "lease %q is held by %s", name, got)
}

// ReleaseLease implements switchboard.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.w.ExecContext(ctx, "DELETE FROM kb_leases WHERE name = ? AND holder = ?", name, holder); err != nil {
		return fail("release lease", err)
	}
	return nil
}

// ListLeases implements switchboard.LeaseStore.
func (s *Store) ListLeases(ctx context.Context, prefix string) ([]switchboard.Lease, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, holder, expires_at FROM kb_leases
		WHERE substr(name, 1, ?) = ? AND expires_at > ? ORDER BY name`, len(prefix), prefix, us(schema.Now()))
	if err != nil {
		return nil, fail("list leases", err)
	}
	defer rows.Close()
	out := []switchboard.Lease{}
	for rows.Next() {
		var l switchboard.Lease
		var exp int64
		if err := rows.Scan(&l.Name, &l.Holder, &exp); err != nil {
			return nil, fail("list leases", err)
		}
		l.ExpiresAt = fromUS(exp)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list leases", err)
	}
	return out, nil
}
