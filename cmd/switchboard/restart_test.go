package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// binGateway is the real binary running as a subprocess.
type binGateway struct {
	cmd     *exec.Cmd
	url     string
	logs    *testenv.Buffer
	drained chan struct{} // closed once stderr hits EOF
	waited  bool
}

// startBinary starts bin with this process's environment, less its
// MCP_SERVER_* variables, plus env, and waits until it listens. It is killed when the test ends.
func startBinary(t *testing.T, bin string, env ...string) *binGateway {
	t.Helper()
	g := &binGateway{cmd: exec.Command(bin), logs: &testenv.Buffer{}, drained: make(chan struct{})}
	for _, kv := range os.Environ() { // only the test's MCP_SERVER_* count
		if !strings.HasPrefix(kv, "MCP_SERVER_") {
			g.cmd.Env = append(g.cmd.Env, kv)
		}
	}
	// A first list waits for every server, as tests expect (the last
	// value of a variable wins: env may set its own).
	g.cmd.Env = append(g.cmd.Env, "MCP_SERVER_LIST_WAIT=60s")
	g.cmd.Env = append(g.cmd.Env, env...)
	stderr, err := g.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		defer close(g.drained)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			_, _ = g.logs.Write(append(sc.Bytes(), '\n'))
			var m struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Msg == "listening" {
				select {
				case addr <- m.Addr:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		g.kill(t)
		if t.Failed() {
			t.Logf("log of %s (pid %d):\n%s", bin, g.cmd.Process.Pid, g.logs.String())
		}
	})
	select {
	case a := <-addr:
		g.url = "http://" + a
	case <-g.drained:
		g.kill(t)
		t.Fatalf("the gateway exited before listening:\n%s", g.logs.String())
	case <-time.After(opTimeout):
		t.Fatalf("the gateway did not listen within %s:\n%s", opTimeout, g.logs.String())
	}
	return g
}

// term sends SIGTERM and waits until the gateway has drained and
// exited.
func (g *binGateway) term() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	<-g.drained
	_ = g.cmd.Wait()
	g.waited = true
}

// kill sends SIGKILL and reaps the process; it is idempotent.
func (g *binGateway) kill(t *testing.T) {
	t.Helper()
	if g.waited {
		return
	}
	g.waited = true
	_ = g.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-g.drained:
	case <-time.After(opTimeout):
		t.Errorf("stderr of the killed gateway still open after %s", opTimeout)
	}
	_ = g.cmd.Wait()
}

// TestRestartAfterKill: everything made through the API survives kill -9
// of the real binary, on the embedded store and on PostgreSQL: projects,
// servers (with their product), secrets (names, and the server still gets
// the value, so the generated key survived too), tokens (valid ones
// authenticate, revoked ones stay revoked), and every tool call that got
// a response, exactly once, though the kill comes right after the last
// response, before the batched call log could store it.
func TestRestartAfterKill(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var env []string
			if kind == "postgres" {
				env = append(env, "MCP_SERVER_DATABASE_URL="+pgtest.NewDB(t))
			}
			restartAfterKill(t, bin, env...)
		})
	}
}

