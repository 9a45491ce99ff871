package sandbox_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sandbox"
)

// countProcs lists the session's processes whose command line holds
// marker (the marker itself excluded via the [x] trick).
const countProcs = `n=0; for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f" 2>/dev/null | grep -q "$1" && n=$((n+1)); done; echo $n`

// TestContainment runs each hostile program in its own session while
// another session keeps answering, then checks what was contained.
func TestContainment(t *testing.T) {
	f := newFixture(t, func(o *sandbox.Options) { o.MaxFileBytes = 64 << 20 })
	calm := f.exec("p", "execute_command", map[string]any{"command": "true"})

	cases := []struct {
		name  string
		tool  string
		args  map[string]any
		check func(t *testing.T, r result)
	}{
		{"fork bomb", "execute_command", map[string]any{"command": "b(){ b | b & }; b; while :; do :; done", "timeout": 4},
			func(t *testing.T, r result) {
				// Forks fail at the session's limit until the timeout: the
				// pids cgroup under runc, RLIMIT_NPROC inside gVisor.
				if !r.TimedOut || r.ExitCode != nil || !strings.Contains(r.Stderr, "fork") {
					t.Fatalf("fork bomb not stopped by the timeout: %+v", r)
				}
			}},
		{"memory bomb", "execute_code", map[string]any{"code": "x = b'x' * (3 << 30)\nprint(len(x))", "timeout": 60},
			func(t *testing.T, r result) {
				// Killed by the OOM killer (or, on a loaded machine, by the
				// timeout while reclaiming): never past the cgroup limit.
				if r.Success || strings.Contains(r.Stdout, "3221225472") {
					t.Fatalf("memory bomb not stopped: %+v", r)
				}
				if f.gvisor(r.SessionID) {
					// The program's address-space limit (no cgroup files
					// inside gVisor to read a peak from).
					if !strings.Contains(r.Stderr, "MemoryError") {
						t.Fatalf("memory bomb under gVisor: %+v; want a MemoryError", r)
					}
					return
				}
				peak := f.exec("p", "execute_command", map[string]any{"command": "cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes", "session_id": r.SessionID})
				if n, err := strconv.ParseInt(strings.TrimSpace(peak.Stdout), 10, 64); err != nil || n > 1<<30 {
					t.Fatalf("peak memory %q is above the small flavor's 1 GiB", peak.Stdout)
				}
			}},
		{"fill tmpfs", "execute_command", map[string]any{"command": "for i in 1 2 3 4; do head -c 60000000 /dev/zero > /tmp/big$i || exit 1; done", "timeout": 30},
			func(t *testing.T, r result) {
				if r.Success || !strings.Contains(r.Stderr, "No space left") {
					t.Fatalf("tmpfs fill: %+v", r)
				}
			}},
		{"fill workspace", "execute_command", map[string]any{"command": "head -c 100000000 /dev/zero > /workspace/big; echo rc=$?; ls -l /workspace/big | tr -s ' ' | cut -d' ' -f5", "timeout": 60},
			func(t *testing.T, r result) {
				if !strings.Contains(r.Stdout, "67108864") {
					t.Fatalf("one file above the per-file cap: %+v", r)
				}
			}},
		{"read-only root", "execute_command", map[string]any{"command": "touch /usr/x || touch /etc/x; echo $?; grep -m1 '^[^ ]* / ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1"},
			func(t *testing.T, r result) {
				// gVisor checks permissions before the read-only mount:
				// "Permission denied" there, "Read-only" under runc.
				if r.Stdout != "1\nro\n" || !(strings.Contains(r.Stderr, "Read-only") || f.gvisor(r.SessionID) && strings.Contains(r.Stderr, "Permission denied")) {
					t.Fatalf("root writable: %+v", r)
				}
			}},
		{"infinite loop", "execute_command", map[string]any{"command": "sleep 1000 & sleep 1001 & while :; do :; done", "timeout": 1.5},
			func(t *testing.T, r result) {
				if !r.TimedOut || r.ExitCode != nil || r.ExecutionTimeMS < 1500 || r.ExecutionTimeMS > 15000 {
					t.Fatalf("loop: %+v", r)
				}
				n := f.exec("p", "execute_command", map[string]any{"command": "sh", "args": []string{"-c", countProcs, "sh", "[s]leep 100"}, "session_id": r.SessionID})
				if n.Stdout != "0\n" {
					t.Fatalf("processes of the timed-out call survive: %+v", n)
				}
			}},
		{"network", "execute_code", map[string]any{"code": "import socket, os\nprint(sorted(os.listdir('/sys/class/net')))\ns = socket.socket()\ns.settimeout(3)\ntry:\n    s.connect(('1.1.1.1', 80))\n    print('connected')\nexcept OSError as e:\n    print('refused', e.errno)"},
			func(t *testing.T, r result) {
				if !strings.Contains(r.Stdout, "['lo']") || !strings.Contains(r.Stdout, "refused") {
					t.Fatalf("network reachable: %+v", r)
				}
			}},
		{"no docker socket, no privileges", "execute_command", map[string]any{"command": "ls /var/run/docker.sock /run/docker.sock 2>&1; id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status"},
			func(t *testing.T, r result) {
				// gVisor's /proc shows no NoNewPrivs line (the flag is
				// still given to the runtime).
				if strings.Count(r.Stdout, "No such file") != 2 || !strings.Contains(r.Stdout, "1000\n") ||
					!strings.Contains(r.Stdout, "CapEff:\t0000000000000000") || !(strings.Contains(r.Stdout, "NoNewPrivs:\t1") || f.gvisor(r.SessionID)) {
					t.Fatalf("isolation: %+v", r)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := f.start(tc.tool, tc.args, nil)
			// The gateway keeps answering another session meanwhile.
			ok := f.exec("p", "execute_command", map[string]any{"command": "echo alive", "session_id": calm.SessionID})
			if ok.Stdout != "alive\n" {
				t.Fatalf("the other session: %+v", ok)
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(2 * time.Minute):
				t.Fatal("the hostile call never ended")
			}
			tc.check(t, r)
			// The hostile session itself is still usable, then goes.
			if r.SessionID != "" {
				after := f.exec("p", "execute_command", map[string]any{"command": "echo still", "session_id": r.SessionID})
				if after.Stdout != "still\n" {
					t.Fatalf("session after %s: %+v", tc.name, after)
				}
				if _, rerr := f.call("p", "stop_session", map[string]any{"session_id": r.SessionID}); rerr != nil {
					t.Fatal(rerr)
				}
			}
		})
	}
}

// start calls tool in project p as agent session a in the background and
// delivers its decoded result, an RPC error as "rpc error: ..." on stderr.
func (f *fixture) start(tool string, args map[string]any, progress func(json.RawMessage)) <-chan result {
	done := make(chan result, 1)
	go func() {
		raw, rerr := f.callCtx(context.Background(), "p", "a", tool, args, progress)
		var r result
		if rerr != nil {
			r.Stderr = "rpc error: " + rerr.Message
		} else {
			_ = json.Unmarshal(raw, &r)
		}
		done <- r
	}()
	return done
}

// TestCancelKillsProcessTree cancels a call while its program runs and
// checks that nothing it started is left.
func TestCancelKillsProcessTree(t *testing.T) {
	f := newFixture(t, nil)
	s := f.exec("p", "execute_command", map[string]any{"command": "true"})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, rerr := f.callCtx(ctx, "p", "a", "execute_command", map[string]any{"command": "sleep 1002 & echo started; wait", "session_id": s.SessionID, "timeout": 120}, func(json.RawMessage) {
			select {
			case started <- struct{}{}:
			default:
			}
		})
		if rerr != nil {
			errc <- rerr
		}
		errc <- nil
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no output streamed")
	}
	cancel()
	<-errc
	n := f.exec("p", "execute_command", map[string]any{"command": "sh", "args": []string{"-c", countProcs, "sh", "[s]leep 1002"}, "session_id": s.SessionID})
	if n.Stdout != "0\n" {
		t.Fatalf("processes survive the cancellation: %+v", n)
	}
}

