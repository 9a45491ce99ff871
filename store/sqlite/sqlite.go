// Package sqlite is the embedded switchboard.Store: zero setup, one file in
// the data directory. It uses modernc.org/sqlite, a translation of SQLite
// to pure Go, so the binary stays static (CGO_ENABLED=0, scratch image)
// while the engine is SQLite itself: the most deployed and tested
// embedded database, with transactions, foreign keys and a single-file
// format that survives kill -9.
//
// The schema mirrors store/postgres (tables kb_<name> for kb.<name>).
// Writes go through one connection, so they queue in Go instead of
// spinning on SQLite's busy handler; reads use a pool of their own and,
// thanks to WAL mode, never wait for writes. Migrations run in one
// IMMEDIATE transaction, which holds SQLite's write lock: two processes
// opening the same file migrate once.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/internal/schema"
)

//go:embed migrations/*.sql
var migrations embed.FS

// FileName is the database file Open keeps in its directory.
const FileName = "switchboard.db"

// busyTimeout is how long a statement waits for another process's write
// lock before failing with ErrUnavailable.
const busyTimeout = 10 * time.Second

// Store is a switchboard.Store in a SQLite file.
type Store struct {
	w, r      *sql.DB // one writer connection, a pool of readers
	inserts   insertStmts
	closeOnce sync.Once
	closeErr  error
}

var _ switchboard.Store = (*Store)(nil)

// Open opens (creating when needed) the database in dir, creating dir
// with mode 0700 when missing, and migrates it to the schema this binary
// knows. Errors: ErrConfig (the directory or file cannot be used, or the
// schema is newer than this binary), ErrUnavailable (another process
// holds the write lock for longer than the busy timeout).
func Open(ctx context.Context, dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "sqlite: cannot create the data directory: %v", errors.Unwrap(err))
	}
	path, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "sqlite: bad data directory")
	}
	// The database holds ciphertexts, token hashes and call arguments:
	// owner-only. SQLite gives its -wal and -shm files the database
	// file's mode, so creating it (or tightening it) first covers them.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "sqlite: cannot open the database file in the data directory: %v", errors.Unwrap(err))
	}
	_ = f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, switchboard.Errorf(switchboard.ErrConfig, "sqlite: cannot restrict the database file's mode to 0600: %v", errors.Unwrap(err))
		}
	}
	dsn := func(extra url.Values) string {
		q := url.Values{
			"_busy_timeout": {strconv.Itoa(int(busyTimeout.Milliseconds()))},
			"_journal_mode": {"WAL"},
			"_foreign_keys": {"1"},
			// In WAL mode NORMAL loses no committed transaction on a
			// process crash (kill -9), only on power loss.
			"_synchronous": {"NORMAL"},
		}
		for k, v := range extra {
			q[k] = v
		}
		return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
	}
	// temp_store(memory): the multi-row tool-call inserts keep their
	// statement journal in memory instead of a temporary file.
	w, err := sql.Open("sqlite", dsn(url.Values{"_txlock": {"immediate"}, "_pragma": {"temp_store(memory)"}}))
	if err != nil {
		return nil, fail("open", err)
	}
	w.SetMaxOpenConns(1)
	s := &Store{w: w}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if s.r, err = sql.Open("sqlite", dsn(url.Values{"_query_only": {"1"}})); err != nil {
		w.Close()
		return nil, fail("open", err)
	}
	s.r.SetMaxOpenConns(max(4, 2*runtime.NumCPU()))
	return s, nil
}

// Close closes both connection pools; it is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.inserts.close(), s.r.Close(), s.w.Close())
		if s.closeErr != nil {
			s.closeErr = fail("close", s.closeErr)
		}
	})
	return s.closeErr
}