func restartAfterKill(t *testing.T, bin string, extraEnv ...string) {
	dir := t.TempDir()
	file := filepath.Join(dir, "servers.json")
	writeServers(t, file, nil)
	env := append([]string{"MCP_SERVER_SANDBOX=false", "MCP_SERVER_PORT=0", "MCP_SERVER_DATA_DIR=" + filepath.Join(dir, "data"), "MCP_SERVER_CONFIG=" + file,
		"MCP_SERVER_ADMIN_TOKEN=" + adminToken, "MCP_SERVER_LOG_FORMAT=json"}, extraEnv...)

	first := startBinary(t, bin, env...)
	api := newAPI(t, first.url, adminToken)
	value := secretValue(t)
	api.createProject("keep1")
	api.createProject("keep2")
	api.putSecret("keep1", "KEEP_SECRET", value)
	api.createServer("keep1", "s1", fixture("s1", map[string]string{"FROM_SECRET": "${KEEP_SECRET}"}))
	api.must(http.StatusOK, "PUT", "/api/v1/projects/keep1/products/prod",
		map[string]any{"mcp": map[string]any{"servers": map[string]any{"fromprod": fixture("fromprod", nil, "toolPrefix", "prod_")}}}, nil)
	api.createServer("keep2", "s2", fixture("s2", nil))
	tok1 := api.createToken("keep1", "one").Token
	tok2 := api.createToken("keep2", "two").Token
	gone := api.createToken("keep1", "revoked")
	api.must(http.StatusOK, "DELETE", "/api/v1/projects/keep1/tokens/"+gone.ID, nil, nil)

	// What the API says before the kill, to compare after the restart.
	paths := []string{"/api/v1/projects", "/api/v1/projects/keep1", "/api/v1/projects/keep2",
		"/api/v1/projects/keep1/secrets", "/api/v1/projects/keep2/secrets",
		"/api/v1/projects/keep1/tokens", "/api/v1/projects/keep2/tokens"}
	before := map[string]string{}
	for _, p := range paths {
		before[p] = string(api.must(http.StatusOK, "GET", p, nil, nil))
	}
	servers1, servers2 := api.listServers("keep1"), api.listServers("keep2")
	if len(servers1) != 2 || len(servers2) != 1 {
		t.Fatalf("servers before the kill: %+v %+v", servers1, servers2)
	}

	// Calls, each told apart by its tool and text; the kill follows the
	// last response at once.
	c1, _ := openMCP(t, first.url+"/projects/keep1/mcp", tok1)
	c2, _ := openMCP(t, first.url+"/projects/keep2/mcp", tok2)
	answered := map[string]map[string]int{"keep1": {}, "keep2": {}}
	call := func(project string, cs *mcp.ClientSession, tool, text string) string {
		var args map[string]any
		if text != "" {
			args = map[string]any{"text": text}
		}
		out := callText(t, cs, tool, args)
		answered[project][tool+" "+text]++
		return out
	}
	call("keep1", c1, "echo", "before the kill")
	call("keep1", c1, "prod_echo", "from the product")
	pids := []string{call("keep1", c1, "pid", ""), call("keep1", c1, "prod_pid", ""), call("keep2", c2, "pid", "")}
	t.Cleanup(func() { killLeftovers(pids) })
	for i := range 30 {
		text := fmt.Sprint("burst ", i)
		switch i % 3 {
		case 0:
			call("keep1", c1, "echo", text)
		case 1:
			call("keep1", c1, "prod_echo", text)
		default:
			call("keep2", c2, "echo", text)
		}
	}
	first.kill(t)
	if ws, ok := first.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the gateway did not die of SIGKILL: %v", first.cmd.ProcessState)
	}

	second := startBinary(t, bin, env...)
	api = newAPI(t, second.url, adminToken)
	for _, p := range paths {
		if got := string(api.must(http.StatusOK, "GET", p, nil, nil)); got != before[p] {
			t.Errorf("GET %s after the restart:\n%s\nbefore the kill:\n%s", p, got, before[p])
		}
	}
	if got := api.listServers("keep1"); !sameRows(servers1, got) {
		t.Errorf("keep1's servers after the restart:\n%+v\nbefore:\n%+v", got, servers1)
	}
	if got := api.listServers("keep2"); !sameRows(servers2, got) {
		t.Errorf("keep2's servers after the restart:\n%+v\nbefore:\n%+v", got, servers2)
	}
	// Every answered call is on record once, as soon as the new gateway
	// listens: the spool is replayed before it serves.
	history := map[string][]callOut{}
	for project, want := range answered {
		history[project] = api.toolCalls(project, "?limit=1000").Calls
		got := map[string]int{}
		for _, c := range history[project] {
			var a struct{ Text string }
			_ = json.Unmarshal(c.Arguments, &a)
			got[c.Tool+" "+a.Text]++
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s's tool calls after the restart, by tool and text (-answered +recorded):\n%s", project, diff)
		}
	}

	// Tokens still authenticate, and reach their own project only.
	c1, _ = openMCP(t, second.url+"/projects/keep1/mcp", tok1)
	c2, _ = openMCP(t, second.url+"/projects/keep2/mcp", tok2)
	refused(t, second.url+"/projects/keep1/mcp", gone.Token, http.StatusUnauthorized)
	refused(t, second.url+"/projects/keep2/mcp", tok1, http.StatusForbidden)
	// The secret still decrypts and reaches its server.
	if out := callText(t, c1, "env", nil); !strings.Contains("\n"+out, "\nFROM_SECRET="+value+"\n") {
		t.Errorf("after the restart s1's environment lacks the secret:\n%s", out)
	}
	killed := pids
	newPid := callText(t, c1, "pid", nil)
	pids = append(pids, newPid, callText(t, c2, "pid", nil))
	if newPid == killed[0] {
		t.Errorf("s1 answered with the killed gateway's child %s", newPid)
	}
	// The history goes on where it was.
	callText(t, c1, "prod_echo", map[string]any{"text": "after the restart"})
	old := history["keep1"]
	calls := api.waitCalls("keep1", "?limit=1000", len(old)+3) // env, pid and prod_echo
	if len(old) == 0 || calls[0].Tool != "prod_echo" || calls[0].ID <= old[0].ID {
		t.Errorf("newest record after the restart %+v, newest before it %+v", calls[0], old)
	}
	if strings.Contains(first.logs.String()+second.logs.String()+api.seen.String(), value) {
		t.Errorf("the secret value is in a log or an API response")
	}
	// The killed gateway's children saw their stdin close and exited:
	// nothing is orphaned (for servers that end on EOF, as stdio servers do).
	for _, p := range killed {
		eventually(t, opTimeout, func() (bool, string) { return processGone(p), "the killed gateway's child " + p + " still runs" })
	}
}