// TestSessionAtProcessLimit fills a session up to its process limit and
// calls it meanwhile: the call is refused with 126 and says why, the
// supervisor survives, and once the filler's timeout kills it the
// session runs programs again (runc's pids cgroup, gVisor's
// RLIMIT_NPROC).
func TestSessionAtProcessLimit(t *testing.T) {
	f := newFixture(t, nil)
	s := f.exec("p", "execute_command", map[string]any{"command": "true"})
	full := make(chan struct{}, 1)
	filler := "import subprocess, sys, time\nps = []\nwhile True:\n    try: ps.append(subprocess.Popen(['sleep', '1003']))\n    except OSError: break\nprint('full', len(ps), flush=True)\ntime.sleep(1000)"
	done := f.start("execute_code", map[string]any{"code": filler, "session_id": s.SessionID, "timeout": 15}, func(json.RawMessage) {
		select {
		case full <- struct{}{}:
		default:
		}
	})
	select {
	case <-full:
	case r := <-done:
		t.Fatalf("the filler ended before it filled the session: %+v", r)
	case <-time.After(time.Minute):
		t.Fatal("the filler never filled the session")
	}
	r := f.exec("p", "execute_command", map[string]any{"command": "echo no", "session_id": s.SessionID})
	if r.ExitCode == nil || *r.ExitCode != 126 || r.Stdout != "" || !strings.Contains(r.Stderr, "process limit") {
		t.Fatalf("a call in a full session: %+v; want exit 126 naming the process limit", r)
	}
	if fr := <-done; !fr.TimedOut || !strings.HasPrefix(fr.Stdout, "full ") {
		t.Fatalf("the filler: %+v", fr)
	}
	after := f.exec("p", "execute_command", map[string]any{"command": "sh", "args": []string{"-c", countProcs, "sh", "[s]leep 1003"}, "session_id": s.SessionID})
	if after.Stdout != "0\n" || after.ExitCode == nil || *after.ExitCode != 0 {
		t.Fatalf("the session after its filler timed out: %+v", after)
	}
}

// TestImageHasPs: the sandbox image has ps (procps), and it sees the
// session's own processes.
func TestImageHasPs(t *testing.T) {
	f := newFixture(t, nil)
	r := f.exec("p", "execute_command", map[string]any{"command": "sleep 1004 & ps -e -o comm= | sort -u; kill $!"})
	if !r.Success || !strings.Contains(r.Stdout, "sleep\n") || !strings.Contains(r.Stdout, "ps\n") {
		t.Fatalf("ps in the sandbox: %+v", r)
	}
}
