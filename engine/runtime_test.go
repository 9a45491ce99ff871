package engine_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// TestRuntimeFallback: with a runtime listed by the engine whose binary
// always fails (CI's .ci/run registers it), auto passes over it with a
// warning naming the failed probe, containers run under the default
// runtime, and asking for it by name is a clear ErrConfig.
func TestRuntimeFallback(t *testing.T) {
	base := enginetest.New(t)
	img := sandboxtest.Image(t, base)
	e := enginetest.NewWith(t, func(o *engine.Options) {
		o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, enginetest.BrokenRuntime(t, base), img
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	got, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Runtime != "" || got.Name == "" || !strings.Contains(got.Warning, enginetest.Broken) || !strings.Contains(got.Warning, "failed its probe") {
		t.Fatalf("auto with a broken preferred runtime: %+v; want the default runtime and a warning naming the failed probe", got)
	}
	rep := e.Runtimes()
	if p := rep.Probes[enginetest.Broken]; !strings.HasPrefix(p, "failed: ") {
		t.Fatalf("runtime report %+v: want %s failed", rep, enginetest.Broken)
	}
	// The probe ran once: a second choice reuses its result.
	probes := engine.ProbesRun(e)
	again, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{Network: true})
	if err != nil || again.Warning != got.Warning {
		t.Fatalf("second choice: %+v, %v; want the same warning as the first", again, err)
	}
	if n := engine.ProbesRun(e) - probes; n != 0 {
		t.Fatalf("second choice ran %d probes; want the first one's result reused", n)
	}
	id, err := e.Create(ctx, engine.Spec{Image: img, Cmd: []string{"true"}, Runtime: got.Runtime})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatalf("a container under the fallback runtime: %v", err)
	}

	_, err = e.ChooseRuntime(ctx, enginetest.Broken, engine.RuntimeNeeds{})
	if !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(switchboard.Message(err), "failed its probe") {
		t.Fatalf("the broken runtime by name: %v; want ErrConfig naming the failed probe", err)
	}
	_, err = e.ChooseRuntime(ctx, "no-such-runtime", engine.RuntimeNeeds{})
	if !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(switchboard.Message(err), "not offered") {
		t.Fatalf("an unknown runtime: %v; want ErrConfig", err)
	}
}

// TestRuntimeProbePasses runs the probe itself under the engine's default
// runtime (auto preferring it), so a probe that fails where everything
// works is caught here rather than as a silent fallback.
func TestRuntimeProbePasses(t *testing.T) {
	base := enginetest.New(t)
	img := sandboxtest.Image(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	info, err := base.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range probedRuntimes(info) {
		t.Run(name, func(t *testing.T) {
			e := enginetest.NewWith(t, func(o *engine.Options) { o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, name, img })
			got, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Runtime != name || got.Warning != "" {
				t.Fatalf("auto preferring %s: %+v; want it chosen (report %+v)", name, got, e.Runtimes())
			}
		})
	}
}

// TestProbeRerunOnRuntimeListChange: a runtime's probe stands while the
// engine's runtime list stays the same; a runtime added to the list, or
// one re-registered with other arguments, runs it again (a runtime
// registered after the gateway started is used without a restart); and
// the list is read from the engine again once its answer is older than
// the engine's TTL. The changed lists are set on the engine, not
// registered with dockerd: a registered runtime stays listed until
// dockerd restarts, for every other test on the machine.
func TestProbeRerunOnRuntimeListChange(t *testing.T) {
	base := enginetest.New(t)
	img := sandboxtest.Image(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := base.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	def := info.DefaultRuntime
	e := enginetest.NewWith(t, func(o *engine.Options) { o.Runtime, o.Prefer, o.ProbeImage = engine.RuntimeAuto, def, img })
	choose := func(step string, want int64) {
		t.Helper()
		before := engine.ProbesRun(e)
		got, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{})
		if err != nil || got.Runtime != def || got.Warning != "" {
			t.Fatalf("%s: %+v, %v; want %s chosen", step, got, err, def)
		}
		if n := engine.ProbesRun(e) - before; want >= 0 && n != want {
			t.Fatalf("%s: %d probes ran, want %d", step, n, want)
		}
	}
	choose("first choice", -1) // another test of this process may have probed it
	choose("same list", 0)

	added := "switchboard-test-" + rand.Text()[:8]
	listed := engine.WithRuntime(info, added, "/usr/bin/"+added)
	engine.SetInfo(e, listed, time.Now())
	choose("a runtime added", 1)
	choose("the list with it again", 0)
	if r := e.Runtimes(); r.Probes[def] != "passed" || !slices.Contains(r.Listed, added) {
		t.Errorf("report after the list changed: %+v; want %s listed and %s passed", r, added, def)
	}
	engine.SetInfo(e, engine.WithRuntime(listed, added, "/usr/bin/"+added+" --other"), time.Now())
	choose("a runtime re-registered with other arguments", 1)

	engine.SetInfo(e, listed, time.Now().Add(-engine.InfoTTL))
	if got, err := e.Info(ctx); err != nil || got.HasRuntime(added) {
		t.Fatalf("info older than its TTL: %v, %v; want the engine's list read again (without %s)", got.Runtimes, err, added)
	}
}

// probedRuntimes are the runtimes TestRuntimeProbePasses checks: the
// default, and the one tests are asked to run under (enginetest.RuntimeEnv).
func probedRuntimes(info engine.Info) []string {
	out := []string{info.DefaultRuntime}
	if r := enginetest.TestRuntime(); r != "" && r != engine.RuntimeAuto && r != info.DefaultRuntime {
		out = append(out, r)
	}
	return out
}

// TestEphemeralGoesWithItsAttach: an ephemeral container (the runtime
// probe's) whose launcher is gone before writing to it (a gateway stopped
// or killed mid-probe: its attach ends) does not stay behind blocked on
// stdin: its stdin closes, it exits and the engine removes it. Probe
// containers of gateways stopped mid-probe used to pile up, running.
func TestEphemeralGoesWithItsAttach(t *testing.T) {
	e := enginetest.New(t)
	img := sandboxtest.Image(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := e.Launch(ctx, engine.Spec{Image: img, Entrypoint: []string{"sh", "-c", "read -r l || exit 1; sleep 300"}, Cmd: []string{},
		Stdin: true, Ephemeral: true, Labels: map[string]string{engine.LabelKind: "helper"}, StopTimeout: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = run.Stream.Close() // the launcher is gone
	for {
		_, err := e.Inspect(ctx, run.ID)
		if errors.Is(err, switchboard.ErrNotFound) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the ephemeral container is still there after its attach ended: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
