package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/internal/pgtest"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// replicaSet starts n gateway processes (the real binary, so one can be
// killed with -9) on one PostgreSQL and one engine instance, sharing the
// secret key, with short leases and ticks.
type replicaSet struct {
	t    *testing.T
	bin  string
	env  []string
	inst string
}

func newReplicaSet(t *testing.T) *replicaSet {
	e := enginetest.New(t)
	img := sandboxtest.Image(t, e)
	inst := testInstance("replicas")
	ge, err := engine.New(engine.Options{Instance: inst})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { enginetest.Cleanup(t, ge); _ = ge.Close() })
	return &replicaSet{t: t, bin: buildBinary(t), inst: inst, env: []string{
		"MCP_SERVER_PORT=0", "MCP_SERVER_LOG_FORMAT=json", "MCP_SERVER_DATABASE_URL=" + pgtest.NewDB(t),
		"MCP_SERVER_SECRET_KEY=" + testSecretKey, "MCP_SERVER_INSTANCE=" + inst,
		"MCP_SERVER_SANDBOX_IMAGE_PYTHON=" + img, "MCP_SERVER_SANDBOX_IMAGE_NODE=" + img,
		"MCP_SERVER_OWNER_LEASE=3s", "MCP_SERVER_REPLICA_TICK=200ms", "MCP_SERVER_SYNC_INTERVAL=200ms",
		"MCP_SERVER_SHUTDOWN_TIMEOUT=20s",
	}}
}

func (rs *replicaSet) start() *binGateway { return rs.startIn(rs.t.TempDir()) }

// startIn starts a replica on data dir dir: a replica restarted on its
// own dir replays the call-log spool its predecessor left.
func (rs *replicaSet) startIn(dir string) *binGateway {
	return startBinary(rs.t, rs.bin, append(rs.env, "MCP_SERVER_DATA_DIR="+dir)...)
}

