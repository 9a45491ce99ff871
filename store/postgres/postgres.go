// Package postgres is the switchboard.Store that several replicas share:
// PostgreSQL through pgx, schema kb. Open applies the embedded migrations
// under an advisory lock, so replicas starting together migrate once.
//
// pgx stays inside this package: callers see domain types and the
// sentinels of package switchboard, never a driver error type.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the pg_advisory_lock key that serializes migrations
// across replicas ("swbd" in ASCII). Advisory locks are per database.
const migrationLock = 0x73776264

// Store is a switchboard.Store backed by PostgreSQL.
type Store struct {
	pool      *pgxpool.Pool
	closeOnce sync.Once
}

var _ switchboard.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or key=value
// connection string; pool settings such as pool_max_conns are honoured)
// and migrates it to the schema this binary knows.
// Errors: ErrConfig (a malformed url, or a schema newer than this binary),
// ErrUnavailable (the database cannot be reached), ErrTimeout, ErrCanceled.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error can quote the URL, password included.
		return nil, switchboard.Errorf(switchboard.ErrConfig, "postgres: malformed database URL")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fail("connect", err)
	}
	s := &Store{pool: pool}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the connection pool, waiting for queries in flight.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// migrate applies the embedded migrations that the database lacks, each
// in its own transaction, holding a session advisory lock meanwhile.
func (s *Store) migrate(ctx context.Context) error {
	files, err := schema.ReadMigrations(migrations, "migrations", "postgres")
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fail("migrate", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fail("migrate: lock", err)
	}
	defer func() {
		// ctx may be done already; the lock must go either way. Closing
		// the connection ends the session, which releases it too.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "SELECT pg_advisory_unlock($1)", migrationLock); err != nil {
			conn.Conn().Close(uctx)
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS kb;
		CREATE TABLE IF NOT EXISTS kb.schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
		return fail("migrate", err)
	}
	rows, err := conn.Query(ctx, "SELECT version FROM kb.schema_migrations")
	if err != nil {
		return fail("migrate", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return fail("migrate", err)
	}
	if latest := files[len(files)-1].Version; slices.Max(append(applied, 0)) > latest {
		return switchboard.Errorf(switchboard.ErrConfig, "postgres: the database schema (version %d) is newer than this binary knows (%d); run a newer Switchboard", slices.Max(applied), latest)
	}
	for _, m := range files {
		if slices.Contains(applied, m.Version) {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO kb.schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
			return err
		})
		if err != nil {
			return fail("migration "+m.Name, err)
		}
	}
	return nil
}

// PostgreSQL error codes the store gives a meaning.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
)

// isCode reports whether err is a PostgreSQL error with this SQLSTATE.
func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// fail turns an error the call site did not expect into a domain error.
// The driver's text is kept for the log; its type is not, so nothing above
// the store can depend on pgx.
func fail(op string, err error) error {
	kind := switchboard.ErrUnavailable // connection refused, reset, pool closed...
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, context.Canceled):
		kind = switchboard.ErrCanceled
	case errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err):
		kind = switchboard.ErrTimeout
	case errors.Is(err, pgx.ErrNoRows):
		kind = switchboard.ErrNotFound
	case errors.As(err, &pe):
		switch {
		case pe.Code == uniqueViolation:
			kind = switchboard.ErrConflict
		case pe.Code == foreignKeyViolation:
			kind = switchboard.ErrNotFound
		case strings.HasPrefix(pe.Code, "22"), strings.HasPrefix(pe.Code, "23"):
			kind = switchboard.ErrInvalid // data exception, other constraints
		case pe.Code == "57014": // query_canceled: statement_timeout
			kind = switchboard.ErrTimeout
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"), strings.HasPrefix(pe.Code, "57P"):
			// connection exception, insufficient resources, shutdown
		default:
			kind = switchboard.ErrInternal
		}
	}
	return fmt.Errorf("postgres: %s: %s: %w", op, err.Error(), kind)
}

// ts prepares a caller's time for storage: PostgreSQL rounds to the
// microsecond, the store truncates, as the SQLite store does.
func ts(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// validID reports whether id can be a stored UUID, so that a malformed
// one is simply not found instead of a type error from the database.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
