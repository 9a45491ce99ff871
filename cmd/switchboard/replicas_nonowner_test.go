package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestHostedThroughNonOwner: a hosted server owned by replica A is
// restarted and then deleted through replica B, without a restart of
// either: A replaces its container (one container, the same /data) and
// then removes it with its volume. Registered again through B with
// another tool prefix, the server runs once with the new spec and A's
// clients call it; no sample ever holds two copies.
func TestHostedThroughNonOwner(t *testing.T) {
	rs := newReplicaSet(t)
	image := enginetest.GoImage(t, enginetest.New(t), mcpFixturePkg)
	stopWatch := rs.watchDuplicates()
	a, b := rs.start(), rs.start()
	apiB := newAPI(t, b.url, "")
	newAPI(t, a.url, "").must(http.StatusCreated, "POST", "/api/v1/mcp/servers", map[string]any{
		"name": "notes", "image": image, "tool_prefix": "n_", "volumes": []string{"/data"}}, nil)
	eventually(t, opTimeout, func() (bool, string) {
		st := hostedOwner(t, b)
		return strings.HasSuffix(st.Owner, " "+a.url) && st.Status == switchboard.HostedRunning, fmt.Sprintf("B sees owner %q, status %s", st.Owner, st.Status)
	})
	csA, csB := sdkConnect(t, a.url+"/mcp", nil), sdkConnect(t, b.url+"/mcp", nil)
	waitListed(t, csB, "n_write_file")
	if out := callText(t, csB, "n_write_file", map[string]any{"path": "/data/kept.txt", "text": "kept"}); out != "ok" {
		t.Fatalf("write through B: %s", out)
	}
	first := instanceContainers(t, rs.inst)
	if len(first) != 1 {
		t.Fatalf("%d containers, want A's one", len(first))
	}

	t.Run("restart through B", func(t *testing.T) {
		apiB.must(http.StatusOK, "POST", "/api/v1/mcp/servers/notes/restart", nil, nil)
		eventually(t, opTimeout, func() (bool, string) {
			now := instanceContainers(t, rs.inst)
			return len(now) == 1 && now[0] != first[0], fmt.Sprintf("containers %v, want one other than %v", now, first)
		})
		eventually(t, opTimeout, func() (bool, string) {
			st := hostedOwner(t, b)
			return st.Status == switchboard.HostedRunning && strings.HasSuffix(st.Owner, " "+a.url), fmt.Sprintf("B sees owner %q, status %s", st.Owner, st.Status)
		})
		if out := callText(t, csB, "n_read_file", map[string]any{"path": "/data/kept.txt"}); out != "kept" {
			t.Fatalf("after the restart B reads %q, want the file written before", out)
		}
	})

	t.Run("delete through B", func(t *testing.T) {
		apiB.must(http.StatusNoContent, "DELETE", "/api/v1/mcp/servers/notes", nil, nil)
		eventually(t, opTimeout, func() (bool, string) {
			now := instanceContainers(t, rs.inst)
			return len(now) == 0, fmt.Sprintf("%d containers after the delete", len(now))
		})
		for name, g := range map[string]*binGateway{"A": a, "B": b} {
			eventually(t, opTimeout, func() (bool, string) {
				status, _ := newAPI(t, g.url, "").do("GET", "/api/v1/mcp/servers/notes", nil)
				return status == http.StatusNotFound, fmt.Sprintf("%s still knows the server: HTTP %d", name, status)
			})
		}
	})

	t.Run("registered again through B with another spec", func(t *testing.T) {
		apiB.must(http.StatusCreated, "POST", "/api/v1/mcp/servers", map[string]any{
			"name": "notes", "image": image, "tool_prefix": "m_", "volumes": []string{"/data"}}, nil)
		eventually(t, opTimeout, func() (bool, string) {
			names := toolNames(t, csA)
			return slices.Contains(names, "m_echo") && !slices.Contains(names, "n_echo"), "A's tools: " + strings.Join(names, ",")
		})
		if got := instanceContainers(t, rs.inst); len(got) != 1 {
			t.Fatalf("%d containers, want the one", len(got))
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		// The delete took the old /data with it.
		res, err := csA.CallTool(ctx, &mcp.CallToolParams{Name: "m_read_file", Arguments: map[string]any{"path": "/data/kept.txt"}})
		if err == nil && !res.IsError && text(t, res) == "kept" {
			t.Fatalf("the server registered again reads the deleted server's file")
		}
	})

	for _, g := range []*binGateway{a, b} {
		g.term()
	}
	if n := stopWatch(); n < 10 {
		t.Errorf("only %d samples of the engine were taken", n)
	}
	if got := instanceContainers(t, rs.inst); len(got) != 0 {
		t.Errorf("%d containers left once both replicas stopped", len(got))
	}
}
