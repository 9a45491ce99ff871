package main

import (
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/registrytest"
)

// TestPullsInStatus: a pull under way (a hosted server's image from a
// registry that never answers) is in the project's GET / status and its
// API status, not in another project's; once the stall bound ends it,
// neither lists it.
func TestPullsInStatus(t *testing.T) {
	eng := enginetest.New(t)
	stalled := registrytest.Stalled(t)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_ADMIN_TOKEN": adminToken,
		"MCP_SERVER_PULL_STALL_TIMEOUT": "3s"})
	admin := newAPI(t, g.url, adminToken)
	admin.must(201, "POST", "/api/v1/projects", map[string]any{"id": "other"}, nil)
	image := stalled + "/slow/tool:v1"
	admin.must(201, "POST", "/api/v1/mcp/servers", map[string]any{"name": "slow", "image": image}, nil)
	eventually(t, 30*time.Second, func() (bool, string) {
		var st switchboard.HostedStatus
		admin.must(200, "GET", "/api/v1/mcp/servers/slow", nil, &st)
		return st.Pull != nil, st.Status + " " + st.LastError
	})

	pulls := func(path string) []switchboard.PullProgress {
		t.Helper()
		var st struct {
			Pulls []switchboard.PullProgress `json:"pulls"`
		}
		admin.must(200, "GET", path, nil, &st)
		return st.Pulls
	}
	for _, path := range []string{"/", "/mcp", "/api/v1/projects/default/status"} {
		if got := pulls(path); len(got) != 1 || got[0].Image != image || got[0].StartedAt.IsZero() {
			t.Errorf("%s while pulling: pulls %+v, want %s", path, got, image)
		}
	}
	for _, path := range []string{"/projects/other/mcp", "/api/v1/projects/other/status"} {
		if got := pulls(path); len(got) != 0 {
			t.Errorf("%s, another project's: pulls %+v, want none", path, got)
		}
	}

	var st switchboard.HostedStatus
	eventually(t, 30*time.Second, func() (bool, string) {
		admin.must(200, "GET", "/api/v1/mcp/servers/slow", nil, &st)
		return st.Status == switchboard.HostedFailed, st.Status
	})
	if !strings.Contains(st.LastError, "no progress") {
		t.Errorf("last_error %q, want the stall named", st.LastError)
	}
	if got := pulls("/"); len(got) != 0 {
		t.Errorf("GET / after the pull ended: pulls %+v", got)
	}
}
