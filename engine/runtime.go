package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// RuntimeAuto is the runtime setting that lets the engine choose: gVisor
// (RuntimeGVisor) when the engine lists it and it passes its probe, else
// the engine's default runtime.
const RuntimeAuto = "auto"

// RuntimeGVisor is the runtime name auto prefers.
const RuntimeGVisor = "runsc"

// RuntimeChoice is the runtime a container is created with.
type RuntimeChoice struct {
	// Runtime goes into Spec.Runtime: "" for the engine's default.
	Runtime string
	// Name is what the container runs under ("runc", "runsc"): Runtime,
	// or the engine's default runtime's name.
	Name string
	// Warning says why a preferred runtime is not used, or that a chosen
	// one is used without having passed its probe; "" when none.
	Warning string
	// GVisor is true when the runtime is gVisor's runsc (by its name or
	// its path), whose sandbox differs in ways callers adapt to.
	GVisor bool
}

// RuntimeNeeds is what the container being chosen for needs of a runtime.
type RuntimeNeeds struct {
	// Network is true when the container joins a network (a hosted HTTP
	// server, a catalog entry with network): a runtime that cannot give
	// containers a network is refused (explicit) or skipped (auto).
	Network bool
}

// probeResult is the outcome of one runtime's probe.
type probeResult struct {
	err       error // nil: passed
	noNetwork error // non-nil: passed only without a network (why)
	skipped   string
	at        time.Time
}

// runtimes is the engine's runtime choice: the setting, and each
// runtime's probe, kept until the engine's runtime list changes.
type runtimes struct {
	setting    string // "" or RuntimeAuto, or a runtime name
	prefer     string // what auto prefers: RuntimeGVisor
	probeImage string
}

// probes holds every probe's result in the process, by engine host,
// probe image, the engine's runtime list and runtime: Engines of one
// process on one engine (a gateway's, a command's, many tests') probe a
// runtime once, and again when the runtime list changes.
var probes = struct {
	mu       sync.Mutex
	results  map[string]probeResult
	inflight map[string]chan struct{}
}{results: map[string]probeResult{}, inflight: map[string]chan struct{}{}}

// failedProbeTTL is how long a failed (or skipped) probe stands before
// it is run again: a runtime fixed in place (same name, same arguments)
// or a probe image built later is noticed. A passed probe stands until
// the engine's runtime list changes.
const failedProbeTTL = 5 * time.Minute

// RuntimeSetting returns the runtime setting ("auto" or a runtime name).
func (e *Engine) RuntimeSetting() string {
	if e.rt.setting == "" {
		return RuntimeAuto
	}
	return e.rt.setting
}

// ChooseRuntime returns the runtime for a container: override when not
// empty (a hosted server's or a catalog entry's own setting), else the
// engine's setting (Options.Runtime). "auto" takes gVisor when the engine
// lists it and it passed its probe (and gives containers a network when
// needs.Network), else the engine's default; a named runtime must be
// listed by the engine and pass its probe.
//
// Errors: ErrConfig when a named runtime is not listed by the engine, or
// failed its probe, or cannot give a container the network it needs;
// ErrUnavailable when the engine cannot be reached.
func (e *Engine) ChooseRuntime(ctx context.Context, override string, needs RuntimeNeeds) (RuntimeChoice, error) {
	rt, _, err := e.chooseRuntime(ctx, override, needs, true)
	return rt, err
}

// ChosenRuntime is ChooseRuntime for a status: where the choice needs a
// probe that has not ended (or not begun), it neither runs nor waits for
// it and reports false. Errors: as ChooseRuntime's.
func (e *Engine) ChosenRuntime(ctx context.Context, override string, needs RuntimeNeeds) (RuntimeChoice, bool, error) {
	return e.chooseRuntime(ctx, override, needs, false)
}

