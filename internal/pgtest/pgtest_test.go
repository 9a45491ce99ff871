package pgtest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestNewDB gets two empty, separate databases on a server that listens
// on a socket inside its own temp dir and runs without durability.
func TestNewDB(t *testing.T) {
	a, b := pgtest.NewDB(t), pgtest.NewDB(t)
	if a == b {
		t.Fatalf("two tests share database %q", a)
	}
	conn := func(dsn string) *pgx.Conn {
		c, err := pgx.Connect(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	ca, cb := conn(a), conn(b)
	if _, err := ca.Exec(t.Context(), "CREATE TABLE t (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil || n != 0 {
		t.Errorf("a table of one database shows in the other: %d, %v", n, err)
	}
	var sock, fsync string
	if err := ca.QueryRow(t.Context(), "SELECT current_setting('unix_socket_directories'), current_setting('fsync')").Scan(&sock, &fsync); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sock, "sbpg-") || fsync != "off" {
		t.Errorf("socket dir %q, fsync %s; want a private socket dir and fsync off", sock, fsync)
	}
}
