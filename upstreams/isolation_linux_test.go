package upstreams

import (
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
