package hosted_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

const fixturePkg = "github.com/switchboard-mcp/switchboard/internal/mcptest/mcpfixture"

// env is one test's engine, image, store and service.
type env struct {
	t       *testing.T
	eng     *engine.Engine
	image   string
	st      *sqlite.Store
	svc     *hosted.Service
	secrets map[string]string
	opts    hosted.Options
	mgr     *upstreams.Manager
}

// fastTiming keeps every delay short; tests set what they look at.
func fastTiming() hosted.Timing {
	return hosted.Timing{
		RestartDelay: 20 * time.Millisecond, CrashWindow: time.Minute, CrashLimit: 3,
		Backoff:    []time.Duration{300 * time.Millisecond, 600 * time.Millisecond},
		RetryDelay: 200 * time.Millisecond, StopTimeout: 5 * time.Second, ShutdownTimeout: 5 * time.Second,
		Heartbeat: -1, PingTimeout: time.Second, ConnectTimeout: 20 * time.Second,
	}
}

func newEnv(t *testing.T, eng *engine.Engine, st *sqlite.Store, timing hosted.Timing) *env {
	t.Helper()
	if eng == nil {
		eng = enginetest.New(t)
	}
	ctx := context.Background()
	if st == nil {
		var err error
		st, err = sqlite.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, eng: eng, image: enginetest.GoImage(t, eng, fixturePkg), st: st, secrets: map[string]string{}}
	e.opts = hosted.Options{
		Engine: eng, Store: st, Timing: timing,
		Secrets: func(context.Context, string) (map[string]string, error) { return e.secrets, nil },
	}
	return e
}

// start makes and starts the service with a project manager that serves
// its servers (as the hub does); t.Cleanup closes both.
func (e *env) start() *hosted.Service {
	e.t.Helper()
	e.opts.Upstreams = func(string) (hosted.Upstreams, error) { return e.mgr, nil }
	e.opts.Changed = func(ctx context.Context, _ string) { e.mgr.Apply(ctx, e.svc.Specs("default")) }
	e.svc = hosted.New(e.opts)
	e.mgr = upstreams.New(upstreams.Options{Version: "test", Streams: e.svc.Opener("default"), ConnectTimeout: 20 * time.Second, BreakerCooldown: 500 * time.Millisecond})
	mgr := e.mgr
	e.t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	if err := e.svc.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	svc := e.svc
	e.t.Cleanup(func() { _ = svc.Close(context.Background()) })
	return svc
}

func (e *env) register(reg switchboard.HostedRegistration) switchboard.HostedStatus {
	e.t.Helper()
	if reg.Image == "" {
		reg.Image = e.image
	}
	st, err := e.svc.Register(context.Background(), "default", reg)
	if err != nil {
		e.t.Fatalf("Register(%s): %v", reg.Name, err)
	}
	return st
}

func (e *env) wait(name string, what string, cond func(switchboard.HostedStatus) bool) switchboard.HostedStatus {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := e.svc.WaitStatus(ctx, "default", name, cond)
	if err != nil {
		e.t.Fatalf("waiting for %s: %v (status %+v)", what, err, st)
	}
	return st
}

func isStatus(s string) func(switchboard.HostedStatus) bool {
	return func(st switchboard.HostedStatus) bool { return st.Status == s }
}

