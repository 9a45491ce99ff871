package postgres_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/store/postgres"
	"github.com/switchboard-mcp/switchboard/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func open(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) switchboard.Store { return open(t, pgtest.NewDB(t)) })
}

// TestConcurrentOpen starts several replicas at once on a fresh database:
// all of them start, and each migration ran exactly once (a second run of
// the first migration would fail, as its CREATE statements have no IF NOT
// EXISTS).
func TestConcurrentOpen(t *testing.T) {
	dsn := pgtest.NewDB(t)
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), dsn)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent Open: %v", err)
	}

	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n, versions int
	if err := conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT version) FROM kb.schema_migrations").Scan(&n, &versions); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir("migrations")
	if n != len(files) || versions != len(files) {
		t.Errorf("schema_migrations has %d rows (%d versions), want one per migration file (%d)", n, versions, len(files))
	}

	// Opening a migrated database again changes nothing.
	open(t, dsn)
}

// TestSchemaNewerThanBinary refuses a database migrated by a newer binary
// instead of running against a schema it does not know.
func TestSchemaNewerThanBinary(t *testing.T) {
	dsn := pgtest.NewDB(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "INSERT INTO kb.schema_migrations (version, name) VALUES (9999, '9999_future')"); err != nil {
		t.Fatal(err)
	}
	_, err = postgres.Open(t.Context(), dsn)
	if !errors.Is(err, switchboard.ErrConfig) {
		t.Errorf("Open of a newer schema: %v, want ErrConfig", err)
	}
}

// TestOpenErrors checks that connection problems come back as domain
// errors, without the password of the URL or a driver error type.
func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"postgres://u:s3cret@127.0.0.1:1/db?connect_timeout=5", switchboard.ErrUnavailable},
		{"postgres://u:s3cret@[::1/db", switchboard.ErrConfig},
	} {
		_, err := postgres.Open(t.Context(), tc.url)
		if !errors.Is(err, tc.want) {
			t.Errorf("Open(%q) = %v, want %v", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q): error leaks the password: %v", tc.url, err)
		}
		var pe *pgconn.PgError
		var ce *pgconn.ConnectError
		if errors.As(err, &pe) || errors.As(err, &ce) {
			t.Errorf("Open(%q): a driver error escaped: %v", tc.url, err)
		}
	}
}

// TestInstanceID: each new database makes an instance id of its own, which
// replicas opening it share; a database that served before the id existed
// (it has projects when the migration runs) keeps the name the gateway
// gives it.
func TestInstanceID(t *testing.T) {
	dsnA := pgtest.NewDB(t)
	a, b := open(t, dsnA), open(t, pgtest.NewDB(t))
	idA, err := a.InstanceID(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	idB, err := b.InstanceID(t.Context(), "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if idA == idB || idA == "legacy" || idB == "legacy" {
		t.Errorf("two new databases: ids %q and %q, want two of their own", idA, idB)
	}
	if again, err := open(t, dsnA).InstanceID(t.Context(), "other"); err != nil || again != idA {
		t.Errorf("second replica: id %q, %v; want %q", again, err, idA)
	}

	// An older database: migrated without the table, with a project.
	dsnC := pgtest.NewDB(t)
	c := open(t, dsnC)
	if _, err := c.CreateProject(t.Context(), switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	conn, err := pgx.Connect(t.Context(), dsnC)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP TABLE kb.gateway_instance", "DELETE FROM kb.schema_migrations WHERE name = '0004_gateway_instance'"} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(context.Background())
	c = open(t, dsnC)
	if id, err := c.InstanceID(t.Context(), "legacy"); err != nil || id != "legacy" {
		t.Errorf("database from before the instance id: %q, %v; want the gateway's name for it", id, err)
	}
	if id, err := c.InstanceID(t.Context(), "other"); err != nil || id != "legacy" {
		t.Errorf("database from before the instance id, asked again: %q, %v; want the name stored first", id, err)
	}
}
