package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

var sandboxTools = []string{"attach_workspace", "delete_workspace", "detach_workspace", "execute_code", "execute_command", "get_sessions",
	"get_volume_path", "list_workspaces", "restore_snapshot", "snapshot_workspace", "stop_session"}

// sandboxGateway starts a gateway serving the sandbox tools with the
// builder's image, in data dir dir; every container and volume it makes
// is removed when t ends.
func sandboxGateway(t *testing.T, dir string, extra map[string]string) *gateway {
	t.Helper()
	e := enginetest.New(t)
	img := sandboxtest.Image(t, e)
	// The gateway's own objects carry its instance: clean those too.
	ge, err := engine.New(engine.Options{Instance: storeInstance(t, dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enginetest.Cleanup(t, ge); _ = ge.Close() })
	env := map[string]string{"MCP_SERVER_SANDBOX": "true", "MCP_SERVER_DATA_DIR": dir,
		"MCP_SERVER_SANDBOX_IMAGE_PYTHON": img, "MCP_SERVER_SANDBOX_IMAGE_NODE": img,
		"MCP_SERVER_SANDBOX_MAX_SESSIONS": "3", "MCP_SERVER_SANDBOX_MAX_TIMEOUT": "60s"}
	for k, v := range extra {
		env[k] = v
	}
	return startGateway(t, [][2]any{{"up", stdioServer("up")}}, env)
}

// storeInstance is the instance name a gateway on data dir dir uses: the
// one its store keeps (made when the store is new).
func storeInstance(t *testing.T, dir string) string {
	t.Helper()
	st, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	name, err := instanceName(t.Context(), config.Config{DataDir: dir}, st)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text(t, res)), &fromText); err != nil {
		t.Fatalf("text content is not the JSON result: %v", err)
	}
	a, _ := json.Marshal(fromText)
	if string(a) != string(b) {
		t.Fatalf("text and structuredContent differ:\n%s\n%s", a, b)
	}
	return m
}

func sdkCode(t *testing.T, err error) int {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return int(we.Code)
}