func (e *Engine) chooseRuntime(ctx context.Context, override string, needs RuntimeNeeds, wait bool) (RuntimeChoice, bool, error) {
	want := override
	if want == "" {
		want = e.RuntimeSetting()
	}
	info, err := e.Info(ctx)
	if err != nil {
		return RuntimeChoice{}, false, err
	}
	def := info.DefaultRuntime
	if def == "" {
		def = "runc"
	}
	if want == RuntimeAuto {
		pref := e.rt.prefer
		// Without a probe image auto never takes gVisor: an engine made
		// that way (a command's, a test's) wants the default.
		if !info.HasRuntime(pref) || e.rt.probeImage == "" {
			return RuntimeChoice{Name: def}, true, nil
		}
		res, ok, err := e.probeRuntime(ctx, info, pref, wait)
		if err != nil || !ok {
			return RuntimeChoice{}, ok, err
		}
		switch {
		case res.skipped != "":
			return RuntimeChoice{Name: def, Warning: fmt.Sprintf("runtime %s not used: it could not be probed (%s); using %s", pref, res.skipped, def)}, true, nil
		case res.err != nil:
			return RuntimeChoice{Name: def, Warning: fmt.Sprintf("runtime %s not used: it failed its probe: %s; using %s", pref, switchboard.Message(res.err), def)}, true, nil
		case needs.Network && res.noNetwork != nil:
			return RuntimeChoice{Name: def, Warning: fmt.Sprintf("runtime %s not used for a container with a network: it gives containers none (%s); using %s", pref, switchboard.Message(res.noNetwork), def)}, true, nil
		}
		return RuntimeChoice{Runtime: pref, Name: pref, GVisor: info.isGVisor(pref)}, true, nil
	}
	if !info.HasRuntime(want) {
		listed := slices.Clone(info.Runtimes)
		slices.Sort(listed)
		return RuntimeChoice{}, true, switchboard.Errorf(switchboard.ErrConfig, "container runtime %q is not offered by the Docker engine (it lists %s); register it in the engine's daemon.json (runtimes) and reload the engine, or use %q", want, strings.Join(listed, ", "), RuntimeAuto)
	}
	if want == def {
		return RuntimeChoice{Runtime: want, Name: want, GVisor: info.isGVisor(want)}, true, nil
	}
	res, ok, err := e.probeRuntime(ctx, info, want, wait)
	if err != nil || !ok {
		return RuntimeChoice{}, ok, err
	}
	switch {
	case res.skipped != "":
		return RuntimeChoice{Runtime: want, Name: want, GVisor: info.isGVisor(want), Warning: fmt.Sprintf("runtime %s used without its probe (%s)", want, res.skipped)}, true, nil
	case res.err != nil:
		return RuntimeChoice{}, true, switchboard.Errorf(switchboard.ErrConfig, "container runtime %q failed its probe: %s; fix the runtime's registration in the engine, or use %q or %q", want, switchboard.Message(res.err), RuntimeAuto, def)
	case needs.Network && res.noNetwork != nil:
		return RuntimeChoice{}, true, switchboard.Errorf(switchboard.ErrConfig, "container runtime %q gives containers no network (%s) and this container needs one; use %q or %q, or no network", want, switchboard.Message(res.noNetwork), RuntimeAuto, def)
	}
	return RuntimeChoice{Runtime: want, Name: want, GVisor: info.isGVisor(want)}, true, nil
}

// isGVisor reports whether runtime name is gVisor's runsc.
func (i Info) isGVisor(name string) bool {
	return strings.Contains(name, "runsc") || strings.Contains(i.runtimeArgs[name], "runsc")
}

// RuntimeReport is the runtime part of a status: the setting, what the
// engine lists, and each probed runtime's outcome.
type RuntimeReport struct {
	Setting string   `json:"setting"`
	Default string   `json:"default,omitempty"`
	Listed  []string `json:"listed,omitempty"`
	// Probes maps a runtime to "passed", "passed without network: why",
	// "failed: what", or "not probed: why".
	Probes map[string]string `json:"probes,omitempty"`
}

