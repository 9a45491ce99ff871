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
