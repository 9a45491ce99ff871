package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard"
)

// AcquireLease implements switchboard.LeaseStore. The upsert's WHERE
// decides in one statement, so two replicas never both win a free lease;
// expiry is the database's clock.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error) {
	if err := switchboard.ValidLease(name, holder, ttl); err != nil {
		return switchboard.Lease{}, err
	}
	l := switchboard.Lease{Name: name}
	err := s.pool.QueryRow(ctx, `
		INSERT INTO kb.leases (name, holder, expires_at)
			VALUES ($1, $2, date_trunc('microseconds', now() + $3 * interval '1 microsecond'))
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
			WHERE kb.leases.holder = excluded.holder OR kb.leases.expires_at <= now()
		RETURNING holder, expires_at`, name, holder, ttl.Microseconds()).Scan(&l.Holder, &l.ExpiresAt)
	if err == nil {
		l.ExpiresAt = l.ExpiresAt.UTC()
		return l, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return switchboard.Lease{}, fail("acquire lease", err)
	}
	var got string
	if err := s.pool.QueryRow(ctx, "SELECT holder FROM kb.leases WHERE name = $1", name).Scan(&got); err != nil {
		got = "another process" // released meanwhile: still not ours
	}
	return switchboard.Lease{}, switchboard.Errorf(switchboard.ErrConflict, "lease %q is held by %s", name, got)
}

// ReleaseLease implements switchboard.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM kb.leases WHERE name = $1 AND holder = $2", name, holder); err != nil {
		return fail("release lease", err)
	}
	return nil
}

// ListLeases implements switchboard.LeaseStore.
func (s *Store) ListLeases(ctx context.Context, prefix string) ([]switchboard.Lease, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, holder, expires_at FROM kb.leases
		WHERE left(name, length($1)) = $1 AND expires_at > now() ORDER BY name`, prefix)
	if err != nil {
		return nil, fail("list leases", err)
	}
	defer rows.Close()
	out := []switchboard.Lease{}
	for rows.Next() {
		var l switchboard.Lease
		if err := rows.Scan(&l.Name, &l.Holder, &l.ExpiresAt); err != nil {
			return nil, fail("list leases", err)
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list leases", err)
	}
	return out, nil
}
