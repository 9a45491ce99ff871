package main

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestFailedStartUndoesEveryStep: a start that fails at its last step,
// once a call has started its stdio server, undoes every step, last first: the
// stdio child (one that ignores SIGTERM and stdin's end, with a
// grandchild) is gone, the gateway's port is free again, and a gateway
// started next on the same data dir and port serves the same server. A
// taken profile address fails a start the same way, before the child runs.
func TestFailedStartUndoesEveryStep(t *testing.T) {
	dir := t.TempDir()
	grandPidFile := filepath.Join(dir, "grandchild")
	file := filepath.Join(dir, "servers.json")
	writeServers(t, file, [][2]any{{"stubborn", fixture("stubborn", map[string]string{mcptest.EnvFixtureStubborn: grandPidFile})}})
	t.Cleanup(func() { // should the test fail
		children, grandchildren := stubbornCopies(t, grandPidFile)
		killLeftovers(append(children, grandchildren...))
	})
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	vars := map[string]string{"MCP_SERVER_PORT": port, "MCP_SERVER_CONFIG": file, "MCP_SERVER_DATA_DIR": filepath.Join(dir, "data"),
		"MCP_SERVER_SANDBOX": "false", "MCP_SERVER_SHUTDOWN_TIMEOUT": "10s", "MCP_SERVER_CHILD_STOP_TIMEOUT": "1s"}
	logs := &testenv.Buffer{}
	failed := errors.New("the last step failed")
	started := func(addr string) error {
		// Servers connect on first use: a call starts the stdio child.
		cs, _ := openMCP(t, "http://"+addr+"/mcp", "")
		if pid := callText(t, cs, "pid", nil); pid == "" {
			t.Errorf("the stdio server answered no pid")
		}
		eventually(t, opTimeout, func() (bool, string) {
			_, err := os.Stat(grandPidFile)
			return err == nil, "the stdio server's grandchild did not start"
		})
		return failed
	}
	err = runWith(context.Background(), runOptions{Started: started}, nil, func(k string) string { return vars[k] }, io.Discard, logs)
	if !errors.Is(err, failed) {
		t.Fatalf("start failing at its last step: %v; want that step's error\n%s", err, logs.String())
	}
	if children, grandchildren := stubbornCopies(t, grandPidFile); len(children)+len(grandchildren) > 0 {
		t.Errorf("after the failed start, stdio children %v and grandchildren %v still run", children, grandchildren)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("the failed start left its port %s bound: %v", port, err)
	}
	ln.Close()

	// A taken profile address fails the start too, with its variable named.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	vars["MCP_SERVER_PPROF_ADDR"] = taken.Addr().String()
	if err := runWith(context.Background(), runOptions{}, nil, func(k string) string { return vars[k] }, io.Discard, logs); err == nil || !strings.Contains(err.Error(), "MCP_SERVER_PPROF_ADDR") {
		t.Fatalf("start with a taken profile address: %v; want its error", err)
	}

	// The same data dir and port, without the taken address: it starts and
	// serves the server, so the store and the lease were let go cleanly.
	delete(vars, "MCP_SERVER_PPROF_ADDR")
	addr := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logs2 := &testenv.Buffer{}
	go func() {
		done <- runWith(ctx, runOptions{Listening: func(a string) { addr <- a }}, nil, func(k string) string { return vars[k] }, io.Discard, logs2)
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("the next start on the same data dir and port failed: %v\n%s", err, logs2.String())
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the second gateway ended with %v", err)
		}
	}()
	cs, _ := openMCP(t, url+"/mcp", "")
	if pid := callText(t, cs, "pid", nil); pid == "" {
		t.Errorf("the second gateway's stdio server answered no pid")
	}
}

// TestInputsCheckedBeforeAnything (issue 33): a servers file with a bad
// hosted entry and a catalog that does not parse are both reported by one
// failed start, before the gateway did anything: no port taken, nothing
// written in its data directory (no store, no key).
func TestInputsCheckedBeforeAnything(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "servers.json")
	writeServers(t, file, [][2]any{{"ok", stdioServer("ok")}, {"boxed", map[string]any{"hosted": map[string]any{"image": ""}}}})
	cat := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(cat, []byte("registry:\n  broken: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	data := filepath.Join(dir, "data")
	vars := map[string]string{"MCP_SERVER_PORT": port, "MCP_SERVER_CONFIG": file, "MCP_SERVER_CATALOG": cat, "MCP_SERVER_DATA_DIR": data, "MCP_SERVER_SANDBOX": "false"}
	err = runWith(context.Background(), runOptions{}, nil, func(k string) string { return vars[k] }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "MCP_SERVER_CONFIG") || !strings.Contains(err.Error(), "MCP_SERVER_CATALOG") {
		t.Fatalf("start with a bad servers file and a bad catalog: %v; want one error naming both", err)
	}
	if entries, _ := os.ReadDir(data); len(entries) > 0 {
		t.Errorf("the failed start wrote %d entries into its data dir", len(entries))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("the port is taken after the failed start: %v", err)
	}
	ln.Close()
}
