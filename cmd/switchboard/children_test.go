package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestNoChildOutlivesKill: after kill -9 of the real gateway, its stdio
// child is gone although it ignores SIGTERM and stdin's end, and so is the
// child's grandchild although it left the child's process group (setsid)
// and ignores SIGTERM and SIGHUP; a restart on the same data dir runs one
// copy of the child, not a second one beside an orphan.
func TestNoChildOutlivesKill(t *testing.T) {
	t.Parallel() // its own processes, data dir and engine instance
	bin := buildBinary(t)
	dir := t.TempDir()
	grandPidFile := filepath.Join(dir, "grandchild")
	file := filepath.Join(dir, "servers.json")
	writeServers(t, file, [][2]any{{"stubborn", fixture("stubborn", map[string]string{mcptest.EnvFixtureStubborn: grandPidFile})}})
	env := []string{"MCP_SERVER_SANDBOX=false", "MCP_SERVER_PORT=0", "MCP_SERVER_DATA_DIR=" + filepath.Join(dir, "data"),
		"MCP_SERVER_CONFIG=" + file, "MCP_SERVER_LOG_FORMAT=json"}
	t.Cleanup(func() { // should the test fail
		children, grandchildren := stubbornCopies(t, grandPidFile)
		killLeftovers(append(children, grandchildren...))
	})

	first := startBinary(t, bin, env...)
	iso := isolationLogged(t, first)
	testenv.Need(t, "pidns", iso != "process group", "the gateway may not create PID namespaces here (isolation: "+iso+")")
	cs, _ := openMCP(t, first.url+"/mcp", "")
	child := callText(t, cs, "pid", nil)
	grandchild := readPidFile(t, grandPidFile)
	if children, grandchildren := stubbornCopies(t, grandPidFile); !slices.Equal(children, []string{child}) || !slices.Equal(grandchildren, []string{grandchild}) {
		t.Fatalf("before the kill: children %v, grandchildren %v; want [%s] and [%s]", children, grandchildren, child, grandchild)
	}

	first.kill(t)
	eventually(t, opTimeout, func() (bool, string) {
		for _, p := range []string{child, grandchild} {
			if !processGone(p) {
				return false, "process " + p + " (child " + child + ", grandchild " + grandchild + ") outlived the killed gateway"
			}
		}
		return true, ""
	})

	second := startBinary(t, bin, env...)
	cs, _ = openMCP(t, second.url+"/mcp", "")
	again := callText(t, cs, "pid", nil)
	if children, grandchildren := stubbornCopies(t, grandPidFile); !slices.Equal(children, []string{again}) || len(grandchildren) != 1 {
		t.Errorf("after the restart: children %v, grandchildren %v; want [%s] and one", children, grandchildren, again)
	}
}

// isolationLogged returns how the gateway said at start it ties stdio
// children to itself.
func isolationLogged(t *testing.T, g *binGateway) string {
	t.Helper()
	for line := range strings.Lines(g.logs.String()) {
		var m struct{ Isolation string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Isolation != "" {
			return m.Isolation
		}
	}
	t.Fatal("the gateway did not log the isolation of stdio children at start")
	return ""
}

// stubbornCopies lists the live stdio children and grandchildren of the
// stubborn fixture whose grandchild pid file is path, by their
// environment, wherever they run.
func stubbornCopies(t *testing.T, path string) (children, grandchildren []string) {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	testenv.Need(t, "procfs", err == nil, "no /proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil || processGone(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone meanwhile
		}
		vars := bytes.Split(b, []byte{0})
		switch {
		case !slices.ContainsFunc(vars, func(v []byte) bool { return string(v) == mcptest.EnvFixtureStubborn+"="+path }):
		case slices.ContainsFunc(vars, func(v []byte) bool { return string(v) == mcptest.EnvFixture+"=stdio" }):
			children = append(children, e.Name())
		default:
			grandchildren = append(grandchildren, e.Name())
		}
	}
	return children, grandchildren
}

func readPidFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
