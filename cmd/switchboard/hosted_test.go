package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

const mcpFixturePkg = "github.com/switchboard-mcp/switchboard/internal/mcptest/mcpfixture"

// TestHostedEndToEnd runs the gateway (run, as main does) with one hosted
// server from the servers file and one registered through the admin API,
// and has the official go-sdk client list and call their tools through
// /mcp. Stopping the gateway removes both containers.
func TestHostedEndToEnd(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, mcpFixturePkg)
	g := startGateway(t, [][2]any{
		{"up", stdioServer("up")},
		{"filefx", map[string]any{"hosted": map[string]any{"image": image, "tool_prefix": "file_"}}},
	}, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	admin.must(200, "PUT", "/api/v1/projects/default/secrets/FX_TOKEN", map[string]string{"value": "tok-e2e-9876"}, nil)

	// Bad registrations: 4xx naming the problem, nothing stored.
	if msg := admin.fails(400, "invalid", "POST", "/api/v1/mcp/servers", map[string]any{"name": "x", "image": image, "imgae": "y"}); !strings.Contains(msg, "imgae") {
		t.Errorf("unknown field message: %s", msg)
	}
	// An absent image is refused at once when it may not be pulled (with
	// pulls allowed it is registered as "pulling": issue 24).
	if msg := admin.fails(400, "invalid", "POST", "/api/v1/mcp/servers", map[string]any{"name": "x", "image": "switchboard-test/absent:1", "pull_policy": "never"}); !strings.Contains(msg, "not present") {
		t.Errorf("missing image message: %s", msg)
	}
	admin.fails(400, "invalid", "POST", "/api/v1/mcp/servers", map[string]any{"name": "x", "image": image, "resource_limits": map[string]any{"cpu": -1}})
	admin.fails(409, "conflict", "POST", "/api/v1/mcp/servers", map[string]any{"name": "up", "image": image})
	// Hosting a container is the admin's.
	admin.as("").fails(401, "unauthorized", "POST", "/api/v1/mcp/servers", map[string]any{"name": "x", "image": image})

	var created switchboard.HostedStatus
	admin.must(201, "POST", "/api/v1/mcp/servers", map[string]any{
		"name": "apifx", "image": image, "tool_prefix": "api_",
		"environment": map[string]string{"FX_TOKEN": "${FX_TOKEN}", "FX_LITERAL": "lit-e2e-5432"},
	}, &created)
	if created.ID == "" || strings.Join(created.Config.Environment, ",") != "FX_LITERAL,FX_TOKEN" {
		t.Errorf("created = %+v", created)
	}
	for _, name := range []string{"apifx", "filefx"} {
		eventually(t, 60*time.Second, func() (bool, string) {
			var st switchboard.HostedStatus
			admin.must(200, "GET", "/api/v1/mcp/servers/"+name, nil, &st)
			return st.Status == switchboard.HostedRunning, st.Status + " " + st.LastError
		})
	}
	var list struct {
		Servers []switchboard.HostedStatus `json:"servers"`
	}
	raw := admin.must(200, "GET", "/api/v1/projects/default/mcp/servers", nil, &list)
	if len(list.Servers) != 2 || strings.Contains(string(raw), "tok-e2e") || strings.Contains(string(raw), "lit-e2e") {
		t.Errorf("list = %s", raw)
	}

	cs, _, err := dialMCP(g.url+"/mcp", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range lt.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"echo", "api_echo", "file_echo", "api_write_file"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s", want)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "api_echo", Arguments: map[string]any{"text": "through a container"}})
	if err != nil || text(t, res) != "through a container" {
		t.Fatalf("api_echo: %v", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "api_env", Arguments: map[string]any{}})
	if err != nil || !strings.Contains(text(t, res), "FX_TOKEN=tok-e2e-9876") || !strings.Contains(text(t, res), "FX_LITERAL=lit-e2e-5432") {
		t.Fatalf("api_env: %v", err)
	}
	// The literal value is stored sealed: nothing in the data directory
	// (the database and its journal) holds it in clear.
	err = filepath.WalkDir(g.dataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, []byte("lit-e2e-5432")) {
			t.Errorf("%s holds a hosted server's literal environment value in clear", filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Logged like any other call.
	calls := admin.waitCalls("default", "?server=apifx", 2)
	if calls[0].Server != "apifx" {
		t.Errorf("call log = %+v", calls)
	}

	// /call: any method; a JSON-RPC error keeps code, message and data.
	var out struct {
		Result json.RawMessage `json:"result"`
	}
	admin.must(200, "POST", "/api/v1/mcp/servers/apifx/call", map[string]any{"method": "tools/list", "params": map[string]any{}}, &out)
	if !strings.Contains(string(out.Result), `"read_file"`) {
		t.Errorf("/call tools/list = %.200s", out.Result)
	}
	var rpcOut struct {
		Error struct {
			Code    string                `json:"code"`
			JSONRPC *switchboard.RPCError `json:"jsonrpc"`
		} `json:"error"`
	}
	admin.must(400, "POST", "/api/v1/mcp/servers/apifx/call", map[string]any{"method": "tools/call", "params": map[string]any{"name": "rpc_error", "arguments": map[string]any{}}}, &rpcOut)
	if e := rpcOut.Error; e.Code != "invalid" || e.JSONRPC == nil || e.JSONRPC.Code != -32602 || !jsonEqual(e.JSONRPC.Data, json.RawMessage(`{"field":"x"}`)) {
		t.Errorf("/call rpc_error = %+v", rpcOut.Error)
	}
	var logs struct {
		Logs string `json:"logs"`
	}
	admin.must(200, "GET", "/api/v1/mcp/servers/apifx/logs?tail=20", nil, &logs)
	if !strings.Contains(logs.Logs, "serving on stdio") || strings.Contains(logs.Logs, "tok-e2e") {
		t.Errorf("logs = %q", logs.Logs)
	}

	// The CLI over the same API.
	cli := newCLI(t, map[string]string{"SWITCHBOARD_URL": g.url, "SWITCHBOARD_TOKEN": adminToken})
	if out := cli.ok("hosted", "ls"); !strings.Contains(out, "apifx") || !strings.Contains(out, "running") || !strings.Contains(out, "filefx") {
		t.Errorf("hosted ls:\n%s", out)
	}
	if out := cli.ok("hosted", "show", "apifx"); !strings.Contains(out, `"status": "running"`) || strings.Contains(out, "tok-e2e") || strings.Contains(out, "lit-e2e") {
		t.Errorf("hosted show:\n%s", out)
	}
	if out := cli.ok("hosted", "logs", "apifx", "--tail", "5"); strings.Contains(out, "tok-e2e") {
		t.Errorf("hosted logs show the secret:\n%s", out)
	}
	info, err := eng.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cli.ok("hosted", "add", "clifx", "--image", image, "--env", "A=b", "--volume", "/data", "--cpu", "0.25", "--memory", "64m", "--tool-prefix", "cli_", "--runtime", info.DefaultRuntime)
	var shown switchboard.HostedStatus
	if out := cli.ok("hosted", "show", "clifx"); json.Unmarshal([]byte(out), &shown) != nil || shown.Config.ToolPrefix != "cli_" || shown.Config.Runtime != info.DefaultRuntime {
		t.Errorf("hosted add --tool-prefix cli_ --runtime %s did not register both:\n%s", info.DefaultRuntime, out)
	}
	if out := cli.ok("hosted", "restart", "clifx"); !strings.Contains(out, "clifx") {
		t.Errorf("hosted restart: %s", out)
	}
	if _, _, err := cli.run("", "hosted", "add", "bad", "--image", image, "--memory", "lots"); err == nil || !strings.Contains(err.Error(), "memory") {
		t.Errorf("hosted add with a bad limit: %v", err)
	}
	cli.ok("hosted", "rm", "clifx")
	if vs, _ := eng.ListVolumes(context.Background(), nil); len(vs) != 0 {
		t.Errorf("volumes after hosted rm: %+v", vs)
	}

	g.stop(t)
	left, err := eng.List(context.Background(), map[string]string{engine.LabelKind: "mcp_server"})
	if err != nil || len(left) != 0 {
		t.Errorf("containers after the gateway stopped: %+v, %v", left, err)
	}
}

// TestHostedEngineDown: with the engine unreachable the gateway starts and
// serves its other servers; the hosted one reports why it does not run.
func TestHostedEngineDown(t *testing.T) {
	g := startGateway(t, [][2]any{
		{"up", stdioServer("up")},
		{"boxed", map[string]any{"hosted": map[string]any{"image": "switchboard-test/any:1"}}},
	}, map[string]string{"DOCKER_HOST": "unix://" + t.TempDir() + "/no-docker.sock", "MCP_SERVER_HOSTED_RESTART_DELAY": "100ms"})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	if got := c.toolText("echo", map[string]string{"text": "still serving"}); got != "still serving" {
		t.Errorf("echo = %q", got)
	}
	admin := newAPI(t, g.url, "")
	eventually(t, opTimeout, func() (bool, string) {
		var st switchboard.HostedStatus
		admin.must(200, "GET", "/api/v1/mcp/servers/boxed", nil, &st)
		return st.Status == switchboard.HostedFailed && strings.Contains(st.LastError, "not reachable") && st.Runtime == "",
			st.Status + ": " + st.LastError + "; runtime " + st.Runtime + " (want none before a container ran)"
	})
	admin.fails(503, "unavailable", "POST", "/api/v1/mcp/servers", map[string]any{"name": "x", "image": "switchboard-test/any:1"})
}

// TestHostedLimits: resource_limits in the specification's string form
// and as numbers register (201) and the container gets them; a limit that
// is no amount, or above what the engine's host has, is 400 naming the
// field, and nothing of it is stored.
func TestHostedLimits(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, mcpFixturePkg)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	ctx := context.Background()

	for name, tc := range map[string]struct {
		limits      map[string]any
		cpu         float64
		memoryBytes int64
	}{
		"strings": {map[string]any{"cpu": "1", "memory": "1G"}, 1, 1 << 30},
		"numbers": {map[string]any{"cpu": 0.5, "memory": 268435456}, 0.5, 256 << 20},
	} {
		var st switchboard.HostedStatus
		admin.must(201, "POST", "/api/v1/mcp/servers", map[string]any{"name": name, "image": image, "resource_limits": tc.limits}, &st)
		admin.must(200, "GET", "/api/v1/mcp/servers/"+name, nil, &st)
		if st.Limits.CPU != tc.cpu || st.Limits.MemoryBytes != tc.memoryBytes {
			t.Errorf("%s: limits in status = %+v, want %g cores and %d bytes", name, st.Limits, tc.cpu, tc.memoryBytes)
		}
		state, err := eng.Inspect(ctx, st.ContainerID)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Under gVisor the container's cgroup also holds the sandbox's own
		// memory (the gateway takes runsc when the engine has it).
		mem := tc.memoryBytes
		if strings.Contains(state.Runtime, "runsc") {
			_, mem = engine.GVisorHostLimits(0, mem)
		}
		if state.NanoCPUs != int64(tc.cpu*1e9) || state.MemoryBytes != mem {
			t.Errorf("%s: the container got %d nano-CPUs and %d bytes, want %g cores and %d bytes", name, state.NanoCPUs, state.MemoryBytes, tc.cpu, mem)
		}
	}

	for name, tc := range map[string]struct {
		limits map[string]any
		field  string
	}{
		"memory above the host": {map[string]any{"memory": "999999t"}, "memory"},
		"cpu above the host":    {map[string]any{"cpu": "100000"}, "cpu"},
		"cpu not an amount":     {map[string]any{"cpu": true}, "cpu"},
		"memory not a size":     {map[string]any{"cpu": "1", "memory": "1 gigabyte"}, "memory"},
	} {
		msg := admin.fails(400, "invalid", "POST", "/api/v1/mcp/servers", map[string]any{"name": "refused", "image": image, "resource_limits": tc.limits})
		if !strings.Contains(msg, "resource_limits."+tc.field+" ") {
			t.Errorf("%s: message %q does not name resource_limits.%s", name, msg, tc.field)
		}
	}
	admin.fails(404, "not_found", "GET", "/api/v1/mcp/servers/refused", nil)
	if left, err := eng.List(ctx, map[string]string{engine.LabelKind: "mcp_server"}); err != nil || len(left) != 2 {
		t.Errorf("containers = %d, %v; want the two registered", len(left), err)
	}
}

// TestHostedCLISynopsis (issue 20, item 10): every flag of a hosted
// command is in the synopsis its help starts with (--tool-prefix of
// hosted add was only in the flag list).
func TestHostedCLISynopsis(t *testing.T) {
	global := map[string]bool{"gateway": true, "url": true, "project": true, "p": true, "token": true, "json": true, "timeout": true}
	for _, cmd := range hostedCommands {
		var out strings.Builder
		args := append(strings.Fields(cmd.name), "-h")
		if err := run(context.Background(), args, func(string) string { return "" }, &out, io.Discard); err != nil {
			t.Fatalf("run %v: %v", args, err)
		}
		for line := range strings.Lines(out.String()) {
			name, ok := strings.CutPrefix(line, "  -")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
			if !global[name] && !strings.Contains(cmd.args, "--"+name) {
				t.Errorf("%s: --%s is not in the synopsis %q", cmd.name, name, cmd.args)
			}
		}
	}
}

// TestHostedHTTPSource (issue 34, item 11): a hosted server reached over
// HTTP (stdio_bridge false) is listed as hosted, not built-in, among the
// project's servers.
func TestHostedHTTPSource(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, mcpFixturePkg)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	admin.must(201, "POST", "/api/v1/mcp/servers", map[string]any{"name": "web", "image": image, "stdio_bridge": false, "port": 8000,
		"network": "bridge", "environment": map[string]string{"MCPFIXTURE_HTTP": ":8000"}}, nil)
	var source string
	eventually(t, opTimeout, func() (bool, string) {
		var list struct {
			Servers []struct{ Name, Source string } `json:"servers"`
		}
		admin.must(200, "GET", "/api/v1/projects/default/servers", nil, &list)
		for _, s := range list.Servers {
			if s.Name == "web" {
				source = s.Source
				return true, ""
			}
		}
		return false, "the hosted server is not listed yet"
	})
	if source != "hosted" {
		t.Fatalf("the HTTP hosted server's source is %q, want hosted", source)
	}
}

// TestHostedFailedPullListed (issue 34, item 10): a hosted server whose
// image cannot be pulled reads failed, with the pull's error, among the
// project's servers before any client lists tools (it read idle).
func TestHostedFailedPullListed(t *testing.T) {
	eng := enginetest.New(t)
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_INSTANCE": eng.Instance(), "MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	// Nothing listens on port 1: the pull fails at once.
	admin.must(201, "POST", "/api/v1/mcp/servers", map[string]any{"name": "unpullable", "image": "127.0.0.1:1/switchboard-test/none:1", "pull_policy": "always"}, nil)
	var st struct{ State, LastError string }
	eventually(t, opTimeout, func() (bool, string) {
		var list struct {
			Servers []struct {
				Name   string
				Status struct {
					State     string `json:"state"`
					LastError string `json:"last_error"`
				} `json:"status"`
			} `json:"servers"`
		}
		admin.must(200, "GET", "/api/v1/projects/default/servers", nil, &list)
		for _, s := range list.Servers {
			if s.Name == "unpullable" {
				st.State, st.LastError = s.Status.State, s.Status.LastError
			}
		}
		return st.State == "failed", "the unpullable server reads " + st.State
	})
	if !strings.Contains(st.LastError, "127.0.0.1:1/switchboard-test/none:1") {
		t.Errorf("its error %q does not name the image", st.LastError)
	}
}