// TestSandboxEndToEnd drives the sandbox tools through cmd/switchboard's
// run() with the official go-sdk client (streamable HTTP and legacy
// SSE) and raw HTTP: results, session reuse, every error code, status.
func TestSandboxEndToEnd(t *testing.T) {
	dir := t.TempDir()
	g := sandboxGateway(t, dir, map[string]string{"MCP_SERVER_SANDBOX_IMAGE_NODE": "switchboard-sandbox:missing"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	cs := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- r.Params:
			default:
			}
		},
	})

	// Listed beside the proxied tools, each with both schemas.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range lt.Tools {
		if slices.Contains(sandboxTools, tool.Name) {
			names = append(names, tool.Name)
			if tool.InputSchema == nil || tool.OutputSchema == nil || tool.Description == "" {
				t.Errorf("%s lacks a schema or description", tool.Name)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, sandboxTools) {
		t.Fatalf("sandbox tools listed: %v", names)
	}

	// A result as text and structuredContent; the session is reused.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "open('f','w').write('x'); print(6*7)"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code: %v %v", err, res)
	}
	r := structured(t, res)
	sid, _ := r["session_id"].(string)
	if r["stdout"] != "42\n" || r["session_created"] != true || r["exit_code"] != float64(0) || sid == "" {
		t.Fatalf("execute_code: %v", r)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat f; exit 5", "session_id": sid}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %v", err, res)
	}
	if r := structured(t, res); r["stdout"] != "x" || r["exit_code"] != float64(5) || r["session_created"] != false {
		t.Fatalf("reuse: %v", r)
	}
	// Output streams as progress when a token is sent.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo one; echo two", "session_id": sid},
		Meta: mcp.Meta{"progressToken": "tok"}})
	if err != nil || res.IsError {
		t.Fatal(err)
	}
	select {
	case p := <-progress:
		if p.ProgressToken != "tok" || !strings.Contains(p.Message, "one") {
			t.Fatalf("progress: %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification")
	}

	// Every error code through the go-sdk client.
	errCases := []struct {
		name string
		tool string
		args map[string]any
		code int
		want string
	}{
		{"missing code", "execute_code", map[string]any{}, -32602, "code"},
		{"unknown template", "execute_code", map[string]any{"code": "1", "template": "ruby"}, -32602, "template"},
		{"bad timeout", "execute_code", map[string]any{"code": "1", "timeout": -3}, -32602, "timeout"},
		{"unknown session", "execute_code", map[string]any{"code": "1", "session_id": "sb-nope"}, -32602, "session not found"},
		{"timeout above the cap", "execute_command", map[string]any{"command": "true", "timeout": 600}, -32602, "MCP_SERVER_SANDBOX_MAX_TIMEOUT"},
		{"missing image", "execute_code", map[string]any{"code": "1", "template": "node"}, -32603, "MCP_SERVER_SANDBOX_IMAGE_NODE"},
		{"unknown tool", "execute_cod", map[string]any{}, -32601, ""},
	}
	for _, tc := range errCases {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if code := sdkCode(t, err); code != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %d %v, want %d naming %q", tc.name, code, err, tc.code, tc.want)
		}
	}
	// The same codes over raw HTTP, as curl sends them.
	raw := newRaw(t, g.url+"/mcp")
	raw.initialize()
	for _, tc := range errCases {
		rep := raw.call("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args})
		if rep.code() != tc.code {
			t.Errorf("raw %s: %s", tc.name, rep.Body)
		}
	}
	// And over legacy SSE: the go-sdk client, then raw HTTP (POST to the
	// session's endpoint, the answer down the stream).
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	ls, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: g.url + "/sse", HTTPClient: &http.Client{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	for _, tc := range errCases {
		_, err := ls.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if code := sdkCode(t, err); code != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("legacy %s: got %d %v, want %d naming %q", tc.name, code, err, tc.code, tc.want)
		}
	}
	legacyRaw := rawLegacy(t, g.url)
	for i, tc := range errCases {
		if got := legacyRaw(100+i, tc.tool, tc.args); got != tc.code {
			t.Errorf("raw legacy %s: code %d, want %d", tc.name, got, tc.code)
		}
	}

	// Cancelling a call (the go-sdk client sends notifications/cancelled)
	// kills every process it started.
	cctx, ccancel := context.WithCancel(ctx)
	started := make(chan struct{})
	var once sync.Once
	canceller := sdkConnect(t, g.url+"/mcp", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { once.Do(func() { close(started) }) },
	})
	callDone := make(chan error, 1)
	go func() {
		_, err := canceller.CallTool(cctx, &mcp.CallToolParams{Name: "execute_command", Meta: mcp.Meta{"progressToken": "c"},
			Arguments: map[string]any{"command": "sleep 1003 & echo started; wait", "session_id": sid, "timeout": 50}})
		callDone <- err
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call to cancel streamed nothing")
	}
	ccancel()
	if err := <-callDone; err == nil {
		t.Fatal("a cancelled call returned a result")
	}
	// The gateway hears the cancellation asynchronously: wait for the
	// program's processes to be gone (a condition, with a deadline).
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "sh", "args": []string{"-c", `n=0; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null | grep -q '[s]leep 1003' && n=$((n+1)); done; echo $n`}, "session_id": sid}})
		if err != nil {
			t.Fatal(err)
		}
		if structured(t, res)["stdout"] == "0\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the cancelled call survive: %v", structured(t, res))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The per-project session cap (3): two more fill it.
	for range 2 {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "true"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "true"}})
	if code := sdkCode(t, err); code != -32600 || !strings.Contains(err.Error(), "MCP_SERVER_SANDBOX_MAX_SESSIONS") {
		t.Fatalf("session cap: %v", err)
	}

	// Another MCP session may use the session by id (no attach held).
	if out := raw.toolText("execute_command", map[string]any{"command": "cat f", "session_id": sid}); !strings.Contains(out, `"stdout":"x"`) {
		t.Fatalf("raw reuse: %s", out)
	}

	// Legacy SSE through the go-sdk client: the cap, and a session's use.
	_, err = ls.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "true"}})
	if code := sdkCode(t, err); code != -32600 || !strings.Contains(err.Error(), "MCP_SERVER_SANDBOX_MAX_SESSIONS") {
		t.Fatalf("legacy session cap: %v", err)
	}
	if code := legacyRaw(99, "execute_command", map[string]any{"command": "true"}); code != -32600 {
		t.Fatalf("raw legacy session cap: %d", code)
	}
	if _, err := ls.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "1", "session_id": "sb-nope"}}); sdkCode(t, err) != -32602 {
		t.Fatalf("legacy unknown session: %v", err)
	}
	res, err = ls.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo legacy", "session_id": sid}})
	if err != nil || structured(t, res)["stdout"] != "legacy\n" {
		t.Fatalf("legacy call: %v %v", err, res)
	}

	// Status JSON (GET / and GET /mcp) reports the sandbox.
	for _, path := range []string{"/", "/mcp"} {
		req, _ := http.NewRequest(http.MethodGet, g.url+path, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Sandbox struct {
				Enabled  bool              `json:"enabled"`
				Engine   string            `json:"engine"`
				Images   map[string]string `json:"images"`
				Sessions int               `json:"sessions"`
			} `json:"sandbox"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if !st.Sandbox.Enabled || st.Sandbox.Engine != "reachable" || st.Sandbox.Sessions != 3 ||
			!strings.HasPrefix(st.Sandbox.Images["python"], "present") || !strings.HasPrefix(st.Sandbox.Images["node"], "missing") {
			t.Fatalf("status %s: %+v", path, st.Sandbox)
		}
	}

	// Shutdown removes the session containers and keeps the workspaces.
	g.stop(t)
	ge, _ := engine.New(engine.Options{Instance: storeInstance(t, dir)})
	defer ge.Close()
	if st, err := ge.List(ctx, map[string]string{engine.LabelKind: "sandbox"}); err != nil || len(st) != 0 {
		t.Fatalf("containers after shutdown: %v %v", st, err)
	}
	if v, err := ge.ListVolumes(ctx, map[string]string{engine.LabelKind: "workspace"}); err != nil || len(v) != 3 {
		t.Fatalf("workspaces after shutdown: %v %v", v, err)
	}
}

// TestSandboxWorkspacesAcrossRestart: agent A attaches a workspace and
// works; B's attach fails naming A; A's MCP session ends, which detaches;
// the gateway restarts; B attaches and finds A's files.
func TestSandboxWorkspacesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	g := sandboxGateway(t, dir, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := sdkConnect(t, g.url+"/mcp", nil)
	b := sdkConnect(t, g.url+"/mcp", nil)
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (map[string]any, error) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return nil, err
		}
		if res.IsError {
			t.Fatalf("%s: %v", tool, res)
		}
		return structured(t, res), nil
	}
	r, err := call(a, "execute_command", map[string]any{"command": "echo a > a.txt; echo old > c.txt; echo x > d.txt"})
	if err != nil {
		t.Fatal(err)
	}
	ws := r["workspace_id"].(string)
	if _, err := call(a, "attach_workspace", map[string]any{"workspace_id": ws}); err != nil {
		t.Fatal(err)
	}
	_, err = call(b, "attach_workspace", map[string]any{"workspace_id": ws})
	if code := sdkCode(t, err); code != -32600 || !strings.Contains(err.Error(), a.ID()) {
		t.Fatalf("B's attach while A holds it: %v (A is %s)", err, a.ID())
	}
	if _, err := call(a, "execute_command", map[string]any{"command": "echo new > c.txt; rm d.txt; echo b > b.txt", "session_id": r["session_id"]}); err != nil {
		t.Fatal(err)
	}
	// A goes away: its session ends (DELETE), which detaches.
	_ = a.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := call(b, "attach_workspace", map[string]any{"workspace_id": ws})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workspace still held after A's session ended: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition with a deadline
	}
	if _, err := call(b, "detach_workspace", map[string]any{"workspace_id": ws}); err != nil {
		t.Fatal(err)
	}

	// Restart the gateway on the same data dir.
	g.stop(t)
	g2 := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{"MCP_SERVER_SANDBOX": "true", "MCP_SERVER_DATA_DIR": dir,
		"MCP_SERVER_SANDBOX_IMAGE_PYTHON": sandboxtestImage(t), "MCP_SERVER_SANDBOX_IMAGE_NODE": sandboxtestImage(t)})
	b2 := sdkConnect(t, g2.url+"/mcp", nil)
	list, err := call(b2, "list_workspaces", map[string]any{})
	if err != nil || !strings.Contains(mustJSON(list), ws) {
		t.Fatalf("workspaces after restart: %v %v", list, err)
	}
	s, err := call(b2, "attach_workspace", map[string]any{"workspace_id": ws})
	if err != nil {
		t.Fatal(err)
	}
	out, err := call(b2, "execute_command", map[string]any{"command": "for f in *; do printf '%s=' $f; cat $f; done", "session_id": s["session_id"]})
	if err != nil || out["stdout"] != "a.txt=a\nb.txt=b\nc.txt=new\n" {
		t.Fatalf("files after restart: %v %v", out, err)
	}

	// The same through the admin API.
	api := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, g2.url+"/api/v1/projects/default"+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	if code, m := api("POST", "/workspaces/"+ws+"/attach", `{"agent_session_id":"rest-agent"}`); code != 409 || !strings.Contains(mustJSON(m), b2.ID()) {
		t.Fatalf("REST attach while held: %d %v", code, m)
	}
	// A hold is exclusive on REST too, until the admin forces it (dev
	// mode: anyone is the admin).
	for _, op := range []string{"POST /snapshot", "POST /detach", "DELETE "} {
		method, sub, _ := strings.Cut(op, " ")
		if code, m := api(method, "/workspaces/"+ws+sub, ""); code != 409 || !strings.Contains(mustJSON(m), b2.ID()) || !strings.Contains(mustJSON(m), "force=true") {
			t.Fatalf("REST %s while held, without force: %d %v", op, code, m)
		}
	}
	code, snap := api("POST", "/workspaces/"+ws+"/snapshot?force=true", "")
	if code != 201 || snap["status"] != "snapshot" {
		t.Fatalf("REST snapshot: %d %v", code, snap)
	}
	if code, m := api("POST", "/workspaces/"+ws+"/detach?force=true", ""); code != 200 || m["status"] != "ready" {
		t.Fatalf("REST detach: %d %v", code, m)
	}
	code, restored := api("POST", "/snapshots/"+snap["workspace_id"].(string)+"/restore", "")
	if code != 201 || restored["status"] != "ready" {
		t.Fatalf("REST restore: %d %v", code, restored)
	}
	if code, m := api("POST", "/workspaces/"+restored["workspace_id"].(string)+"/attach", `{"agent_session_id":"rest-agent"}`); code != 200 || m["agent_session_id"] != "rest-agent" {
		t.Fatalf("REST attach: %d %v", code, m)
	}
	if code, m := api("GET", "/workspaces", ""); code != 200 || len(m["workspaces"].([]any)) != 3 {
		t.Fatalf("REST list: %d %v", code, m)
	}
	if code, _ := api("POST", "/workspaces/nope/detach", ""); code != 404 {
		t.Fatalf("REST unknown workspace: %d", code)
	}
	// GET shows who held it: A (after its own call), B once A's session
	// ended, B's new MCP session after the restart.
	code, one := api("GET", "/workspaces/"+ws, "")
	hist, _ := one["attach_history"].([]any)
	if code != 200 || len(hist) != 3 {
		t.Fatalf("REST get: %d %v", code, one)
	}
	if h := hist[1].(map[string]any); h["previous_agent_session_id"] != a.ID() || h["agent_session_id"] != b.ID() {
		t.Fatalf("attach history: %v (A %s, B %s)", hist, a.ID(), b.ID())
	}
	if h := hist[2].(map[string]any); h["previous_agent_session_id"] != b.ID() || h["agent_session_id"] != b2.ID() {
		t.Fatalf("attach history after the restart: %v (B %s, B2 %s)", hist, b.ID(), b2.ID())
	}
	// DELETE a snapshot: 204, then it is gone; again: 404.
	code, snap2 := api("POST", "/workspaces/"+ws+"/snapshot", "")
	if code != 201 {
		t.Fatalf("REST snapshot: %d %v", code, snap2)
	}
	snapID := snap2["workspace_id"].(string)
	if code, m := api("DELETE", "/workspaces/"+snapID, ""); code != 204 {
		t.Fatalf("REST delete: %d %v", code, m)
	}
	if code, _ := api("GET", "/workspaces/"+snapID, ""); code != 404 {
		t.Fatalf("REST get of a deleted snapshot: %d", code)
	}
	if code, _ := api("DELETE", "/workspaces/"+snapID, ""); code != 404 {
		t.Fatalf("REST delete of a deleted snapshot: %d", code)
	}

	// The project switch: off removes the tools, on brings them back.
	if code, _ := api("PUT", "/sandbox", `{"enabled":false}`); code != 200 {
		t.Fatalf("switch off: %d", code)
	}
	_, err = b2.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "true"}})
	if sdkCode(t, err) != -32601 {
		t.Fatalf("sandbox tool after the switch went off: %v", err)
	}
	if code, m := api("GET", "/sandbox", ""); code != 200 || m["enabled"] != false {
		t.Fatalf("switch state: %d %v", code, m)
	}
	api("PUT", "/sandbox", `{"enabled":true}`)
	if _, err := call(b2, "execute_command", map[string]any{"command": "true"}); err != nil {
		t.Fatalf("sandbox tool after the switch went on: %v", err)
	}

	// And through the CLI.
	cli := func(args ...string) string {
		t.Helper()
		var out, errb strings.Builder
		if err := run(ctx, append(args, "--url", g2.url), func(string) string { return "" }, &out, &errb); err != nil {
			t.Fatalf("switchboard %v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	if out := cli("workspaces", "ls"); !strings.Contains(out, ws) || !strings.Contains(out, "snapshot") {
		t.Fatalf("workspaces ls:\n%s", out)
	}
	// rest-agent holds it: refused without --force.
	var errb strings.Builder
	if err := run(ctx, []string{"workspaces", "snapshot", restored["workspace_id"].(string), "--url", g2.url}, func(string) string { return "" }, io.Discard, &errb); err == nil || !strings.Contains(err.Error()+errb.String(), "rest-agent") {
		t.Fatalf("workspaces snapshot of a held workspace without --force: %v %s", err, errb.String())
	}
	if out := cli("workspaces", "snapshot", restored["workspace_id"].(string), "--force"); !strings.HasPrefix(out, "snapshot ") {
		t.Fatalf("workspaces snapshot: %s", out)
	}
	if out := cli("workspaces", "detach", restored["workspace_id"].(string), "--force"); !strings.HasPrefix(out, "detached") {
		t.Fatalf("workspaces detach: %s", out)
	}
	if out := cli("workspaces", "show", ws); !strings.Contains(out, "attach history") || !strings.Contains(out, b2.ID()) {
		t.Fatalf("workspaces show:\n%s", out)
	}
	if out := cli("workspaces", "rm", restored["workspace_id"].(string)); !strings.HasPrefix(out, "deleted workspace") {
		t.Fatalf("workspaces rm: %s", out)
	}
	if out := cli("workspaces", "ls"); strings.Contains(out, "\n"+restored["workspace_id"].(string)+" ") {
		t.Fatalf("workspaces ls after rm:\n%s", out)
	}
	if out := cli("sandbox", "disable"); !strings.Contains(out, "off") {
		t.Fatalf("sandbox disable: %s", out)
	}
}

// rawLegacy opens a legacy SSE session by hand and returns what calls a
// tool through it and returns the JSON-RPC error code of the answer (0
// for a result).
func rawLegacy(t *testing.T, base string) func(id int, tool string, args any) int {
	t.Helper()
	next := openLegacySSE(t, base+"/sse")
	ep := next("sessionId=")
	post := func(body string) { postLegacy(t, base+ep[1], body) }
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	next(`"id":1`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return func(id int, tool string, args any) int {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
		post(string(body))
		e := next(fmt.Sprintf(`"id":%d`, id))
		var rep struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(e[1]), &rep); err != nil {
			t.Fatalf("legacy answer %s: %v", e[1], err)
		}
		if rep.Error == nil {
			return 0
		}
		return rep.Error.Code
	}
}

func sandboxtestImage(t *testing.T) string {
	return sandboxtest.Image(t, enginetest.New(t))
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestSandboxHostVolumes: MCP_SERVER_SANDBOX_VOLUMES with a host
// directory, as the issue writes it, through run() and the go-sdk client:
// the host's file is read in the session, the session's file lands on the
// host, and get_volume_path reports the host path and the workspace.
func TestSandboxHostVolumes(t *testing.T) {
	host := t.TempDir()
	if err := os.Chmod(host, 0o777); err != nil { // sessions run as uid 1000
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := sandboxGateway(t, t.TempDir(), map[string]string{"MCP_SERVER_SANDBOX_VOLUMES": `["` + host + `:/sandbox/data"]`})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := sdkConnect(t, g.url+"/mcp", nil)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat /sandbox/data/in.txt; echo out > /sandbox/data/out.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %v", err, res)
	}
	r := structured(t, res)
	if r["stdout"] != "host\n" || r["exit_code"] != float64(0) {
		t.Fatalf("reading the host directory: %v", r)
	}
	if b, err := os.ReadFile(filepath.Join(host, "out.txt")); err != nil || string(b) != "out\n" {
		t.Fatalf("the session's file on the host: %q %v", b, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_volume_path", Arguments: map[string]any{"session_id": r["session_id"]}})
	if err != nil {
		t.Fatal(err)
	}
	vols, _ := structured(t, res)["volumes"].([]any)
	want := []map[string]any{
		{"source": r["workspace_id"], "type": "volume", "container_path": "/workspace", "kind": "workspace"},
		{"source": host, "type": "bind", "container_path": "/sandbox/data", "kind": "configured"},
	}
	if len(vols) != len(want) {
		t.Fatalf("get_volume_path: %v", vols)
	}
	for i, w := range want {
		v := vols[i].(map[string]any)
		for k, x := range w {
			if k == "source" && i == 0 {
				if s, _ := v[k].(string); !strings.HasSuffix(s, x.(string)) {
					t.Errorf("workspace volume %q does not name workspace %v", s, x)
				}
				continue
			}
			if v[k] != x {
				t.Errorf("volume %d: %s = %v, want %v", i, k, v[k], x)
			}
		}
	}
}

// Hostile MCP_SERVER_SANDBOX_VOLUMES stop run() before it listens, with
// an error naming the variable.
func TestSandboxHostileVolumesRefused(t *testing.T) {
	for name, v := range map[string]string{
		"relative":      `["data/x:/sandbox/data"]`,
		"dot dot":       `["/srv/../etc:/sandbox/etc"]`,
		"root":          `["/:/host"]`,
		"docker socket": `["/var/run/docker.sock:/var/run/docker.sock"]`,
		"run socket":    `["/run/docker.sock:/sandbox/sock"]`,
		"workspace":     `["/srv/data:/workspace"]`,
		"target":        `["/srv/data:sandbox/data"]`,
	} {
		t.Run(name, func(t *testing.T) {
			vars := map[string]string{"MCP_SERVER_PORT": "0", "MCP_SERVER_DATA_DIR": t.TempDir(), "MCP_SERVER_SANDBOX_VOLUMES": v}
			// Accepted by mistake, run would serve until the deadline.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := run(ctx, nil, func(k string) string { return vars[k] }, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "MCP_SERVER_SANDBOX_VOLUMES:") {
				t.Fatalf("run: %v, want a configuration error naming MCP_SERVER_SANDBOX_VOLUMES", err)
			}
		})
	}
}

// TestSandboxNoEngine: with no Docker engine at DOCKER_HOST, a sandbox
// call is -32603 naming DOCKER_HOST, through the go-sdk client and raw
// HTTP, on streamable HTTP and legacy SSE; the status says why.
func TestSandboxNoEngine(t *testing.T) {
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_SANDBOX": "true", "DOCKER_HOST": "unix:///nonexistent/docker.sock"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := map[string]any{"code": "print(1)"}
	cs := sdkConnect(t, g.url+"/mcp", nil)
	// Listed, but not as ready: each description begins saying why not.
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range lt.Tools {
		if slices.Contains(sandboxTools, tool.Name) && (!strings.HasPrefix(tool.Description, "UNAVAILABLE now") || !strings.Contains(tool.Description, "DOCKER_HOST")) {
			t.Errorf("%s is advertised without saying the engine is missing: %q", tool.Name, tool.Description)
		}
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: args})
	if code := sdkCode(t, err); code != -32603 || !strings.Contains(err.Error(), "DOCKER_HOST") || strings.Contains(err.Error(), "/nonexistent") {
		t.Errorf("streamable, go-sdk: %d %v", code, err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	ls, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: g.url + "/sse", HTTPClient: &http.Client{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	_, err = ls.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: args})
	if code := sdkCode(t, err); code != -32603 || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("legacy, go-sdk: %d %v", code, err)
	}
	raw := newRaw(t, g.url+"/mcp")
	raw.initialize()
	if rep := raw.call("tools/call", map[string]any{"name": "execute_code", "arguments": args}); rep.code() != -32603 || !strings.Contains(string(rep.Body), "DOCKER_HOST") {
		t.Errorf("streamable, raw: %s", rep.Body)
	}
	if code := rawLegacy(t, g.url)(7, "execute_code", args); code != -32603 {
		t.Errorf("legacy, raw: %d", code)
	}
	req, _ := http.NewRequest(http.MethodGet, g.url+"/", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Sandbox struct {
			Engine string `json:"engine"`
		} `json:"sandbox"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || !strings.Contains(st.Sandbox.Engine, "DOCKER_HOST") {
		t.Errorf("status: %+v %v", st, err)
	}
	// Without an engine there is nothing of a project on it: deleting
	// one works as it always did.
	admin := newAPI(t, g.url, "")
	admin.createProject("gone")
	admin.must(http.StatusNoContent, "DELETE", "/api/v1/projects/gone", nil, nil)
}

// TestWorkspaceHoldOverREST: a workspace an agent session holds is
// refused (409 naming the holder) to the admin API's detach, snapshot and
// delete called with a project token, and with the admin token unless it
// gives force=true; force with a project token is 403. Forced by the
// admin, they act; a workspace nobody holds needs no force.
func TestWorkspaceHoldOverREST(t *testing.T) {
	g := sandboxGateway(t, t.TempDir(), map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	admin := newAPI(t, g.url, adminToken)
	tok := admin.createToken("default", "agent")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A 2025 MCP session: the agent session that holds the workspace.
	b := &bearer{}
	b.set(tok.Token)
	holder, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: g.url + "/mcp", HTTPClient: &http.Client{Transport: b}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	res, err := holder.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo mine > m.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command: %v %+v", err, res)
	}
	ws, _ := structured(t, res)["workspace_id"].(string)
	res, err = holder.CallTool(ctx, &mcp.CallToolParams{Name: "attach_workspace", Arguments: map[string]any{"workspace_id": ws}})
	if err != nil || res.IsError {
		t.Fatalf("attach_workspace: %v %+v", err, res)
	}
	held, _ := structured(t, res)["session_id"].(string)
	project := admin.as(tok.Token)
	path := "/api/v1/projects/default/workspaces/" + ws
	ops := [][2]string{{"POST", path + "/snapshot"}, {"POST", path + "/detach"}, {"DELETE", path}}
	for _, op := range ops {
		for name, c := range map[string]*apiClient{"project token": project, "admin token": admin} {
			if msg := c.fails(409, "conflict", op[0], op[1], nil); !strings.Contains(msg, holder.ID()) {
				t.Errorf("%s %s with the %s: %q does not name the holder %s", op[0], op[1], name, msg, holder.ID())
			}
		}
		project.fails(403, "forbidden", op[0], op[1]+"?force=true", nil)
	}
	// Still the holder's, files and all.
	res, err = holder.CallTool(ctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat m.txt", "session_id": held}})
	if err != nil || res.IsError || structured(t, res)["stdout"] != "mine\n" {
		t.Fatalf("the holder after the refusals: %v %+v", err, res)
	}
	admin.fails(400, "invalid", "POST", path+"/snapshot?force=maybe", nil)
	admin.must(201, "POST", path+"/snapshot?force=true", nil, nil)
	admin.must(200, "POST", path+"/detach?force=true", nil, nil)
	// Nobody holds it now: the project token deletes it without force.
	project.must(204, "DELETE", path, nil, nil)
}