// containers lists the instance's hosted-server containers.
func containers(t *testing.T, eng *engine.Engine) []engine.State {
	t.Helper()
	list, err := eng.List(context.Background(), map[string]string{engine.LabelKind: hosted.KindMCPServer})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func volumes(t *testing.T, eng *engine.Engine) []engine.Volume {
	t.Helper()
	list, err := eng.ListVolumes(context.Background(), map[string]string{engine.LabelKind: hosted.KindMCPServer})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestRegisterHardenedContainerAndDelete(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	e.secrets["API_TOKEN"] = "s3cret-value-123"
	svc := e.start()
	st := e.register(switchboard.HostedRegistration{
		Name: "notes", Volumes: []string{"/data"},
		Environment: map[string]string{"TOKEN": "${API_TOKEN}", "PLAIN": "x"},
		Limits:      switchboard.HostedLimits{CPU: "0.25", Memory: "64m"},
	})
	if st.ID == "" || st.Provider != "docker" || st.Config.RestartPolicy != hosted.PolicyOnFailure {
		t.Errorf("status after Register = %+v", st)
	}
	st = e.wait("notes", "a started container", func(s switchboard.HostedStatus) bool { return s.StartedAt != nil })
	state, err := e.eng.Inspect(context.Background(), st.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	// Under gVisor the container's cgroup also holds the sandbox's own
	// tasks and memory.
	pids, mem := int64(hosted.DefaultPids), int64(64<<20)
	if strings.Contains(state.Runtime, "runsc") {
		pids, mem = engine.GVisorHostLimits(pids, mem)
	}
	if state.NanoCPUs != 250_000_000 || state.MemoryBytes != mem || state.PidsLimit != pids ||
		!state.ReadOnlyRoot || !state.Init || state.NetworkMode != "none" || !state.Running {
		t.Errorf("container limits/hardening = %+v", state)
	}
	if !containsAll(state.CapDrop, "ALL") || !containsPrefix(state.SecurityOpt, "no-new-privileges") {
		t.Errorf("CapDrop %v, SecurityOpt %v", state.CapDrop, state.SecurityOpt)
	}
	if state.Labels[engine.LabelRef] != st.ID || state.Labels[engine.LabelOwner] != e.eng.Owner() || state.Labels[engine.LabelKind] != hosted.KindMCPServer || state.Labels[engine.LabelInstance] != e.eng.Instance() {
		t.Errorf("labels = %v", state.Labels)
	}
	if st.Limits.CPU != 0.25 || st.Limits.MemoryBytes != 64<<20 || st.Limits.DiskEnforced || !strings.Contains(st.Limits.DiskNote, "not enforced") {
		t.Errorf("limits in status = %+v (this engine has no disk quotas)", st.Limits)
	}
	if strings.Contains(mustJSON(t, st), "s3cret") || !containsAll(st.Config.Environment, "PLAIN", "TOKEN") {
		t.Errorf("status shows a secret or lacks env names: %s", mustJSON(t, st))
	}
	if vs := volumes(t, e.eng); len(vs) != 1 || vs[0].Labels[engine.LabelRef] != st.ID {
		t.Errorf("volumes = %+v, want one owned by the row", vs)
	}
	rows, _ := e.st.ListWorkspaces(context.Background(), switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerMCPServer})
	if len(rows) != 1 || rows[0].Image != e.image || strings.Contains(string(rows[0].Config), "s3cret") {
		t.Errorf("rows = %+v", rows)
	}
	// The row records which provider and runtime ran (written by the
	// status persister, in the background: polled).
	if state.Runtime == "" || st.Runtime != state.Runtime {
		t.Errorf("status runtime %q, container's %q", st.Runtime, state.Runtime)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		row, err := e.st.GetWorkspace(context.Background(), st.ID)
		if err == nil && row.Provider == "docker/"+state.Runtime {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("row provider %q (err %v), want docker/%s", row.Provider, err, state.Runtime)
			break
		}
	}

	if err := svc.Delete(context.Background(), "default", "notes", false); err != nil {
		t.Fatal(err)
	}
	if cs, vs := containers(t, e.eng), volumes(t, e.eng); len(cs) != 0 || len(vs) != 0 {
		t.Errorf("after delete: containers %v, volumes %v", cs, vs)
	}
	if _, err := svc.Get(context.Background(), "default", "notes"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("Get after delete: %v", err)
	}

	// keep_volumes keeps them.
	e.register(switchboard.HostedRegistration{Name: "kept", Volumes: []string{"/data"}})
	if err := svc.Delete(context.Background(), "default", "kept", true); err != nil {
		t.Fatal(err)
	}
	if cs, vs := containers(t, e.eng), volumes(t, e.eng); len(cs) != 0 || len(vs) != 1 {
		t.Errorf("after delete with keep_volumes: containers %d, volumes %d, want 0 and 1", len(cs), len(vs))
	}
}

func TestBadRegistrationsLeaveNothing(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	svc := e.start()
	e.register(switchboard.HostedRegistration{Name: "taken"})
	for name, tc := range map[string]struct {
		reg  switchboard.HostedRegistration
		kind error
	}{
		"image missing":  {switchboard.HostedRegistration{Name: "a", Image: "switchboard-test/nope:0", PullPolicy: "never", Volumes: []string{"/data"}}, switchboard.ErrInvalid},
		"bad limits":     {switchboard.HostedRegistration{Name: "b", Limits: switchboard.HostedLimits{Memory: "lots"}}, switchboard.ErrInvalid},
		"memory > host":  {switchboard.HostedRegistration{Name: "f", Limits: switchboard.HostedLimits{Memory: "999999t"}, Volumes: []string{"/data"}}, switchboard.ErrInvalid},
		"cpu > host":     {switchboard.HostedRegistration{Name: "g", Limits: switchboard.HostedLimits{CPU: "100000"}, Volumes: []string{"/data"}}, switchboard.ErrInvalid},
		"duplicate name": {switchboard.HostedRegistration{Name: "taken", Volumes: []string{"/data"}}, switchboard.ErrConflict},
		"no secret":      {switchboard.HostedRegistration{Name: "c", Environment: map[string]string{"T": "${NOPE}"}}, switchboard.ErrInvalid},
		"bad network":    {switchboard.HostedRegistration{Name: "d", Network: "no-such-network-xyz", Volumes: []string{"/data"}}, switchboard.ErrInvalid},
		"no project":     {switchboard.HostedRegistration{Name: "e"}, switchboard.ErrNotFound},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.reg.Image == "" {
				tc.reg.Image = e.image
			}
			project := "default"
			if name == "no project" {
				project = "nope"
			}
			_, err := svc.Register(context.Background(), project, tc.reg)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want %v", err, tc.kind)
			}
			if strings.Contains(switchboard.Message(err), "/var/lib") {
				t.Errorf("message carries a host path: %s", switchboard.Message(err))
			}
			rows, _ := e.st.ListWorkspaces(context.Background(), switchboard.WorkspaceFilter{})
			if cs, vs := containers(t, e.eng), volumes(t, e.eng); len(rows) != 1 || len(cs) != 1 || len(vs) != 0 {
				t.Errorf("left behind: %d rows, %d containers, %d volumes; want 1, 1, 0", len(rows), len(cs), len(vs))
			}
		})
	}
}

