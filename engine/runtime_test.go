package engine_test

import (
	"context"
	"errors"
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
	again, err := e.ChooseRuntime(ctx, "", engine.RuntimeNeeds{Network: true})
	if err != nil || again.Warning != got.Warning {
		t.Fatalf("second choice: %+v, %v; want the same warning as the first", again, err)
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

// probedRuntimes are the runtimes TestRuntimeProbePasses checks: the
// default, and the one tests are asked to run under (enginetest.RuntimeEnv).
func probedRuntimes(info engine.Info) []string {
	out := []string{info.DefaultRuntime}
	if r := enginetest.TestRuntime(); r != "" && r != engine.RuntimeAuto && r != info.DefaultRuntime {
		out = append(out, r)
	}
	return out
}
