package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// BenchmarkSandbox measures the sandbox tools at the tool layer (what a
// gateway call adds on top is BenchmarkEcho's business): p50/p99 of
// execute_command `true` and execute_code `print(1)` in an existing
// session, and the time to a new session (create + start + first
// `true`). Executions go through the session's in-container supervisor;
// docker-exec-true is the same call with one docker exec per execution.
func BenchmarkSandbox(b *testing.B) {
	e := enginetest.New(b)
	img := sandboxtest.Image(b, e)
	svc := sandbox.New(sandbox.Options{Engine: e, ImagePython: img, ImageNode: img, MaxSessions: 1000})
	b.Cleanup(func() { _ = svc.Close(context.Background()) })
	tools := svc.Tools("bench")
	call := func(tool string, args map[string]any) (map[string]any, error) {
		raw, _ := json.Marshal(args)
		res, err := tools.CallTool(context.Background(), switchboard.CallRequest{Project: "bench", Tool: tool, Arguments: raw})
		if err != nil {
			return nil, err
		}
		var r struct {
			S map[string]any `json:"structuredContent"`
		}
		_ = json.Unmarshal(res, &r)
		if ec, ok := r.S["exit_code"]; ok && ec != float64(0) {
			return nil, errors.New(fmt.Sprint(r.S))
		}
		return r.S, nil
	}
	first, err := call("execute_command", map[string]any{"command": "true"})
	if err != nil {
		b.Fatal(err)
	}
	sid := first["session_id"].(string)
	measure := func(name string, n int, fn func() error) latencies {
		d := make([]time.Duration, 0, n)
		for range n {
			t := time.Now()
			if err := fn(); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			d = append(d, time.Since(t))
		}
		return summarize(d)
	}
	b.Run("execute_command-true", func(b *testing.B) {
		l := measure("true", max(b.N, 50), func() error {
			_, err := call("execute_command", map[string]any{"command": "true", "session_id": sid})
			return err
		})
		b.ReportMetric(us(l.p50)/1000, "p50-ms")
		b.ReportMetric(us(l.p99)/1000, "p99-ms")
	})
	b.Run("execute_command-argv-true", func(b *testing.B) {
		l := measure("argv true", max(b.N, 50), func() error {
			_, err := call("execute_command", map[string]any{"command": "true", "args": []string{}, "session_id": sid})
			return err
		})
		b.ReportMetric(us(l.p50)/1000, "p50-ms")
		b.ReportMetric(us(l.p99)/1000, "p99-ms")
	})
	b.Run("execute_code-print1", func(b *testing.B) {
		l := measure("print(1)", max(b.N, 50), func() error {
			_, err := call("execute_code", map[string]any{"code": "print(1)", "session_id": sid})
			return err
		})
		b.ReportMetric(us(l.p50)/1000, "p50-ms")
		b.ReportMetric(us(l.p99)/1000, "p99-ms")
	})
	// The same call with docker exec per execution, the path a session
	// takes without its supervisor: why the supervisor exists.
	b.Run("docker-exec-true", func(b *testing.B) {
		plain := sandbox.New(sandbox.Options{Engine: e, ImagePython: img, ImageNode: img, NoSupervisor: true})
		defer plain.Close(context.Background())
		pt := plain.Tools("bench")
		raw, _ := json.Marshal(map[string]any{"command": "true"})
		res, err := pt.CallTool(context.Background(), switchboard.CallRequest{Project: "bench", Tool: "execute_command", Arguments: raw})
		if err != nil {
			b.Fatal(err)
		}
		var r struct {
			S struct {
				ID string `json:"session_id"`
			} `json:"structuredContent"`
		}
		_ = json.Unmarshal(res, &r)
		raw, _ = json.Marshal(map[string]any{"command": "true", "session_id": r.S.ID})
		l := measure("docker exec true", min(max(b.N, 20), 50), func() error {
			_, err := pt.CallTool(context.Background(), switchboard.CallRequest{Project: "bench", Tool: "execute_command", Arguments: raw})
			return err
		})
		b.ReportMetric(us(l.p50)/1000, "p50-ms")
		b.ReportMetric(us(l.p99)/1000, "p99-ms")
	})
	b.Run("new-session", func(b *testing.B) {
		l := measure("new session", max(b.N, 10), func() error {
			r, err := call("execute_command", map[string]any{"command": "true"})
			if err != nil {
				return err
			}
			_, err = call("stop_session", map[string]any{"session_id": r["session_id"]})
			return err
		})
		b.ReportMetric(us(l.p50)/1000, "p50-ms")
		b.ReportMetric(us(l.p99)/1000, "p99-ms")
	})
}