// watchDuplicates samples the instance's running hosted containers every
// 100 ms until the test ends and fails it when a sample holds two.
func (rs *replicaSet) watchDuplicates() (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var samples atomic.Int64
	e, err := engine.New(engine.Options{Instance: rs.inst})
	if err != nil {
		rs.t.Fatal(err)
	}
	wg.Go(func() {
		defer e.Close()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			// Two running containers of one row or session (by ref) are
			// two copies; warm pool containers carry no session yet.
			for _, kind := range []string{hosted.KindMCPServer, sandbox.KindSession} {
				list, err := e.List(ctx, map[string]string{engine.LabelKind: kind})
				if err != nil {
					continue
				}
				samples.Add(1)
				byRef := map[string]int{}
				for _, st := range list {
					if st.Running && st.Labels[engine.LabelRef] != "" {
						byRef[st.Labels[engine.LabelRef]]++
					}
				}
				for ref, n := range byRef {
					if n > 1 {
						rs.t.Errorf("a sample holds %d running containers of %s %s", n, kind, ref)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() int { cancel(); wg.Wait(); return int(samples.Load()) }
}

// hostedOwner is a replica's view of the server's owner.
func hostedOwner(t *testing.T, g *binGateway) switchboard.HostedStatus {
	var st switchboard.HostedStatus
	newAPI(t, g.url, "").must(http.StatusOK, "GET", "/api/v1/mcp/servers/notes", nil, &st)
	return st
}

// TestHostedReplicas: three replicas share one hosted server. Registered
// on A, it runs once (A's), is listed on B and C with A as its owner,
// and a file written through B's call is read through C's (one /data).
// kill -9 of the owner: another replica takes it over and the next call
// answers with the file still there. SIGTERM of the new owner while a
// client calls through the third replica: the hand-over fails no call.
// No sample ever holds two running containers, every answered call is
// in the call log once, and nothing runs once all replicas stop.
func TestHostedReplicas(t *testing.T) {
	rs := newReplicaSet(t)
	image := enginetest.GoImage(t, enginetest.New(t), mcpFixturePkg)
	stopWatch := rs.watchDuplicates()
	a, b, c := rs.start(), rs.start(), rs.start()
	gateways := map[string]*binGateway{a.url: a, b.url: b, c.url: c}

	newAPI(t, a.url, "").must(http.StatusCreated, "POST", "/api/v1/mcp/servers", map[string]any{
		"name": "notes", "image": image, "tool_prefix": "n_", "volumes": []string{"/data"}}, nil)
	for _, g := range []*binGateway{b, c} {
		eventually(t, opTimeout, func() (bool, string) {
			st := hostedOwner(t, g)
			return strings.HasSuffix(st.Owner, " "+a.url) && !st.Local && st.Status == switchboard.HostedRunning,
				fmt.Sprintf("%s sees owner %q, status %s", g.url, st.Owner, st.Status)
		})
	}
	if st := hostedOwner(t, a); !st.Local {
		t.Errorf("A does not see itself as the owner: %+v", st)
	}
	csB := sdkConnect(t, b.url+"/mcp", nil)
	csC := sdkConnect(t, c.url+"/mcp", nil)
	waitListed(t, csB, "n_echo")
	waitListed(t, csC, "n_echo")
	var mu sync.Mutex
	answered := map[string]bool{}
	callEcho := func(cs *mcp.ClientSession, marker string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "n_echo", Arguments: map[string]any{"text": marker}})
		if err != nil {
			return err
		}
		if res.IsError || text(t, res) != marker {
			return fmt.Errorf("n_echo %s: %+v", marker, res)
		}
		mu.Lock()
		answered[marker] = true
		mu.Unlock()
		return nil
	}
	if out := callText(t, csB, "n_write_file", map[string]any{"path": "/data/shared.txt", "text": "written through B"}); out != "ok" {
		t.Fatalf("write through B: %s", out)
	}
	if out := callText(t, csC, "n_read_file", map[string]any{"path": "/data/shared.txt"}); out != "written through B" {
		t.Fatalf("C reads %q, want what B wrote", out)
	}
	if got := instanceContainers(t, rs.inst); len(got) != 1 {
		t.Fatalf("three replicas run %d containers, want the one", len(got))
	}
	if err := callEcho(csC, "before-kill"); err != nil {
		t.Fatal(err)
	}
	// A sandbox session made on A, which is killed below.
	csA := sdkConnect(t, a.url+"/mcp", nil)
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	res, err := csA.CallTool(sctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "echo on A > a.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on A: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)

	// The internal endpoint refuses a caller without the token.
	for _, tok := range []string{"", "wrong"} {
		req, _ := http.NewRequest("POST", b.url+hosted.InternalPrefix+hostedOwner(t, b).ID+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set(switchboard.ReplicaTokenHeader, tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("internal endpoint with token %q: HTTP %d, want 401", tok, resp.StatusCode)
		}
	}

	t.Run("kill -9 of the owner", func(t *testing.T) {
		killed := time.Now()
		a.kill(t)
		delete(gateways, a.url)
		var took time.Duration
		eventually(t, opTimeout, func() (bool, string) {
			err := callEcho(csB, "after-kill")
			took = time.Since(killed)
			return err == nil, fmt.Sprint("no answer after the kill: ", err)
		})
		t.Logf("take-over after kill -9 (same host): the first call answered %s after the kill", took.Round(time.Millisecond))
		if out := callText(t, csC, "n_read_file", map[string]any{"path": "/data/shared.txt"}); out != "written through B" {
			t.Fatalf("after the take-over C reads %q, want the file written before", out)
		}
		owner := hostedOwner(t, b).Owner
		if strings.HasSuffix(owner, " "+a.url) || owner == "" {
			t.Fatalf("owner after the kill: %q", owner)
		}
		// A's sandbox session goes on from C, on its workspace.
		res, err := csC.CallTool(sctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat a.txt", "session_id": sid}})
		if err != nil || res.IsError || structured(t, res)["stdout"] != "on A\n" {
			t.Fatalf("A's session on C after kill -9 of A: %v %+v", err, res)
		}
		// And from B, through C, which runs it now.
		res, err = csB.CallTool(sctx, &mcp.CallToolParams{Name: "execute_command", Arguments: map[string]any{"command": "cat a.txt", "session_id": sid}})
		if err != nil || res.IsError || structured(t, res)["stdout"] != "on A\n" {
			t.Fatalf("A's session on B after C took it over: %v %+v", err, res)
		}
	})

	t.Run("SIGTERM drain hands over without a failed call", func(t *testing.T) {
		var owner, other *binGateway
		var otherCS *mcp.ClientSession
		if strings.HasSuffix(hostedOwner(t, b).Owner, " "+b.url) {
			owner, other, otherCS = b, c, csC
		} else {
			owner, other, otherCS = c, b, csB
		}
		done := make(chan struct{})
		var failures []error
		var n atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := callEcho(otherCS, fmt.Sprintf("drain-%d", n.Add(1))); err != nil {
					failures = append(failures, err)
				}
			}
		})
		owner.term()
		delete(gateways, owner.url)
		eventually(t, opTimeout, func() (bool, string) {
			st := hostedOwner(t, other)
			return st.Local && st.Status == switchboard.HostedRunning, "the remaining replica has not taken over: " + st.Status + " " + st.Owner
		})
		before := n.Load()
		eventually(t, opTimeout, func() (bool, string) { return n.Load() >= before+5, "calls stalled" })
		close(done)
		wg.Wait()
		if len(failures) > 0 {
			t.Errorf("%d of %d calls failed during the hand-over, first: %v", len(failures), n.Load(), failures[0])
		}
		t.Logf("%d calls through the remaining replica during the drain", n.Load())
	})

	// Every answered call is on record once, whichever replica served it.
	var last *binGateway
	for _, g := range gateways {
		last = g
	}
	hist := newAPI(t, last.url, "")
	eventually(t, opTimeout, func() (bool, string) {
		seen := map[string]int{}
		mu.Lock()
		defer mu.Unlock()
		for q := "?tool=n_echo&limit=1000"; ; {
			page := hist.toolCalls("default", q)
			for _, call := range page.Calls {
				var args struct{ Text string }
				_ = json.Unmarshal(call.Arguments, &args)
				if answered[args.Text] {
					seen[args.Text]++
				}
			}
			if page.Next == "" {
				break
			}
			q = "?tool=n_echo&limit=1000&cursor=" + url.QueryEscape(page.Next)
		}
		for m := range answered {
			if seen[m] != 1 {
				return false, fmt.Sprintf("call %s is on record %d times", m, seen[m])
			}
		}
		t.Logf("%d answered calls, each on record once", len(answered))
		return true, ""
	})

	for _, g := range gateways {
		g.term()
	}
	if n := stopWatch(); n < 10 {
		t.Errorf("only %d samples of the engine were taken", n)
	}
	if got := instanceContainers(t, rs.inst); len(got) != 0 {
		t.Errorf("%d containers left once every replica stopped", len(got))
	}
}

// waitListed waits until cs lists tool name.
func waitListed(t *testing.T, cs *mcp.ClientSession, name string) {
	t.Helper()
	eventually(t, opTimeout, func() (bool, string) {
		names := toolNames(t, cs)
		return has(names, name), "tools: " + strings.Join(names, ",")
	})
}

// TestSandboxReplicas: a sandbox session made on replica A is used on B
// (its file is there: one container, A's), listed by get_sessions on B,
// and stopped from B. A workspace attached by an agent session on A is
// refused to other agent sessions on B as on A, while its holder goes on
// using it.
func TestSandboxReplicas(t *testing.T) {
	env, _ := ownedGatewayEnv(t, testInstance("sbx-replicas"), map[string]string{
		"MCP_SERVER_DATABASE_URL": pgtest.NewDB(t), "MCP_SERVER_SECRET_KEY": testSecretKey,
		"MCP_SERVER_OWNER_LEASE": "3s", "MCP_SERVER_REPLICA_TICK": "200ms"})
	a, b := startGateway(t, nil, env), startGateway(t, nil, env)
	csA, csB := sdkConnect(t, a.url+"/mcp", nil), sdkConnect(t, b.url+"/mcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	call := func(cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	}
	res, err := call(csA, "execute_command", map[string]any{"command": "echo made on A > a.txt"})
	if err != nil || res.IsError {
		t.Fatalf("execute_command on A: %v %+v", err, res)
	}
	sid, _ := structured(t, res)["session_id"].(string)

	res, err = call(csB, "execute_command", map[string]any{"command": "cat a.txt && echo from B >> a.txt", "session_id": sid})
	if err != nil || res.IsError || structured(t, res)["stdout"] != "made on A\n" {
		t.Fatalf("A's session used on B: %v %+v", err, res)
	}
	if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); len(got) != 1 {
		t.Errorf("%d containers, want A's session only", len(got))
	}
	res, err = call(csB, "get_sessions", nil)
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(structured(t, res)["sessions"]), sid) {
		t.Fatalf("get_sessions on B does not list A's session %s: %v %+v", sid, err, res)
	}
	res, err = call(csA, "execute_command", map[string]any{"command": "cat a.txt", "session_id": sid})
	if err != nil || res.IsError || structured(t, res)["stdout"] != "made on A\nfrom B\n" {
		t.Fatalf("A reads: %v %+v", err, res)
	}
	res, err = call(csB, "stop_session", map[string]any{"session_id": sid})
	if err != nil || res.IsError {
		t.Fatalf("stop_session of A's session on B: %v %+v", err, res)
	}
	res, err = call(csA, "get_sessions", nil)
	if err != nil || res.IsError || strings.Contains(fmt.Sprint(structured(t, res)["sessions"]), sid) {
		t.Fatalf("A still lists the session B stopped: %v %+v", err, res)
	}

	t.Run("a held workspace is refused to other agents on every replica", func(t *testing.T) {
		res, err := call(csA, "execute_command", map[string]any{"command": "echo held > h.txt"})
		if err != nil || res.IsError {
			t.Fatalf("execute_command: %v %+v", err, res)
		}
		ws, _ := structured(t, res)["workspace_id"].(string)
		res, err = call(csA, "attach_workspace", map[string]any{"workspace_id": ws})
		if err != nil || res.IsError {
			t.Fatalf("attach_workspace on A: %v %+v", err, res)
		}
		held, _ := structured(t, res)["session_id"].(string)
		other := sdkConnect(t, a.url+"/mcp", nil)
		refusal := func(res *mcp.CallToolResult, err error) string {
			if err != nil {
				return err.Error()
			}
			if res.IsError {
				return text(t, res)
			}
			return ""
		}
		for name, cs := range map[string]*mcp.ClientSession{"B": csB, "another session on A": other} {
			if msg := refusal(call(cs, "execute_command", map[string]any{"command": "cat h.txt", "session_id": held})); !strings.Contains(msg, "is attached to agent session") {
				t.Errorf("%s used the held workspace, or was refused for another reason: %q", name, msg)
			}
			if msg := refusal(call(cs, "attach_workspace", map[string]any{"workspace_id": ws})); !strings.Contains(msg, "is attached to agent session") {
				t.Errorf("%s attached the held workspace, or was refused for another reason: %q", name, msg)
			}
		}
		res, err = call(csA, "execute_command", map[string]any{"command": "cat h.txt", "session_id": held})
		if err != nil || res.IsError || structured(t, res)["stdout"] != "held\n" {
			t.Fatalf("the holder lost its workspace: %v %+v", err, res)
		}
		if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); len(got) != 1 {
			t.Errorf("%d containers, want the held session's only", len(got))
		}
	})
	t.Run("a session goes on from B when A stops", func(t *testing.T) {
		res, err := call(csA, "execute_command", map[string]any{"command": "echo kept > k.txt; sleep 600 >/dev/null 2>&1 &"})
		if err != nil || res.IsError {
			t.Fatalf("execute_command: %v %+v", err, res)
		}
		sid, _ := structured(t, res)["session_id"].(string)
		stopped := "stop_session"
		res, err = call(csA, "execute_command", map[string]any{"command": "true"})
		if err != nil || res.IsError {
			t.Fatalf("execute_command: %v %+v", err, res)
		}
		gone, _ := structured(t, res)["session_id"].(string)
		if res, err := call(csA, stopped, map[string]any{"session_id": gone}); err != nil || res.IsError {
			t.Fatalf("stop_session: %v %+v", err, res)
		}
		began := time.Now()
		a.stop(t)
		t.Logf("A stopped in %s", time.Since(began).Round(time.Millisecond))
		began = time.Now()
		res, err = call(csB, "execute_command", map[string]any{"command": "cat k.txt; pgrep sleep || echo no sleep", "session_id": sid})
		t.Logf("the first call on B after A stopped took %s", time.Since(began).Round(time.Millisecond))
		if err != nil || res.IsError || structured(t, res)["stdout"] != "kept\nno sleep\n" {
			t.Fatalf("A's session on B after A stopped: %v %+v", err, res)
		}
		if !strings.Contains(b.logs.String(), "session taken over from a replica that ended") {
			t.Errorf("B did not say it took the session over")
		}
		// A session stopped on purpose stays stopped.
		if res, err := call(csB, "execute_command", map[string]any{"command": "true", "session_id": gone}); err == nil && !res.IsError {
			t.Errorf("a stopped session was brought back: %+v", res)
		}
	})
	b.stop(t)
	if got := instanceContainers(t, env["MCP_SERVER_INSTANCE"]); len(got) != 0 {
		t.Errorf("%d containers left once both replicas stopped", len(got))
	}
}

// TestHostedReplicaFeatures: a hosted server's prompts, resources,
// templates and completion reach clients of a replica that does not own
// it, through the owner (the hop tells that replica the container's own
// capabilities, less the notifications it cannot carry).
func TestHostedReplicaFeatures(t *testing.T) {
	rs := newReplicaSet(t)
	image := enginetest.GoImage(t, enginetest.New(t), "github.com/switchboard-mcp/switchboard/internal/mcptest/clashserver")
	a, b := rs.start(), rs.start()
	newAPI(t, a.url, "").must(http.StatusCreated, "POST", "/api/v1/mcp/servers", map[string]any{"name": "clash", "image": image}, nil)
	eventually(t, opTimeout, func() (bool, string) {
		var st switchboard.HostedStatus
		newAPI(t, b.url, "").must(http.StatusOK, "GET", "/api/v1/mcp/servers/clash", nil, &st)
		return strings.HasSuffix(st.Owner, " "+a.url) && !st.Local && st.Status == switchboard.HostedRunning,
			fmt.Sprintf("B sees owner %q, status %s", st.Owner, st.Status)
	})
	cs := sdkConnect(t, b.url+"/mcp", nil)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	eventually(t, opTimeout, func() (bool, string) {
		res, err := cs.ListPrompts(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, p := range res.Prompts {
			names = append(names, p.Name)
		}
		return slices.Contains(names, "greet") && slices.Contains(names, "farewell"), "B's prompts: " + strings.Join(names, ",")
	})
	pr, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	if err != nil || len(pr.Messages) != 1 {
		t.Fatalf("prompts/get through B: %+v, %v", pr, err)
	}
	if tc, ok := pr.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "clash greet" {
		t.Fatalf("prompts/get through B: %+v", pr.Messages[0].Content)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "clash:doc"})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "clash doc" {
		t.Fatalf("resources/read through B: %+v, %v", rr, err)
	}
	tl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tl.ResourceTemplates) == 0 {
		t.Fatalf("resources/templates/list through B: %+v, %v", tl, err)
	}
	cr, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "farewell"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "x"}})
	if err != nil || !slices.Equal(cr.Completion.Values, []string{"clash-x"}) {
		t.Fatalf("completion/complete through B: %+v, %v", cr, err)
	}
	if got := instanceContainers(t, rs.inst); len(got) != 1 {
		t.Fatalf("two replicas run %d containers, want the one", len(got))
	}
}
