package sandbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sandbox"
)

// TestDockerExecPath runs the executions through docker exec (the path a
// session takes when its image has no python3 for the supervisor, or the
// supervisor died): same results, same containment.
func TestDockerExecPath(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.NoSupervisor = true })
	r := f.exec("p", "execute_command", map[string]any{"command": "echo out; echo err >&2; cat; echo $X; exit 4", "stdin": "in\n", "env": map[string]string{"X": "x"}})
	if r.Stdout != "out\nin\nx\n" || r.Stderr != "err\n" || exitCode(r) != 4 {
		t.Fatalf("exec path: %+v", r)
	}
	r2 := f.exec("p", "execute_command", map[string]any{"command": "true", "working_dir": "missing", "session_id": r.SessionID})
	if exitCode(r2) != 126 {
		t.Fatalf("missing working_dir: %+v", r2)
	}
	r2 = f.exec("p", "execute_command", map[string]any{"command": "sleep 1003 & while :; do :; done", "timeout": 1, "session_id": r.SessionID})
	if !r2.TimedOut {
		t.Fatalf("timeout: %+v", r2)
	}
	n := f.exec("p", "execute_command", map[string]any{"command": "sh", "args": []string{"-c", countProcs, "sh", "[s]leep 1003"}, "session_id": r.SessionID})
	if n.Stdout != "0\n" {
		t.Fatalf("processes left after the timeout: %+v", n)
	}
}

// TestSupervisorKilled: a program that kills the session's supervisor
// gets an internal error; the next call restarts the container, with the
// workspace's files.
func TestSupervisorKilled(t *testing.T) {
	f := newFixture(t, nil)
	r := f.exec("p", "execute_command", map[string]any{"command": "echo kept > f"})
	_, rerr := f.callCtx(context.Background(), "p", "a", "execute_command", map[string]any{"command": "kill -KILL $PPID; sleep 5", "session_id": r.SessionID, "timeout": 20}, nil)
	wantCode(t, rerr, -32603, "supervisor")
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, rerr := f.callCtx(context.Background(), "p", "a", "execute_command", map[string]any{"command": "cat f", "session_id": r.SessionID}, nil)
		if rerr == nil {
			var r2 result
			_ = json.Unmarshal(raw, &r2)
			if r2.Stdout != "kept\n" {
				t.Fatalf("after the supervisor died: %+v", r2)
			}
			return
		}
		if time.Now().After(deadline) || !strings.Contains(rerr.Message, "supervisor") {
			t.Fatalf("session unusable after its supervisor died: %v", rerr)
		}
	}
}
