package upstreams

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestStopEndsDetachedGrandchild: a child that ignores SIGTERM and stdin's
// end, and a grandchild of it that left its process group (setsid) and
// ignores SIGTERM and SIGHUP, both end on a normal stop, because the child
// is init of its own PID namespace: the grandchild is gone by the time the
// child is reaped, with no signal sent to it.
func TestStopEndsDetachedGrandchild(t *testing.T) {
	for _, iso := range []isolation{isolationPIDNS, isolationUserPIDNS} {
		t.Run(iso.String(), func(t *testing.T) {
			testenv.Need(t, "pidns", isolationWorks(iso), iso.String()+" not permitted")
			grandPidFile := filepath.Join(t.TempDir(), "grandchild")
			spec := stdioSpec("stubborn")
			spec.Env[mcptest.EnvFixtureStubborn] = grandPidFile
			opts := testOptions()
			opts.StopTimeout = 200 * time.Millisecond
			opts.isolation = iso
			h := newHarness(t, opts)
			h.apply(spec)
			pid := h.pid("pid")
			grandPid := readPid(t, grandPidFile)
			t.Cleanup(func() { _ = syscall.Kill(grandPid, syscall.SIGKILL) }) // should this test fail
			st, ok := procStat(grandPid)
			if !ok || !st.live() || st.pgrp != grandPid {
				t.Fatalf("grandchild %d: %+v (found %v), want it alive and leading a group of its own", grandPid, st, ok)
			}

			h.apply() // the server is removed: Apply returns once the child is reaped
			for what, p := range map[string]int{"child": pid, "grandchild": grandPid} {
				if !processGone(p) {
					t.Errorf("%s %d outlived the stop", what, p)
				}
			}
		})
	}
}

// TestTermIgnoredAsInit: a process that neither catches nor ignores
// SIGTERM would die of it, one that ignores or catches it would not.
func TestTermIgnoredAsInit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   bool
	}{
		{"default", "exec sleep 60", true},
		{"ignored", "trap '' TERM; exec sleep 60", false},
		{"caught", "trap 'exit 0' TERM; while :; do sleep 1; done", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tc.script)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			// The shell sets its dispositions before it execs or loops;
			// poll until /proc shows the script's own state.
			deadline := time.Now().Add(10 * time.Second)
			for {
				got := termIgnoredAsInit(cmd.Process.Pid)
				if got == tc.want {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("termIgnoredAsInit = %v, want %v", got, tc.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
