package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// BenchmarkRuntimes measures what a container runtime costs, side by
// side in one run: for runc and for gVisor's runsc (when the engine lists
// it and it passes its probe), a sandbox session's start (create, start,
// first `true`, stop), execute_command `true` and execute_code
// `print(1)` in a session, and a hosted server's echo through the
// gateway (an MCP client session, calls one at a time). It prints the
// table docs/sandbox.md shows:
//
//	go test -run '^$' -bench BenchmarkRuntimes -benchtime 1x ./bench/
func BenchmarkRuntimes(b *testing.B) {
	base := enginetest.New(b)
	img := sandboxtest.Image(b, base)
	fixture := enginetest.GoImage(b, base, fixturePkg)
	ctx := context.Background()
	rows := map[string][]string{}
	var order []string
	for _, rt := range []string{"runc", engine.RuntimeGVisor} {
		e := enginetest.NewWith(b, func(o *engine.Options) { o.Runtime, o.ProbeImage = rt, img })
		choice, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{})
		if err != nil {
			fmt.Fprintf(os.Stdout, "runtimes: %s left out: %s\n", rt, switchboard.Message(err))
			continue
		}
		if choice.Warning != "" {
			b.Fatalf("%s: %s", rt, choice.Warning)
		}
		order = append(order, rt)
		b.Run(rt, func(b *testing.B) {
			rows[rt] = append(benchSandboxRuntime(b, e, img), benchHostedRuntime(b, e, fixture))
		})
	}
	names := []string{"session start (p50)", "execute_command true (p50)", "execute_command true (p99)", "execute_code print(1) (p50)", "hosted echo (p50)"}
	var sb strings.Builder
	fmt.Fprintf(&sb, "\n| | %s |\n|---|%s\n", strings.Join(order, " | "), strings.Repeat("---|", len(order)))
	for i, n := range names {
		fmt.Fprintf(&sb, "| %s |", n)
		for _, rt := range order {
			if i < len(rows[rt]) {
				fmt.Fprintf(&sb, " %s |", rows[rt][i])
			}
		}
		sb.WriteByte('\n')
	}
	fmt.Fprint(os.Stdout, sb.String())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// benchSandboxRuntime returns session start p50, exec true p50 and p99,
// print(1) p50 under e's runtime.
func benchSandboxRuntime(b *testing.B, e *engine.Engine, img string) []string {
	svc := sandbox.New(sandbox.Options{Engine: e, ImagePython: img, ImageNode: img, MaxSessions: 100})
	defer svc.Close(context.Background())
	tools := svc.Tools("bench")
	call := func(tool string, args map[string]any) map[string]any {
		raw, _ := json.Marshal(args)
		res, err := tools.CallTool(context.Background(), switchboard.CallRequest{Project: "bench", Tool: tool, Arguments: raw})
		if err != nil {
			b.Fatalf("%s: %v", tool, err)
		}
		var r struct {
			S map[string]any `json:"structuredContent"`
		}
		_ = json.Unmarshal(res, &r)
		if ec, ok := r.S["exit_code"]; ok && ec != float64(0) {
			b.Fatalf("%s: %v", tool, r.S)
		}
		return r.S
	}
	measure := func(n int, fn func()) latencies {
		d := make([]time.Duration, 0, n)
		for range n {
			t := time.Now()
			fn()
			d = append(d, time.Since(t))
		}
		return summarize(d)
	}
	start := measure(5, func() {
		r := call("execute_command", map[string]any{"command": "true"})
		call("stop_session", map[string]any{"session_id": r["session_id"]})
	})
	sid := call("execute_command", map[string]any{"command": "true"})["session_id"]
	exec := measure(50, func() { call("execute_command", map[string]any{"command": "true", "session_id": sid}) })
	code := measure(20, func() { call("execute_code", map[string]any{"code": "print(1)", "session_id": sid}) })
	return []string{ms(start.p50), ms(exec.p50), ms(exec.p99), ms(code.p50)}
}

// benchHostedRuntime returns the echo p50 of the mcpfixture image as a
// hosted server under e's runtime, through the gateway.
func benchHostedRuntime(b *testing.B, e *engine.Engine, image string) string {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		b.Fatal(err)
	}
	var gw *gateway
	var svc *hosted.Service
	svc = hosted.New(hosted.Options{Engine: e, Store: st,
		Upstreams: func(string) (hosted.Upstreams, error) { return gw.mgr, nil },
		Changed:   func(ctx context.Context, _ string) { gw.mgr.Apply(ctx, svc.Specs("default")) },
		Timing:    hosted.Timing{Heartbeat: -1}})
	defer svc.Close(context.Background())
	if gw, err = startGatewayWith(nil, svc.Opener("default")); err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "fixture", Image: image}); err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := svc.WaitStatus(wctx, "default", "fixture", func(s switchboard.HostedStatus) bool { return s.Status == switchboard.HostedRunning }); err != nil {
		b.Fatal(err)
	}
	sessions, err := connectSessions(wctx, gw.URL, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer closeSessions(sessions)
	params := echoParams()
	d := make([]time.Duration, 0, 200)
	for range 200 {
		t := time.Now()
		if err := echoOnce(wctx, sessions[0], params); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t))
	}
	return fmt.Sprintf("%.0f µs", us(summarize(d).p50))
}
