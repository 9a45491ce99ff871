package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// sweepLine is what a gateway logs (at debug) after each sweep.
const sweepLine = "swept the engine for containers of gateway processes that ended"

// foreignLine starts the engine's warning of another store's objects
// under its instance name.
const foreignLine = "another gateway uses this instance name with another store"

// TestInstanceNameOnTwoStores: two gateways given one MCP_SERVER_INSTANCE
// on two stores (A in this process on SQLite, B the real binary on
// PostgreSQL), each with a hosted server and a sandbox session, run side
// by side through several sweeps each (every 2 s). Neither touches the
// other's containers (the same ids, still running, still answering),
// neither says it removed any, and each warns once that the other is
// there (issue 33: each took the other, alive on this host, for a gateway
// that ended, since its own store holds no lease of it).
func TestInstanceNameOnTwoStores(t *testing.T) {
	t.Parallel() // its own processes, stores and engine instance
	bin := buildBinary(t)
	inst := testInstance("own-stores")
	env, servers := ownedGatewayEnv(t, inst, map[string]string{"MCP_SERVER_OWNER_LEASE": "2s"})
	a := startGateway(t, servers, env)
	acs := sdkConnect(t, a.url+"/mcp", nil)
	defer acs.Close()
	asid := ownedSession(t, acs)

	dir := t.TempDir()
	file := dir + "/servers.json"
	writeServers(t, file, servers)
	benv := []string{"MCP_SERVER_PORT=0", "MCP_SERVER_DATA_DIR=" + dir + "/data", "MCP_SERVER_CONFIG=" + file, "MCP_SERVER_LOG_FORMAT=json",
		"MCP_SERVER_LOG_LEVEL=debug", "MCP_SERVER_DATABASE_URL=" + pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY=" + testSecretKey}
	for k, v := range env {
		benv = append(benv, k+"="+v)
	}
	b := startBinary(t, bin, benv...)
	bcs := sdkConnect(t, b.url+"/mcp", nil)
	defer bcs.Close()
	bsid := ownedSession(t, bcs)

	before := instanceContainers(t, inst)
	if len(before) != 4 {
		t.Fatalf("the two gateways run %d containers, want 4 (a session and a hosted server each)", len(before))
	}
	// Three more sweeps by each, counted from now.
	sweeps := func(logs *testenv.Buffer) int { return strings.Count(logs.String(), sweepLine) }
	fromA, fromB := sweeps(a.logs), sweeps(b.logs)
	eventually(t, time.Minute, func() (bool, string) {
		na, nb := sweeps(a.logs)-fromA, sweeps(b.logs)-fromB
		return na >= 3 && nb >= 3, fmt.Sprintf("sweeps since both served: A %d, B %d; want 3 each", na, nb)
	})

	if got := instanceContainers(t, inst); !slices.Equal(got, before) {
		t.Errorf("after the sweeps the running containers are %v, want the same %v", got, before)
	}
	for name, logs := range map[string]*testenv.Buffer{"A": a.logs, "B": b.logs} {
		if strings.Contains(logs.String(), "removed containers") {
			t.Errorf("%s removed containers:\n%s", name, logs.String())
		}
		if n := strings.Count(logs.String(), foreignLine); n != 1 {
			t.Errorf("%s warned %d times of the other store's objects, want once", name, n)
		}
	}
	stillServes(t, acs, asid)
	stillServes(t, bcs, bsid)
}
