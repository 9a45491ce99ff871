package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// ownedGatewayEnv is a gateway serving the sandbox tools and hosted
// server "keeper" on the engine instance inst, without warm sandbox
// containers unless extra sets MCP_SERVER_SANDBOX_WARM_POOL (the tests
// count containers).
func ownedGatewayEnv(t *testing.T, inst string, extra map[string]string) (env map[string]string, servers [][2]any) {
	t.Helper()
	e := enginetest.New(t)
	img := sandboxtest.Image(t, e)
	hostedImg := enginetest.GoImage(t, e, mcpFixturePkg)
	// What the gateways make carries inst: clean that up too.
	ge, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enginetest.Cleanup(t, ge); _ = ge.Close() })
	env = map[string]string{"MCP_SERVER_SANDBOX": "true", "MCP_SERVER_INSTANCE": inst,
		"MCP_SERVER_SANDBOX_IMAGE_PYTHON": img, "MCP_SERVER_SANDBOX_IMAGE_NODE": img, "MCP_SERVER_SANDBOX_MAX_TIMEOUT": "60s",
		"MCP_SERVER_SANDBOX_WARM_POOL": "0"}
	for k, v := range extra {
		env[k] = v
	}
	return env, [][2]any{{"keeper", map[string]any{"hosted": map[string]any{"image": hostedImg, "tool_prefix": "keep_"}}}}
}