func TestCrashLoopBackoffAndManualRestart(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	svc := e.start()
	e.register(switchboard.HostedRegistration{Name: "crashy", Environment: map[string]string{"MCPFIXTURE_EXIT": "3"}})
	st := e.wait("crashy", "backoff", isStatus(switchboard.HostedBackoff))
	if st.CrashCount < 4 || st.LastCrash == nil || st.LastCrash.ExitCode != 3 || st.LastCrash.OOMKilled ||
		!strings.Contains(st.LastCrash.Stderr, "exiting with code 3") || !strings.Contains(st.Warning, "crash loop") || st.NextStartAt == nil {
		t.Errorf("status in backoff = %+v", st)
	}
	// Backoff steps: 300 ms, then 600 ms; the restarts go on.
	e.wait("crashy", "a second backoff", func(s switchboard.HostedStatus) bool { return s.CrashCount >= st.CrashCount+2 })
	if cs := containers(t, e.eng); len(cs) != 1 {
		t.Errorf("containers while crash-looping = %d, want 1 (restarts reuse it)", len(cs))
	}
	restarted, err := svc.Restart(context.Background(), "default", "crashy")
	if err != nil {
		t.Fatal(err)
	}
	if restarted.CrashCount != 0 || restarted.Warning != "" {
		t.Errorf("after manual restart counters not reset: %+v", restarted)
	}
}

func TestRestartPolicyNever(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	e.start()
	e.register(switchboard.HostedRegistration{Name: "once", RestartPolicy: hosted.PolicyNever, Environment: map[string]string{"MCPFIXTURE_EXIT": "2"}})
	st := e.wait("once", "failed", isStatus(switchboard.HostedFailed))
	if st.CrashCount != 1 || st.RestartCount != 0 || st.LastCrash == nil || st.LastCrash.ExitCode != 2 || !strings.Contains(st.LastError, "restart_policy") {
		t.Errorf("status = %+v", st)
	}
}