// migrate applies the embedded migrations the file lacks, in one
// transaction that begins IMMEDIATE: it takes the write lock first, so a
// second process waits (busy timeout) and then finds the work done.
//
// A few moments in SQLite's life return SQLITE_BUSY without waiting for
// the busy timeout: while the last connection of another process closes
// the database (it checkpoints and removes the WAL under an exclusive
// lock) or while one recovers the WAL after a crash. Both are short, so
// Open retries for as long as the busy timeout.
func (s *Store) migrate(ctx context.Context) error {
	files, err := schema.ReadMigrations(migrations, "migrations", "sqlite")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(busyTimeout)
	for delay := 5 * time.Millisecond; ; delay = min(2*delay, 250*time.Millisecond) {
		err := s.migrateOnce(ctx, files)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return migrateFail(err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return migrateFail(ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Store) migrateOnce(ctx context.Context, files []schema.Migration) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS kb_schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return err
	}
	var newest int
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM kb_schema_migrations").Scan(&newest); err != nil {
		return err
	}
	if latest := files[len(files)-1].Version; newest > latest {
		return switchboard.Errorf(switchboard.ErrConfig, "sqlite: the database schema (version %d) is newer than this binary knows (%d); run a newer Switchboard", newest, latest)
	}
	for _, m := range files {
		if m.Version <= newest {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO kb_schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.Version, m.Name, us(schema.Now())); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return tx.Commit()
}

// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

// migrateFail reports a database that cannot be opened or read as a
// configuration problem (a directory without write permission, a file
// that is not a database), unless it is only busy or the context ended.
func migrateFail(err error) error {
	var de *switchboard.Error
	if err == nil || errors.As(err, &de) {
		return err
	}
	f := fail("migrate", err)
	if isBusy(err) || errors.Is(f, switchboard.ErrCanceled) || errors.Is(f, switchboard.ErrTimeout) {
		return f
	}
	return fmt.Errorf("%w (%w)", f, switchboard.ErrConfig)
}

// Extended SQLite result codes the store gives a meaning.
const (
	sqliteUnique     = sqlite3.SQLITE_CONSTRAINT_UNIQUE
	sqlitePrimaryKey = sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	sqliteForeignKey = sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
)

// isCode reports whether err is a SQLite error with this extended code.
func isCode(err error, code int) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code() == code
}

// fail turns an error the call site did not expect into a domain error.
// The driver's text is kept for the log; its type is not.
func fail(op string, err error) error {
	kind := switchboard.ErrUnavailable // closed database, I/O trouble
	var se *sqlite.Error
	switch {
	case errors.Is(err, context.Canceled):
		kind = switchboard.ErrCanceled
	case errors.Is(err, context.DeadlineExceeded):
		kind = switchboard.ErrTimeout
	case errors.Is(err, sql.ErrNoRows):
		kind = switchboard.ErrNotFound
	case errors.As(err, &se):
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			kind = switchboard.ErrConflict
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			kind = switchboard.ErrNotFound
		default:
			switch se.Code() & 0xff {
			case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
				kind = switchboard.ErrInvalid
			case sqlite3.SQLITE_INTERRUPT:
				kind = switchboard.ErrCanceled
			case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_FULL,
				sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PERM:
			default:
				kind = switchboard.ErrInternal // a bug, a corrupt file
			}
		}
	}
	return fmt.Errorf("sqlite: %s: %s: %w", op, err.Error(), kind)
}

// us is how times are stored: microseconds since the Unix epoch.
func us(t time.Time) int64 { return t.UnixMicro() }

func fromUS(v int64) time.Time { return time.UnixMicro(v).UTC() }

// nullUS stores the zero time as NULL.
func nullUS(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: !t.IsZero()}
}

func fromNullUS(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromUS(v.Int64)
}

// canonical returns JSON in the form the store keeps config in: compact,
// keys sorted, numbers as written, {} for nil. Equal JSON has equal text,
// as it does in PostgreSQL's jsonb, so an unchanged config is recognized.
func canonical(b json.RawMessage) (string, error) {
	if b == nil {
		return "{}", nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "config is not valid JSON")
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "config is not valid JSON")
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
