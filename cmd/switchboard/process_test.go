package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// buildBinary is the gateway built as a binary, once per test run: the
// tests that run it as a process share the one build (each of its own
// took 3-10 s of linking).
func buildBinary(t *testing.T) string {
	t.Helper()
	_, err := exec.LookPath("go")
	testenv.Need(t, "go", err == nil, "go toolchain not in PATH")
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var gatewayBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "switchboard-gateway-")
	if err != nil {
		return "", err
	}
	gatewayDir = dir
	bin := filepath.Join(dir, "switchboard")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", &buildError{".", string(out), err}
	}
	return bin, nil
})

// gatewayDir holds what gatewayBinary built; TestMain removes it.
var gatewayDir string

// logWatcher reads the gateway's JSON log lines and lets a test wait for
// a message without sleeping.
type logWatcher struct {
	lines chan map[string]any
}

func watchLog(r io.Reader) *logWatcher {
	w := &logWatcher{lines: make(chan map[string]any, 256)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				w.lines <- m
			}
		}
	}()
	return w
}

func (w *logWatcher) waitFor(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case m, ok := <-w.lines:
			if !ok {
				t.Fatalf("gateway exited before logging %q", msg)
			}
			if m["msg"] == msg {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q log line in 60s", msg)
		}
	}
}

// TestProcessLifecycle runs the real binary: SIGHUP reloads the servers
// file and stops removed children; SIGTERM exits 0 and leaves no child.
func TestProcessLifecycle(t *testing.T) {
	t.Parallel() // its own processes, data dir and engine instance
	bin := buildBinary(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "servers.json")
	writeServers(t, file, [][2]any{{"a", stdioServer("a")}, {"b", stdioServer("b", "toolPrefix", "b_")}})
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "MCP_SERVER_PORT=0", "MCP_SERVER_CONFIG="+file, "MCP_SERVER_LOG_FORMAT=json",
		"MCP_SERVER_DATA_DIR="+dir, "MCP_SERVER_CHILD_STOP_TIMEOUT=2s")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	logs := watchLog(stderr)
	addr := logs.waitFor(t, "listening")["addr"].(string)

	c := newRaw(t, "http://"+addr+"/mcp")
	c.initialize()
	aPid, bPid := c.toolText("pid", map[string]any{}), c.toolText("b_pid", map[string]any{})

	writeServers(t, file, [][2]any{{"a", stdioServer("a")}})
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "reloaded servers file")
	if !processGone(bPid) {
		t.Errorf("removed server b (pid %s) still running after reload", bPid)
	}
	if got := c.toolText("pid", map[string]any{}); got != aPid {
		t.Errorf("session or server a lost across reload: pid %s -> %s", aPid, got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(t, "stopped")
	for range logs.lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want status 0", err)
	}
	if !processGone(aPid) {
		t.Errorf("child %s outlived the gateway", aPid)
	}
}

// TestStartFailures: a taken port or a bad configuration exits non-zero
// with a message that says why.
func TestStartFailures(t *testing.T) {
	t.Parallel() // its own processes, data dir and engine instance
	bin := buildBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	tests := []struct {
		name string
		env  []string
		want *regexp.Regexp
	}{
		{"port taken", []string{"MCP_SERVER_PORT=" + itoa(port)}, regexp.MustCompile(`listen on 127\.0\.0\.1:\d+`)},
		{"bad config", []string{"MCP_SERVER_PORT=0", "MCP_SERVER_CALL_TIMEOUT=never", "MCP_SERVER_LOG_FORMAT=xml"}, regexp.MustCompile(`(?s)MCP_SERVER_CALL_TIMEOUT.*MCP_SERVER_LOG_FORMAT|MCP_SERVER_LOG_FORMAT.*MCP_SERVER_CALL_TIMEOUT`)},
		{"open on all interfaces", []string{"MCP_SERVER_PORT=0", "MCP_SERVER_HOST=0.0.0.0"}, regexp.MustCompile(`MCP_SERVER_HOST: 0\.0\.0\.0 is not a loopback address and MCP_SERVER_ADMIN_TOKEN is not set.*MCP_SERVER_ALLOW_UNAUTHENTICATED=true`)},
		{"unparsable value", []string{"MCP_SERVER_PORT=eighty"}, regexp.MustCompile(`MCP_SERVER_PORT: "eighty" is not a whole number`)},
		{"missing servers file", []string{"MCP_SERVER_PORT=0", "MCP_SERVER_CONFIG=/nonexistent/servers.json"}, regexp.MustCompile(`MCP_SERVER_CONFIG`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = append(append(os.Environ(), "MCP_SERVER_DATA_DIR="+t.TempDir()), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit: %v, want non-zero\n%s", err, out)
			}
			if !tt.want.Match(out) {
				t.Errorf("output does not explain the failure:\n%s", out)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