// TestReplaceAfterKill: a gateway killed with -9 leaves its row and its
// containers running. The next gateway on the same instance removes them
// (the engine's sweep: their owner is dead) and starts exactly one
// container per server, reusing its volume: replaced, not adopted. A live
// gateway's containers on the same instance and another instance's are
// never touched.
func TestReplaceAfterKill(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	ctx := context.Background()
	cfg := `{"name":"keeper","image":"` + e.image + `","volumes":["/data"]}`
	row, err := e.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: e.image, Config: json.RawMessage(cfg), Status: "running", Provider: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{engine.LabelKind: hosted.KindMCPServer, engine.LabelRef: row.ID}
	// Its volume, named as an earlier version did, with the row's owner
	// labels: adopted, not replaced by an empty one.
	volume := engine.LegacyHostedVolume(row.ID, "/data")
	volumeLabels := map[string]string{engine.LabelKind: hosted.KindMCPServer, engine.LabelRef: row.ID, engine.LabelProject: "default",
		hosted.LabelServer: "keeper", hosted.LabelPath: "/data"}
	if err := e.eng.CreateVolume(ctx, volume, volumeLabels); err != nil {
		t.Fatal(err)
	}
	// What the killed gateway process left: its container, running, and a
	// duplicate, owned by a process that no longer runs.
	dead, err := engine.New(engine.Options{Instance: e.eng.Instance(), Owner: "dead-process"})
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	var left []string
	for range 2 {
		id, err := dead.Create(ctx, engine.Spec{Image: e.image, Stdin: true, Labels: labels,
			Mounts: []engine.Mount{{Volume: volume, Target: "/data"}}})
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if err := e.eng.Start(ctx, left[0]); err != nil {
		t.Fatal(err)
	}
	// A live gateway process's container on the same instance (a second
	// start on the same data dir, a replica) and another instance's
	// container with the same labels.
	live, err := engine.New(engine.Options{Instance: e.eng.Instance(), Owner: "live-process"})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	alive, err := live.Create(ctx, engine.Spec{Image: e.image, Stdin: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	other := enginetest.New(t)
	foreign, err := other.Create(ctx, engine.Spec{Image: e.image, Stdin: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}

	// The gateway's start: one sweep, then the hosted servers.
	removed, err := e.eng.Sweep(ctx, func(_ context.Context, owner string) (bool, error) { return owner == "live-process", nil })
	if err != nil || len(removed) != 2 {
		t.Fatalf("Sweep removed %d containers, %v; want the dead process's 2", len(removed), err)
	}
	if s, err := live.Inspect(ctx, alive); err != nil || s.ID != alive {
		t.Fatalf("the live process's container was touched: %v", err)
	}
	if err := live.Remove(ctx, alive); err != nil {
		t.Fatal(err)
	}
	e.start()
	st := e.wait("keeper", "started", func(s switchboard.HostedStatus) bool { return s.StartedAt != nil })
	now := containers(t, e.eng)
	if len(now) != 1 || now[0].ID != st.ContainerID {
		t.Errorf("containers after the restart: %+v, want exactly the new one %s", now, st.ContainerID)
	}
	for _, id := range left {
		if _, err := e.eng.Inspect(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("leftover %s not removed: %v", id, err)
		}
	}
	if s, err := other.Inspect(ctx, foreign); err != nil || s.ID != foreign {
		t.Errorf("the other instance's container was touched: %v", err)
	}
	if vs := volumes(t, e.eng); len(vs) != 1 || vs[0].Name != volume {
		t.Errorf("volumes = %+v, want the one of before, reused", vs)
	}
}

func TestShutdownStopsEverything(t *testing.T) {
	timing := fastTiming()
	timing.ShutdownTimeout = 20 * time.Second
	e := newEnv(t, nil, nil, timing)
	svc := e.start()
	for _, n := range []string{"one", "two"} {
		e.register(switchboard.HostedRegistration{Name: n, Volumes: []string{"/data"}})
		e.wait(n, "started", func(s switchboard.HostedStatus) bool { return s.StartedAt != nil })
	}
	start := time.Now()
	if err := svc.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cs := containers(t, e.eng); len(cs) != 0 {
		t.Errorf("containers after Close: %+v", cs)
	}
	if vs := volumes(t, e.eng); len(vs) != 2 {
		t.Errorf("volumes after Close = %d, want 2 (they outlive the gateway)", len(vs))
	}
	// SIGTERM reaches the server through the init process: Close does not
	// wait for the SIGKILL deadline.
	if d := time.Since(start); d >= timing.ShutdownTimeout {
		t.Errorf("Close took %s; the containers did not stop on SIGTERM", d)
	}
}

func containsAll(list []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range list {
			if v == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func containsPrefix(list []string, p string) bool {
	for _, v := range list {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	return false
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEngineUnreachable: without an engine, registering is 503 and the
// registered servers report why they do not run.
func TestEngineUnreachable(t *testing.T) {
	good := enginetest.New(t) // skips (or fails where required) without Docker
	e := newEnv(t, good, nil, fastTiming())
	ctx := context.Background()
	cfg := `{"name":"later","image":"` + e.image + `"}`
	if _, err := e.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: e.image, Config: json.RawMessage(cfg), Status: "running", Provider: "docker"}); err != nil {
		t.Fatal(err)
	}
	down, err := engine.New(engine.Options{Host: "unix://" + t.TempDir() + "/no-docker.sock", Instance: good.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { down.Close() })
	e.opts.Engine = down
	svc := e.start()
	if _, err := svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "now", Image: e.image}); !errors.Is(err, switchboard.ErrUnavailable) {
		t.Errorf("Register without an engine: %v, want ErrUnavailable", err)
	}
	st := e.wait("later", "failed", isStatus(switchboard.HostedFailed))
	if !strings.Contains(st.LastError, "not reachable") {
		t.Errorf("status without an engine = %+v, want it to say the engine is not reachable", st)
	}
	if st.Runtime != "" {
		t.Errorf("runtime %q before any container ran, want \"\" (unknown)", st.Runtime)
	}
	if rows, _ := e.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{}); len(rows) != 1 {
		t.Errorf("rows = %d, want 1 (the failed registration left none)", len(rows))
	}
}

func TestProjectGone(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	ctx := context.Background()
	if _, err := e.st.CreateProject(ctx, switchboard.Project{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	svc := e.start()
	if _, err := svc.Register(ctx, "acme", switchboard.HostedRegistration{Name: "a", Image: e.image, Volumes: []string{"/data"}}); err != nil {
		t.Fatal(err)
	}
	e.register(switchboard.HostedRegistration{Name: "b"})
	if err := e.st.DeleteProject(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	svc.ProjectGone("acme")
	if err := svc.Close(ctx); err != nil { // waits for the removal
		t.Fatal(err)
	}
	if vs := volumes(t, e.eng); len(vs) != 0 {
		t.Errorf("volumes of the deleted project left: %+v", vs)
	}
	if _, err := svc.Get(ctx, "acme", "a"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("Get after the project is gone: %v", err)
	}
}

// TestServersFileEntries: SetFile adds, changes (new container, same
// volume) and removes (volume kept) the file's servers, and never touches
// one registered through the API.
func TestServersFileEntries(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	svc := e.start()
	ctx := context.Background()
	e.register(switchboard.HostedRegistration{Name: "api"})
	file := []switchboard.HostedRegistration{{Name: "f", Image: e.image, Volumes: []string{"/data"}}}
	if err := svc.SetFile(ctx, "default", file); err != nil {
		t.Fatal(err)
	}
	first := e.wait("f", "started", func(s switchboard.HostedStatus) bool { return s.StartedAt != nil })
	if first.Config.Origin != "file" {
		t.Errorf("origin = %q", first.Config.Origin)
	}
	if err := svc.SetFile(ctx, "default", file); err != nil { // unchanged: kept as is
		t.Fatal(err)
	}
	if st, _ := svc.Get(ctx, "default", "f"); st.ContainerID != first.ContainerID {
		t.Errorf("an unchanged entry got a new container")
	}
	file[0].Limits.Memory = "96m"
	if err := svc.SetFile(ctx, "default", file); err != nil {
		t.Fatal(err)
	}
	changed := e.wait("f", "restarted with the change", func(s switchboard.HostedStatus) bool {
		return s.StartedAt != nil && s.ContainerID != first.ContainerID && s.ContainerID != ""
	})
	if changed.ID != first.ID || changed.Limits.MemoryBytes != 96<<20 {
		t.Errorf("changed entry = %+v, want the same row with the new limit", changed)
	}
	// A file entry may not take an API server's name.
	if err := svc.SetFile(ctx, "default", append(file, switchboard.HostedRegistration{Name: "api", Image: e.image})); !errors.Is(err, switchboard.ErrConflict) {
		t.Errorf("file entry named like an API server: %v, want ErrConflict", err)
	}
	if err := svc.SetFile(ctx, "default", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, "default", "f"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("removed entry: %v", err)
	}
	if _, err := svc.Get(ctx, "default", "api"); err != nil {
		t.Errorf("the API server was touched: %v", err)
	}
	if vs := volumes(t, e.eng); len(vs) != 1 {
		t.Errorf("volumes = %d, want the removed entry's kept", len(vs))
	}
	if cs := containers(t, e.eng); len(cs) != 1 {
		t.Errorf("containers = %d, want only the API server's", len(cs))
	}
}

// TestServersFileLimitAboveHost: a servers-file entry is stored without
// asking the engine; a limit above what the engine's host has keeps it
// from starting, and its status says which.
func TestServersFileLimitAboveHost(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	svc := e.start()
	file := []switchboard.HostedRegistration{{Name: "big", Image: e.image, Limits: switchboard.HostedLimits{Memory: "999999t"}}}
	if err := svc.SetFile(context.Background(), "default", file); err != nil {
		t.Fatal(err)
	}
	st := e.wait("big", "failed", isStatus(switchboard.HostedFailed))
	if !strings.Contains(st.LastError, "resource_limits.memory") || !strings.Contains(st.LastError, "the Docker engine's host has") {
		t.Errorf("last error = %q, want it to name resource_limits.memory and the host's memory", st.LastError)
	}
	if cs := containers(t, e.eng); len(cs) != 0 {
		t.Errorf("containers = %d, want none", len(cs))
	}
}

// TestRestartPolicyOnCleanExit: exit 0 is restarted under "always" (and
// is no crash), and stays down under "on-failure".
func TestRestartPolicyOnCleanExit(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	e.start()
	e.register(switchboard.HostedRegistration{Name: "always", RestartPolicy: hosted.PolicyAlways, Environment: map[string]string{"MCPFIXTURE_EXIT": "0"}})
	e.register(switchboard.HostedRegistration{Name: "onfail", Environment: map[string]string{"MCPFIXTURE_EXIT": "0"}})
	st := e.wait("always", "restarts", func(s switchboard.HostedStatus) bool { return s.RestartCount >= 2 })
	if st.CrashCount != 0 || st.LastCrash != nil {
		t.Errorf("clean exits counted as crashes: %+v", st)
	}
	st = e.wait("onfail", "stopped", isStatus(switchboard.HostedStopped))
	if st.RestartCount != 0 || st.CrashCount != 0 {
		t.Errorf("on-failure after exit 0: %+v", st)
	}
}

// TestVolumeNamesPerPath: the old names made /a/b and /a_b of one server
// one volume; now each path has its own. The volume an earlier version
// made for /a/b (its labels say /a/b) is adopted, not handed to /a_b, and
// a delete removes both.
func TestVolumeNamesPerPath(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	ctx := context.Background()
	cfg := `{"name":"paths","image":"` + e.image + `","volumes":["/a/b","/a_b"]}`
	row, err := e.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: e.image, Config: json.RawMessage(cfg), Status: "running", Provider: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	legacy := engine.LegacyHostedVolume(row.ID, "/a/b")
	if legacy != engine.LegacyHostedVolume(row.ID, "/a_b") {
		t.Fatal("the legacy names of /a/b and /a_b differ: the test no longer reproduces the collision")
	}
	if err := e.eng.CreateVolume(ctx, legacy, map[string]string{engine.LabelKind: hosted.KindMCPServer, engine.LabelRef: row.ID,
		engine.LabelProject: "default", hosted.LabelServer: "paths", hosted.LabelPath: "/a/b"}); err != nil {
		t.Fatal(err)
	}
	svc := e.start()
	e.wait("paths", "started", func(s switchboard.HostedStatus) bool { return s.StartedAt != nil })
	byPath := map[string]string{}
	for _, v := range volumes(t, e.eng) {
		byPath[v.Labels[hosted.LabelPath]] = v.Name
	}
	if len(byPath) != 2 || byPath["/a/b"] != legacy || byPath["/a_b"] == legacy || byPath["/a_b"] == "" {
		t.Errorf("volumes by path %v, want /a/b on its legacy volume %s and /a_b on one of its own", byPath, legacy)
	}
	if err := svc.Delete(ctx, "default", "paths", false); err != nil {
		t.Fatal(err)
	}
	if vs := volumes(t, e.eng); len(vs) != 0 {
		t.Errorf("volumes after delete: %+v", vs)
	}
}
