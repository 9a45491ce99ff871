package sandbox_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// TestBrokenRuntimeFallsBack: the engine lists a runtime whose binary
// always fails and auto prefers it. Every call is answered (under the
// default runtime), and status says which runtime sessions get and why
// not the preferred one.
func TestBrokenRuntimeFallsBack(t *testing.T) {
	base := enginetest.New(t)
	img := sandboxtest.Image(t, base)
	broken := enginetest.BrokenRuntime(t, base)
	e := enginetest.NewWith(t, func(o *engine.Options) { o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, broken, img })
	f := newFixture(t, func(o *sandbox.Options) { o.Engine = e })

	for i := range 3 {
		r := f.exec("p", "execute_command", map[string]any{"command": "ls -l /workspace >/dev/null && echo ok"})
		if !r.Success || r.Stdout != "ok\n" {
			t.Fatalf("call %d under the fallback: %+v", i, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := f.svc.Status(ctx)
	info, _ := e.KnownInfo()
	if st.Runtime != info.DefaultRuntime || !strings.Contains(st.RuntimeWarning, broken) || !strings.Contains(st.RuntimeWarning, "failed its probe") {
		t.Fatalf("status runtime %q, warning %q: want %q and a warning naming %s's failed probe", st.Runtime, st.RuntimeWarning, info.DefaultRuntime, broken)
	}
	if p := st.Runtimes.Probes[broken]; !strings.HasPrefix(p, "failed: ") {
		t.Fatalf("status probes %+v: want %s failed", st.Runtimes, broken)
	}
}

// TestStatusWhileProbing asks for the status of a fresh gateway whose
// runtime probe (gVisor's: seconds) has not ended: the status neither
// runs nor waits for the probe. The images it has read present and the
// runtime says it is being chosen, never "unknown: ... the Docker engine
// failed" (waiting for the probe used to spend the images' budget); once
// a session has started (it waits for the probe), the status names the
// runtime. The probe image is a tag of its own, so no earlier probe in
// this process answers for it.
func TestStatusWhileProbing(t *testing.T) {
	base := enginetest.New(t)
	img := sandboxtest.Image(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := base.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.HasRuntime(engine.RuntimeGVisor) {
		t.Skip("the engine lists no runsc: auto takes the default runtime without a probe")
	}
	probe := "switchboard-sandbox-probe:" + base.Instance()
	if err := base.TagImage(ctx, img, probe); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = base.RemoveImage(context.Background(), probe) })
	e := enginetest.NewWith(t, func(o *engine.Options) {
		o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, engine.RuntimeGVisor, probe
	})
	f := newFixture(t, func(o *sandbox.Options) { o.Engine = e })
	st := f.svc.Status(ctx)
	if st.Engine != "reachable" || !strings.HasPrefix(st.Images["python"], "present: ") || !strings.HasPrefix(st.Images["node"], "present: ") {
		t.Fatalf("status during the probe: %+v; want the engine reachable and both images present", st)
	}
	if st.Runtime != "" || !strings.Contains(st.RuntimeWarning, "being chosen") {
		t.Fatalf("status during the probe: runtime %q, warning %q; want it being chosen", st.Runtime, st.RuntimeWarning)
	}
	r := f.exec("p", "execute_command", map[string]any{"command": "true"})
	e2 := enginetest.NewWith(t, func(o *engine.Options) {
		o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, engine.RuntimeGVisor, probe
	})
	st = newFixture(t, func(o *sandbox.Options) { o.Engine = e2 }).svc.Status(ctx)
	if !r.Success || st.Runtime == "" || strings.Contains(st.RuntimeWarning, "being chosen") {
		t.Fatalf("status after a session started (%+v): runtime %q, warning %q; want the probed choice", r, st.Runtime, st.RuntimeWarning)
	}
}