// killLeftovers kills test-fixture children that outlived their gateway.
func killLeftovers(pids []string) {
	for _, p := range pids {
		if n, err := strconv.Atoi(p); err == nil && n > 0 && !processGone(p) {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// TestStatusRemembersAfterRestart (issue 34, item 10): a server that
// failed reads failed, with its error, after the gateway restarts and
// before any client connects it again (it read idle with no error); one
// that worked reads idle, as lazily connected servers do. A second
// gateway on the same data dir is what a restart looks like.
func TestStatusRemembersAfterRestart(t *testing.T) {
	servers := [][2]any{{"up", stdioServer("up")}, {"broken", map[string]any{"command": "/nonexistent/mcp-server"}}}
	g := startGateway(t, servers, nil)
	cs, _ := openMCP(t, g.url+"/mcp", "")
	toolNames(t, cs) // connects both: broken fails
	type status struct {
		Name   string
		Status struct {
			State     string     `json:"state"`
			LastError string     `json:"last_error"`
			SeenAt    *time.Time `json:"seen_at"`
		} `json:"status"`
	}
	read := func(url string) map[string]status {
		var list struct{ Servers []status }
		newAPI(t, url, "").must(http.StatusOK, "GET", "/api/v1/projects/default/servers", nil, &list)
		out := map[string]status{}
		for _, s := range list.Servers {
			out[s.Name] = s
		}
		return out
	}
	before := read(g.url)["broken"]
	if before.Status.State != "failed" || before.Status.LastError == "" {
		t.Fatalf("broken before the restart: %+v; want failed with an error", before)
	}
	g.stop(t)
	again := startGateway(t, nil, map[string]string{"MCP_SERVER_DATA_DIR": g.dataDir, "MCP_SERVER_CONFIG": g.file})
	after := read(again.url)
	if b := after["broken"]; b.Status.State != "failed" || b.Status.LastError != before.Status.LastError || b.Status.SeenAt == nil {
		t.Errorf("broken after the restart: %+v; want failed with the error it had, and when it was seen", b)
	}
	if u := after["up"]; u.Status.State != "idle" || u.Status.LastError != "" {
		t.Errorf("up after the restart: %+v; want idle (it worked, and connects at its next use)", u)
	}
}