// Runtimes reports the runtime setting and the probes run so far,
// against the last runtime list read (no engine call).
func (e *Engine) Runtimes() RuntimeReport {
	r := RuntimeReport{Setting: e.RuntimeSetting()}
	info, ok := e.KnownInfo()
	if ok {
		r.Default, r.Listed = info.DefaultRuntime, slices.Sorted(slices.Values(info.Runtimes))
	}
	if !ok {
		return r
	}
	prefix := e.host + "|" + e.rt.probeImage + "|" + info.runtimeKey() + "|"
	probes.mu.Lock()
	defer probes.mu.Unlock()
	for key, res := range probes.results {
		if name, ok := strings.CutPrefix(key, prefix); ok {
			if r.Probes == nil {
				r.Probes = map[string]string{}
			}
			r.Probes[name] = res.String()
		}
	}
	return r
}

func (p probeResult) String() string {
	switch {
	case p.skipped != "":
		return "not probed: " + p.skipped
	case p.err != nil:
		return "failed: " + switchboard.Message(p.err)
	case p.noNetwork != nil:
		return "passed without network: " + switchboard.Message(p.noNetwork)
	}
	return "passed"
}

// probeRuntime returns name's probe result, running the probe when the
// engine's runtime list changed since the last one (one probe at a time
// per runtime; others wait for it). Without wait it reports false
// instead of running or waiting for one. Errors: ctx's.
func (e *Engine) probeRuntime(ctx context.Context, info Info, name string, wait bool) (probeResult, bool, error) {
	key := e.host + "|" + e.rt.probeImage + "|" + info.runtimeKey() + "|" + name
	for {
		probes.mu.Lock()
		res, ok := probes.results[key]
		if ok && ((res.err == nil && res.skipped == "") || time.Since(res.at) < failedProbeTTL) {
			probes.mu.Unlock()
			return res, true, nil
		}
		if !wait {
			probes.mu.Unlock()
			return probeResult{}, false, nil
		}
		if running, busy := probes.inflight[key]; busy {
			probes.mu.Unlock()
			select {
			case <-running:
				continue
			case <-ctx.Done():
				return probeResult{}, false, ctx.Err()
			}
		}
		done := make(chan struct{})
		probes.inflight[key] = done
		probes.mu.Unlock()

		// The probe is not cut short by one caller leaving: others wait
		// for it, and a half-run probe would be run again.
		e.probesRun.Add(1)
		res = e.runProbe(context.WithoutCancel(ctx), name)
		res.at = time.Now()
		e.logProbe(name, res)

		probes.mu.Lock()
		delete(probes.inflight, key)
		close(done)
		if res.err == nil || !errors.Is(res.err, switchboard.ErrUnavailable) {
			probes.results[key] = res
		}
		probes.mu.Unlock()
		return res, true, nil
	}
}

func (e *Engine) logProbe(name string, res probeResult) {
	switch {
	case res.skipped != "":
		e.log.Warn("engine: container runtime not probed", "runtime", name, "why", res.skipped)
	case res.err != nil:
		e.log.Warn("engine: container runtime failed its probe; it is not used", "runtime", name, "failed", switchboard.Message(res.err))
	case res.noNetwork != nil:
		e.log.Warn("engine: container runtime passed its probe without a network; containers that need one do not use it", "runtime", name, "network", switchboard.Message(res.noNetwork))
	default:
		e.log.Info("engine: container runtime passed its probe", "runtime", name)
	}
}

// runtimeKey identifies the engine's runtime list, with each runtime's
// path and arguments: a runtime added, removed or re-registered with
// other arguments changes it.
func (i Info) runtimeKey() string {
	keys := slices.Sorted(slices.Values(i.Runtimes))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(i.runtimeArgs[k])
		b.WriteByte(';')
	}
	return b.String()
}
