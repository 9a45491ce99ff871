package main

import (
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/store/postgres"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestInstanceNamePerStore: two gateways whose stores look alike (both on
// /data, both on postgres:5432/switchboard) get two instance names, so
// neither removes the other's containers at start; a gateway reopening
// its store gets its name again; MCP_SERVER_INSTANCE still wins, and the
// store's identity is read beside it.
func TestInstanceNamePerStore(t *testing.T) {
	name := func(cfg config.Config, st switchboard.Store) string {
		t.Helper()
		n, err := instanceName(t.Context(), cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	identity := func(cfg config.Config, st switchboard.Store) string {
		t.Helper()
		id, err := storeIdentity(t.Context(), cfg, st)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	openSQLite := func(dir string) switchboard.Store {
		t.Helper()
		st, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	openPG := func(dsn string) switchboard.Store {
		t.Helper()
		st, err := postgres.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	t.Run("sqlite", func(t *testing.T) {
		cfg := config.Config{DataDir: "/data"} // what both images see
		dirA := t.TempDir()
		a, b := name(cfg, openSQLite(dirA)), name(cfg, openSQLite(t.TempDir()))
		if a == b {
			t.Errorf("two stores on /data share the instance name %q", a)
		}
		if again := name(cfg, openSQLite(dirA)); again != a {
			t.Errorf("reopened store: instance %q, want %q", again, a)
		}
		cfg.Hosted.Instance = "chosen"
		if got := name(cfg, openSQLite(dirA)); got != "chosen" {
			t.Errorf("with MCP_SERVER_INSTANCE: %q", got)
		}
		// The store's identity is read whatever the name (issue 33): two
		// stores given one name still tell their objects apart.
		idA, idB := identity(cfg, openSQLite(dirA)), identity(cfg, openSQLite(t.TempDir()))
		if idA == "" || idA == idB {
			t.Errorf("two stores named %q: identities %q and %q, want two", cfg.Hosted.Instance, idA, idB)
		}
		if "sb-"+idA != a {
			t.Errorf("store identity %q, want the id its unnamed instance %q carries", idA, a)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		cfg := config.Config{DatabaseURL: "postgres://switchboard@postgres:5432/switchboard"} // what both compose projects see
		dsnA := pgtest.NewDB(t)
		a, b := name(cfg, openPG(dsnA)), name(cfg, openPG(pgtest.NewDB(t)))
		if a == b {
			t.Errorf("two databases at postgres:5432/switchboard share the instance name %q", a)
		}
		if again := name(cfg, openPG(dsnA)); again != a {
			t.Errorf("a second replica on the database: instance %q, want %q", again, a)
		}
	})
}
