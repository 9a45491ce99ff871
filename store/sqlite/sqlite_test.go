package sqlite_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/store/storetest"
)

func open(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) switchboard.Store { return open(t, t.TempDir()) })
}

// TestConcurrentOpen opens fresh data directories from several stores at
// once, as processes sharing one would: all of them open, and each
// migration ran exactly once.
func TestConcurrentOpen(t *testing.T) {
	files, _ := os.ReadDir("migrations")
	for round := range 5 {
		dir := filepath.Join(t.TempDir(), "nested", "data")
		const opens = 8
		var wg sync.WaitGroup
		errs := make([]error, opens)
		for i := range opens {
			wg.Go(func() {
				s, err := sqlite.Open(t.Context(), dir)
				if err == nil {
					err = s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: concurrent Open: %v", round, err)
		}
		if n := countRows(t, dir, "SELECT count(*) FROM kb_schema_migrations"); n != len(files) {
			t.Errorf("kb_schema_migrations has %d rows, want one per migration file (%d)", n, len(files))
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("data directory: %v, %v; want mode 0700", fi.Mode(), err)
		}
	}
}

// TestReopen keeps what was written across a close and an open.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.CreateProject(t.Context(), switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := open(t, dir).GetProject(t.Context(), "p"); err != nil {
		t.Errorf("project lost across reopen: %v", err)
	}
}

func countRows(t *testing.T, dir, q string) int {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSchemaNewerThanBinary(t *testing.T) {
	dir := t.TempDir()
	open(t, dir).Close()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "INSERT INTO kb_schema_migrations VALUES (9999, '9999_future', 0)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := sqlite.Open(t.Context(), dir); !errors.Is(err, switchboard.ErrConfig) {
		t.Errorf("Open of a newer schema: %v, want ErrConfig", err)
	}
}

func TestOpenErrors(t *testing.T) {
	notDB := t.TempDir()
	if err := os.WriteFile(filepath.Join(notDB, sqlite.FileName), []byte("this is not a database, just text long enough to fill a header......................................................"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlite.Open(t.Context(), notDB)
	if !errors.Is(err, switchboard.ErrConfig) {
		t.Errorf("Open of a file that is no database: %v, want ErrConfig", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := sqlite.Open(t.Context(), file); !errors.Is(err, switchboard.ErrConfig) {
		t.Errorf("Open with a file as data directory: %v, want ErrConfig", err)
	}
}

// TestFileModes keeps the database owner-only: it holds ciphertexts, token
// hashes and call arguments. A file left 0644 by an older version is
// tightened on open.
func TestFileModes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	if _, err := s.CreateProject(t.Context(), switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		for _, name := range []string{sqlite.FileName, sqlite.FileName + "-wal", sqlite.FileName + "-shm"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if errors.Is(err, os.ErrNotExist) && name != sqlite.FileName {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := fi.Mode().Perm(); m != 0o600 {
				t.Errorf("%s has mode %o, want 600", name, m)
			}
		}
	}
	check()
	s.Close()
	if err := os.Chmod(filepath.Join(dir, sqlite.FileName), 0o644); err != nil {
		t.Fatal(err)
	}
	open(t, dir)
	check()
}

// TestInstanceID: each new store makes an instance id of its own, which
// survives a reopen; a store that served before the id existed (it has
// projects when the migration runs) keeps the name the gateway gives it.
func TestInstanceID(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := open(t, dirA), open(t, dirB)
	idA, err := a.InstanceID(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	idB, err := b.InstanceID(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if idA == idB || idA == "legacy" || idB == "legacy" {
		t.Errorf("two new stores: ids %q and %q, want two of their own", idA, idB)
	}
	a.Close()
	if again, err := open(t, dirA).InstanceID(t.Context(), "other"); err != nil || again != idA {
		t.Errorf("reopened store: id %q, %v; want %q", again, err, idA)
	}

	// An older store: migrated without the table, with a project.
	dirC := t.TempDir()
	c := open(t, dirC)
	if _, err := c.CreateProject(t.Context(), switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	db, err := sql.Open("sqlite", filepath.Join(dirC, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	// (and what came after it, which the migration then applies again)
	for _, q := range []string{"DROP TABLE kb_gateway_instance", "DROP TABLE kb_leases", "DROP TABLE kb_server_states", "ALTER TABLE kb_agent_run_tool_calls DROP COLUMN kind", "ALTER TABLE kb_agent_run_tool_calls DROP COLUMN principal", "ALTER TABLE kb_agent_run_tool_calls DROP COLUMN principal_name", "DELETE FROM kb_schema_migrations WHERE version >= 4"} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	c = open(t, dirC)
	if id, err := c.InstanceID(t.Context(), "legacy"); err != nil || id != "legacy" {
		t.Errorf("store from before the instance id: %q, %v; want the gateway's name for it", id, err)
	}
	if id, err := c.InstanceID(t.Context(), "other"); err != nil || id != "legacy" {
		t.Errorf("store from before the instance id, asked again: %q, %v; want the name stored first", id, err)
	}
}