// testInstance is a fresh engine instance name.
func testInstance(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// instanceContainers lists the running containers of inst by id.
func instanceContainers(t *testing.T, inst string) []string {
	t.Helper()
	e, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	list, err := e.List(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range list {
		if st.Running {
			ids = append(ids, st.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// workspaceVolumes lists the sandbox workspace volumes of inst.
func workspaceVolumes(t *testing.T, inst string) []engine.Volume {
	t.Helper()
	e, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	vs, err := e.ListVolumes(context.Background(), map[string]string{engine.LabelKind: sandbox.KindWorkspace})
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// ownedSession starts a sandbox session that wrote a file, and waits for
// the hosted server; it returns the session id.
func ownedSession(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo mine > owned.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)
	eventually(t, 90*time.Second, func() (bool, string) {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		for _, tool := range lt.Tools {
			if tool.Name == "keep_echo" {
				return true, ""
			}
		}
		return false, "keeper's tools not listed yet"
	})
	return sid
}

// stillServes: the session still has its file and the hosted server
// answers.
func stillServes(t *testing.T, cs *mcp.ClientSession, sid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat owned.txt", "session_id": sid}})
	if err != nil || res.IsError {
		t.Fatalf("the first gateway's session no longer serves: %v %+v", err, res)
	}
	if out := structured(t, res)["stdout"]; out != "mine\n" {
		t.Fatalf("the first gateway's session reads %q, want its file", out)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "keep_echo", Arguments: map[string]any{"text": "still here"}})
	if err != nil || res.IsError || text(t, res) != "still here" {
		t.Fatalf("the first gateway's hosted server no longer serves: %v %+v", err, res)
	}
}

// TestTwoStartsOnOneDataDir: with gateway A serving a sandbox session and
// a hosted server, a second start on the same data dir and port fails to
// bind and touches nothing; a third on the same data dir and another port
// starts, runs its own session (A's hosted server it serves through A), and stops, removing only its own. A keeps
// every container and answers the next call.
func TestTwoStartsOnOneDataDir(t *testing.T) {
	t.Parallel() // its own processes, data dir and engine instance
	dir := t.TempDir()
	env, servers := ownedGatewayEnv(t, testInstance("own-starts"), map[string]string{"MCP_SERVER_DATA_DIR": dir})
	a := startGateway(t, servers, env)
	cs := sdkConnect(t, a.url+"/mcp", nil)
	sid := ownedSession(t, cs)
	before := instanceContainers(t, env["MCP_SERVER_INSTANCE"])
	if len(before) != 2 {
		t.Fatalf("A runs %d containers, want 2 (a session and a hosted server)", len(before))
	}

	// B: same data dir, same port.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(a.url, "http://"))
	vars := map[string]string{"MCP_SERVER_PORT": port, "MCP_SERVER_CONFIG": a.file, "MCP_SERVER_SHUTDOWN_TIMEOUT": "10s"}
	for k, v := range env {
		vars[k] = v
	}
	logs := &testenv.Buffer{}
	err := run(context.Background(), nil, func(k string) string { return vars[k] }, nil, logs)
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("second start on A's port: %v, want a listen error\n%s", err, logs.String())
	}
	if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); !slices.Equal(got, before) {
		t.Fatalf("after a start that failed to bind: containers %v, want A's %v", got, before)
	}

	// C: same data dir, its own port: a full start (and sweep), its own
	// session, A's hosted server served through A (one copy per store
	// since issue 27), then a stop.
	c := startGateway(t, servers, env)
	ccs := sdkConnect(t, c.url+"/mcp", nil)
	ownedSession(t, ccs)
	if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); len(got) != 3 {
		t.Errorf("with C up: %d containers, want A's 2 and C's session", len(got))
	}
	_ = ccs.Close()
	c.stop(t)
	if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); !slices.Equal(got, before) {
		t.Fatalf("after C stopped: containers %v, want A's %v", got, before)
	}
	if strings.Contains(c.logs.String(), "removed containers") {
		t.Errorf("C removed containers at start:\n%s", c.logs.String())
	}
	stillServes(t, cs, sid)
}

// TestReplicaOwnership: two replicas on one PostgreSQL, the sandbox and a
// hosted server on each. Neither touches the other's containers, at start,
// in its periodic sweep or when it stops; containers of a gateway process
// that died (a lease not renewed) are removed by the survivor's sweep.
func TestReplicaOwnership(t *testing.T) {
	env, servers := ownedGatewayEnv(t, testInstance("own-replicas"), map[string]string{
		"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey, "MCP_SERVER_OWNER_LEASE": "3s"})
	inst := env["MCP_SERVER_INSTANCE"]
	a := startGateway(t, servers, env)
	acs := sdkConnect(t, a.url+"/mcp", nil)
	sid := ownedSession(t, acs)
	b := startGateway(t, servers, env)
	bcs := sdkConnect(t, b.url+"/mcp", nil)
	ownedSession(t, bcs)
	// A sandbox session each, and the one copy of the hosted server (A's:
	// replicas share it since issue 27).
	if got := instanceContainers(t, inst); len(got) != 3 {
		t.Fatalf("two replicas run %d containers, want a session each and one hosted server", len(got))
	}

	// A container of a replica that died: its owner id names a process
	// of another host whose lease is not in the store.
	dead, err := engine.New(engine.Options{Instance: inst, Owner: "0123abcd-1-4242-99-dead"})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	orphan, err := dead.Create(context.Background(), engine.Spec{Image: env["MCP_SERVER_SANDBOX_IMAGE_PYTHON"], Cmd: []string{"sleep", "600"},
		Labels: map[string]string{engine.LabelKind: "sandbox"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := dead.Start(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		_, err := dead.Inspect(context.Background(), orphan)
		return errors.Is(err, switchboard.ErrNotFound), "the dead replica's container is still there"
	})
	// Sweeps have run by now (every 3s): both replicas kept all.
	if got := instanceContainers(t, inst); len(got) != 3 {
		t.Fatalf("after the sweeps: %d containers, want the replicas' 3", len(got))
	}
	_ = bcs.Close()
	b.stop(t)
	if got := instanceContainers(t, inst); len(got) != 2 {
		t.Fatalf("after B stopped: %d containers, want A's 2", len(got))
	}
	stillServes(t, acs, sid)
}

// TestProjectDeleteRemovesEverything: a project running a sandbox session
// (with a file in its workspace) and a hosted server with a volume. Its
// deletion is refused naming them until asked with force=true; then
// nothing labelled with it is left on the engine, and a project re-created
// under the same id starts empty: the old session is unknown and the old
// file unreadable.
func TestProjectDeleteRemovesEverything(t *testing.T) {
	inst := testInstance("own-delete")
	env, _ := ownedGatewayEnv(t, inst, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "MCP_SERVER_SANDBOX_WARM_POOL": "1"})
	hostedImg := enginetest.GoImage(t, enginetest.New(t), mcpFixturePkg)
	g := startGateway(t, nil, env)
	admin := newAPI(t, g.url, adminToken)
	admin.createProject("p1")
	admin.must(201, "POST", "/api/v1/projects/p1/mcp/servers", map[string]any{"name": "keeper", "image": hostedImg, "volumes": []string{"/data"}}, nil)
	cs, _, err := dialMCP(g.url+"/projects/p1/mcp", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo tenant-one > secret.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %+v", err, res)
	}
	old, _ := structured(t, res)["session_id"].(string)
	eventually(t, 90*time.Second, func() (bool, string) {
		var st switchboard.HostedStatus
		admin.must(200, "GET", "/api/v1/projects/p1/mcp/servers/keeper", nil, &st)
		return st.Status == switchboard.HostedRunning, st.Status + " " + st.LastError
	})
	e, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// The session, its warm successor and the hosted server; their
	// volumes. The warm container is not the project's data: the
	// refusal below does not count it.
	eventually(t, 90*time.Second, func() (bool, string) {
		cs, vs, err := e.ProjectObjects(ctx, "p1")
		return err == nil && cs == 3 && vs == 3, fmt.Sprintf("p1 on the engine: %d containers, %d volumes, %v; want 3 and 3", cs, vs, err)
	})

	msg := admin.fails(409, "conflict", "DELETE", "/api/v1/projects/p1", nil)
	for _, want := range []string{"1 sandbox session", "1 hosted server", "force=true"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	admin.fails(400, "invalid", "DELETE", "/api/v1/projects/p1?force=maybe", nil)
	admin.must(204, "DELETE", "/api/v1/projects/p1?force=true", nil, nil)
	_ = cs.Close()
	if cs, vs, err := e.ProjectObjects(ctx, "p1"); err != nil || cs != 0 || vs != 0 {
		t.Fatalf("after the deletion, p1 on the engine: %d containers, %d volumes, %v; want none", cs, vs, err)
	}

	// The same id again: empty.
	admin.createProject("p1")
	cs, _, err = dialMCP(g.url+"/projects/p1/mcp", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat secret.txt", "session_id": old}})
	if code := sdkCode(t, err); code != -32602 {
		t.Fatalf("the old session in the new project: code %d (%v), want -32602", code, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat secret.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %+v", err, res)
	}
	if r := structured(t, res); r["exit_code"] == float64(0) || strings.Contains(r["stdout"].(string), "tenant-one") {
		t.Fatalf("the new project reads the old tenant's file: %+v", r)
	}
	// An empty project is deleted without force.
	admin.createProject("p2")
	admin.must(204, "DELETE", "/api/v1/projects/p2", nil, nil)
}

// TestKillRecoversContainers: after kill -9 of the real binary, the next
// start on the same data dir removes what the killed process left (its
// sandbox session, its warm sandbox container and hosted server
// container) before it starts anything, at once (not after the lease),
// and runs exactly one copy of the hosted server; the session's
// workspace is kept, the warm container's goes (volume and row).
func TestKillRecoversContainers(t *testing.T) {
	t.Parallel() // its own processes, data dir and engine instance
	bin := buildBinary(t)
	inst := testInstance("own-kill")
	envMap, servers := ownedGatewayEnv(t, inst, map[string]string{"MCP_SERVER_OWNER_LEASE": "1h", "MCP_SERVER_SANDBOX_WARM_POOL": "1"})
	dir := t.TempDir()
	file := dir + "/servers.json"
	writeServers(t, file, servers)
	// One port for both runs, as a gateway restarted in place keeps its
	// address (and so its replica URL).
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	env := []string{"MCP_SERVER_PORT=" + port, "MCP_SERVER_DATA_DIR=" + dir + "/data", "MCP_SERVER_CONFIG=" + file, "MCP_SERVER_LOG_FORMAT=json"}
	for k, v := range envMap {
		env = append(env, k+"="+v)
	}
	first := startBinary(t, bin, env...)
	cs := sdkConnect(t, first.url+"/mcp", nil)
	ownedSession(t, cs)
	var left []string
	eventually(t, 90*time.Second, func() (bool, string) {
		left = instanceContainers(t, inst)
		return len(left) == 3, fmt.Sprintf("the first gateway runs %d containers, want 3 (session, warm, hosted)", len(left))
	})
	if n := len(workspaceVolumes(t, inst)); n != 2 {
		t.Fatalf("the first gateway has %d workspace volumes, want 2 (the session's, the warm container's)", n)
	}
	_ = cs.Close()
	first.kill(t)

	second := startBinary(t, bin, env...)
	if !strings.Contains(second.logs.String(), "removed containers of a gateway process that ended") {
		t.Errorf("the restart did not say it removed the killed process's containers:\n%s", second.logs.String())
	}
	for _, id := range instanceContainers(t, inst) {
		if slices.Contains(left, id) {
			t.Errorf("container %s of the killed gateway still runs", id[:12])
		}
	}
	if n := len(workspaceVolumes(t, inst)); n != 1 {
		t.Errorf("after the restart: %d workspace volumes, want the session's only", n)
	}
	cs = sdkConnect(t, second.url+"/mcp", nil)
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	eventually(t, 90*time.Second, func() (bool, string) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "keep_echo", Arguments: map[string]any{"text": "again"}})
		return err == nil && !res.IsError, "the hosted server is not back"
	})
	if got := instanceContainers(t, inst); len(got) != 1 {
		t.Errorf("after the restart: %d containers, want the one hosted server", len(got))
	}
	// A restart in place is not a take-over from another replica.
	if logs := second.logs.String(); !strings.Contains(logs, "hosted server started again: this gateway's previous run ended") || strings.Contains(logs, "taken over") {
		t.Errorf("the restart's log does not say the hosted server started again (or says taken over):\n%s", logs)
	}
}
