package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
)

// testSecretKey is MCP_SERVER_SECRET_KEY where replicas must share it.
const testSecretKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// TestReplicas: two gateways on one PostgreSQL. What is made through
// replica A's API is served by replica B (the project, its server with a
// secret decrypted by the shared key, its token), a call through B is in
// the history A reads, and later changes made on A reach B by its sync
// loop alone: a new server, a disabled one, a new secret value, a revoked
// token, a deleted project.
func TestReplicas(t *testing.T) {
	t.Parallel()
	env := map[string]string{"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_SYNC_INTERVAL": "100ms", "MCP_SERVER_ADMIN_TOKEN": adminToken}
	ga, gb := startGateway(t, nil, env), startGateway(t, nil, env)
	a, b := newAPI(t, ga.url, adminToken), newAPI(t, gb.url, adminToken)
	value := secretValue(t)
	a.createProject("shared")
	a.putSecret("shared", "SHARED_SECRET", value)
	a.createServer("shared", "s", fixture("s", map[string]string{"FROM_SECRET": "${SHARED_SECRET}"}))
	tok := a.createToken("shared", "replicated")
	endpointB := gb.url + "/projects/shared/mcp"

	// B serves the project as soon as it exists in the store.
	cs, _ := openMCP(t, endpointB, tok.Token)
	eventually(t, opTimeout, func() (bool, string) {
		names := toolNames(t, cs)
		return has(names, "s_t0000"), "B's tools: " + strings.Join(names, ",")
	})
	if out := callText(t, cs, "env", nil); !strings.Contains("\n"+out, "\nFROM_SECRET="+value+"\n") {
		t.Fatalf("B's server lacks the secret set through A:\n%s", out)
	}
	if got := b.listServers("shared"); len(got) != 1 || got[0].Name != "s" {
		t.Errorf("B's API lists %+v", got)
	}

	t.Run("a call through B is in the history read from A", func(t *testing.T) {
		a := a.on(t)
		callText(t, cs, "echo", map[string]any{"text": "via replica b"})
		calls := a.waitCalls("shared", "?tool=echo", 1)
		if c := calls[0]; c.Server != "s" || c.Outcome != "ok" || c.Session != cs.ID() || !strings.Contains(string(c.Arguments), "via replica b") {
			t.Errorf("A's record of B's call: %+v", c)
		}
	})

	t.Run("changes made on A reach B by its sync loop", func(t *testing.T) {
		a := a.on(t)
		a.createServer("shared", "t", fixture("t", nil, "toolPrefix", "t_"))
		a.must(http.StatusOK, "PATCH", "/api/v1/projects/shared/servers/s", map[string]any{"enabled": false}, nil)
		eventually(t, opTimeout, func() (bool, string) {
			names := toolNames(t, cs)
			return has(names, "t_echo") && !has(names, "s_t0000"), "B's tools: " + strings.Join(names, ",")
		})
		a.must(http.StatusOK, "PATCH", "/api/v1/projects/shared/servers/s", map[string]any{"enabled": true}, nil)
		value2 := secretValue(t)
		a.putSecret("shared", "SHARED_SECRET", value2)
		eventually(t, opTimeout, func() (bool, string) {
			names := toolNames(t, cs)
			if !has(names, "s_t0000") {
				return false, "s not back on B: " + strings.Join(names, ",")
			}
			out := callText(t, cs, "env", nil)
			return strings.Contains("\n"+out, "\nFROM_SECRET="+value2+"\n"), "B's server has not got the new secret value"
		})
		if strings.Contains(ga.logs.String()+gb.logs.String()+a.seen.String()+b.seen.String(), value2) {
			t.Errorf("a secret value is in a log or an API response")
		}
	})

	t.Run("a token revoked on A stops working on B", func(t *testing.T) {
		a, b := a.on(t), b.on(t)
		b.as(tok.Token).must(http.StatusOK, "GET", "/api/v1/projects/shared/servers", nil, nil)
		a.must(http.StatusOK, "DELETE", "/api/v1/projects/shared/tokens/"+tok.ID, nil, nil)
		// B trusts what it read about a token for a few seconds at most.
		eventually(t, opTimeout, func() (bool, string) {
			status, _ := b.as(tok.Token).do("GET", "/api/v1/projects/shared/servers", nil)
			return status == http.StatusUnauthorized, "B still answers the revoked token with HTTP " + itoa(status)
		})
		refused(t, endpointB, tok.Token, http.StatusUnauthorized)
	})

	t.Run("a project deleted on A is gone from B", func(t *testing.T) {
		a, b := a.on(t), b.on(t)
		admin, _ := openMCP(t, endpointB, adminToken)
		pid := callText(t, admin, "t_pid", nil)
		a.must(http.StatusNoContent, "DELETE", "/api/v1/projects/shared", nil, nil)
		b.fails(http.StatusNotFound, "not_found", "GET", "/api/v1/projects/shared/servers", nil)
		eventually(t, opTimeout, func() (bool, string) {
			_, bb, err := dialMCP(endpointB, adminToken)
			return err != nil && bb.lastStatus() == http.StatusNotFound, "B still serves the deleted project"
		})
		eventually(t, opTimeout, func() (bool, string) {
			return processGone(pid), "B's child " + pid + " of the deleted project still runs"
		})
	})

	if strings.Contains(ga.logs.String()+gb.logs.String()+a.seen.String()+b.seen.String(), value) {
		t.Errorf("a secret value is in a log or an API response")
	}
}
