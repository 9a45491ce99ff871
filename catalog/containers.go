package catalog

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// instance is one started catalog container with an MCP connection to it
// over its attach stream (the upstreams framing, as for hosted servers).
type instance struct {
	entry   *CatalogEntry
	id      string
	runtime string // what the container runs under ("runc", "runsc")
	st      *engine.Stream
	mgr     *upstreams.Manager
	long    bool
	used    bool // served a call (per-call): removed one at a time
}

// alive reports whether the container's stream is still attached.
func (in *instance) alive() bool {
	select {
	case <-in.st.Done():
		return false
	default:
		return true
	}
}

// oneStream hands the manager the container's stream once: a catalog
// container is not restarted behind the session's back.
type oneStream struct {
	st    *engine.Stream
	name  string
	taken atomic.Bool
}

func (s *oneStream) OpenStream(context.Context, switchboard.ServerSpec) (upstreams.Stream, error) {
	if s.taken.Swap(true) {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q: its container exited; run %s again to start a new one", s.name, ToolAdd)
	}
	return s.st, nil
}

func (o *OnDemand) errNoEngine() error {
	if o.opts.EngineErr != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "catalog servers need containers: %s", switchboard.Message(o.opts.EngineErr))
	}
	return switchboard.Errorf(switchboard.ErrConfig, "catalog servers need a Docker engine; start Docker, or set DOCKER_HOST to its address")
}

// errFull is the answer when MaxContainers catalog containers run.
func (o *OnDemand) errFull() error {
	return switchboard.Errorf(switchboard.ErrResourceLimit, "the gateway already runs %d catalog containers (MCP_SERVER_CATALOG_MAX_CONTAINERS); %s a long-lived server, end an idle session, or try again when calls finish", o.opts.MaxContainers, ToolRemove)
}

// reserveLocked takes one of MaxContainers for a container about to
// start; false when none is free or the service is closed.
func (o *OnDemand) reserveLocked() bool {
	if o.closed || o.count >= o.opts.MaxContainers {
		return false
	}
	o.count++
	return true
}

// reserveEvictLocked is reserveLocked for a container a caller waits
// for: when MaxContainers are in use, a warm container (of the pool
// holding the most above its WarmPool) gives up its place, returned to be
// discarded once o.mu is released. Warm containers are speculative; a
// call or an mcp-add is not.
func (o *OnDemand) reserveEvictLocked() (ok bool, evicted *instance) {
	if o.reserveLocked() {
		return true, nil
	}
	if o.closed {
		return false, nil
	}
	var from *pool
	for _, p := range o.pools {
		if len(p.warm) > 0 && (from == nil || len(p.warm)-o.opts.WarmPool > len(from.warm)-o.opts.WarmPool) {
			from = p
		}
	}
	if from == nil {
		return false, nil
	}
	select {
	case in := <-from.warm:
		return true, in // its reservation is the caller's now
	default:
		return false, nil
	}
}

// unreserve gives back a reservation whose container never started.
func (o *OnDemand) unreserve() {
	o.mu.Lock()
	o.count--
	o.mu.Unlock()
}

// volumeFor is the engine volume of a catalog entry's named volume in
// project, carrying labels l: shared by that project's sessions and
// entries, never by another project's or another gateway's (the name is
// made of the instance, the store's identity, the project and the
// volume's name: two gateways given one instance name on two stores get
// two volumes). One
// an earlier version named (engine.LegacyCatalogVolumes) is kept when its
// labels are exactly l's.
func (o *OnDemand) volumeFor(ctx context.Context, project, name string, l map[string]string) (string, error) {
	inst := o.eng.Instance()
	return o.eng.FindVolume(ctx, engine.Name("catalog", inst, o.eng.Store(), project, name), l, engine.LegacyCatalogVolumes(inst, project, name)...)
}

// start creates, attaches, starts and initializes a container of e for
// project; owner labels it (a session id, or "pool"). The caller holds a
// reservation (reserveLocked) and gives it back if start fails.
func (o *OnDemand) start(ctx context.Context, project, owner string, e *CatalogEntry, long bool, onPull func(switchboard.PullProgress)) (*instance, error) {
	if o.eng == nil {
		return nil, o.errNoEngine()
	}
	env, err := o.environment(ctx, project, e)
	if err != nil {
		return nil, err
	}
	// A create, attach and start are never cut off half-way by a client
	// leaving: a created container must be either started and owned, or
	// removed here.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.opts.ConnectTimeout)
	defer cancel()
	if err := o.pull(ctx, project, e, onPull); err != nil {
		return nil, err
	}
	info, err := o.eng.Info(cctx)
	if err != nil {
		return nil, catalogErr(e, err)
	}
	rt, err := o.eng.ChooseRuntime(cctx, e.Runtime, engine.RuntimeNeeds{Network: e.Network != "none"})
	if err != nil {
		return nil, catalogErr(e, err)
	}
	if rt.Warning != "" {
		o.log.Warn("catalog: "+rt.Warning, "server", e.Name)
	}
	l := map[string]string{engine.LabelKind: KindCatalog, engine.LabelRef: owner, engine.LabelProject: project, hosted.LabelServer: e.Name}
	spec := engine.Spec{
		Image: e.Image, Cmd: e.Command, Env: env, User: e.User, Labels: l, Stdin: true,
		NanoCPUs: int64(hosted.DefaultCPU * 1e9), MemoryBytes: hosted.DefaultMemoryBytes, PidsLimit: hosted.DefaultPids,
		Network: e.Network, ReadOnlyRoot: e.ReadOnlyRoot,
		Tmpfs:       map[string]string{"/tmp": "rw,nosuid,nodev,size=64m"},
		StopTimeout: o.opts.StopTimeout,
	}
	if info.DiskQuota {
		spec.DiskBytes, spec.DiskQuota = hosted.DefaultDiskBytes, true
	}
	spec.Runtime = rt.Runtime
	for _, v := range e.Volumes {
		// The owner is the project: every entry naming the volume shares
		// it, wherever it mounts it, so it carries neither the entry nor
		// the path (labels that reuse compares).
		vl := map[string]string{engine.LabelKind: KindCatalog, engine.LabelProject: project}
		name, err := o.volumeFor(cctx, project, v.Name, vl)
		if err != nil {
			return nil, catalogErr(e, err)
		}
		if err := o.eng.CreateVolume(cctx, name, vl); err != nil {
			return nil, catalogErr(e, err)
		}
		spec.Mounts = append(spec.Mounts, engine.Mount{Volume: name, Target: v.Target, ReadOnly: v.ReadOnly})
	}
	run, err := o.eng.Launch(cctx, spec, nil)
	if err != nil {
		return nil, catalogErr(e, err)
	}
	id, st := run.ID, run.Stream
	fail := func(err error) (*instance, error) {
		if rerr := o.eng.Remove(context.WithoutCancel(cctx), id); rerr != nil {
			o.log.Warn("removing a catalog container that did not start", "server", e.Name, "container", hosted.ShortID(id), "err", rerr)
		}
		return nil, err
	}
	mgr := upstreams.New(upstreams.Options{Version: o.opts.Version, CallTimeout: o.opts.CallTimeout,
		ConnectTimeout: o.opts.ConnectTimeout, MaxMessageBytes: o.opts.MaxMessageBytes,
		Streams: &oneStream{st: st, name: e.Name},
		Logger:  o.log.With("catalog_server", e.Name, "container", hosted.ShortID(id))})
	mgr.Apply(cctx, []switchboard.ServerSpec{{Name: e.Name, Transport: switchboard.TransportHosted, CallTimeout: o.opts.CallTimeout}})
	if err := mgr.Connect(ctx, e.Name); err != nil {
		msg := switchboard.Message(err)
		if tail := strings.TrimSpace(hosted.RedactEnv(st.Stderr(), env, e.Command)); tail != "" {
			msg += "; its stderr ends: " + switchboard.Clip(lastLine(tail))
		}
		_ = mgr.Close(context.WithoutCancel(cctx))
		st.Close()
		return fail(switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q did not start: %s", e.Name, msg))
	}
	o.countRuntime(e.Name, rt, 1)
	return &instance{entry: e, id: id, runtime: rt.Name, st: st, mgr: mgr, long: long}, nil
}

// countRuntime counts one container of entry more (n 1) or fewer (-1)
// under rt, and keeps rt as the entry's last choice when one starts.
func (o *OnDemand) countRuntime(entry string, rt engine.RuntimeChoice, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runtimes == nil {
		o.runtimes = map[string]*EntryRuntime{}
	}
	r := o.runtimes[entry]
	if r == nil {
		r = &EntryRuntime{Containers: map[string]int{}}
		o.runtimes[entry] = r
	}
	if r.Containers[rt.Name] += n; r.Containers[rt.Name] <= 0 {
		delete(r.Containers, rt.Name)
	}
	if n > 0 {
		r.Last, r.Warning = rt.Name, rt.Warning
	}
}

// pull makes e's image present as its pull policy says, with the
// calling project's registry credentials, telling onPull (when set) how
// a pull goes. The wait ends with ctx (the pull goes on for the next
// caller).
func (o *OnDemand) pull(ctx context.Context, project string, e *CatalogEntry, onPull func(switchboard.PullProgress)) error {
	policy := engine.PullPolicy(e.PullPolicy)
	if policy == "" {
		policy = o.opts.PullPolicy
	}
	var auth *engine.RegistryAuth
	if a := e.RegistryAuth; a != nil {
		vals, err := o.opts.Secrets(ctx, project)
		if err != nil {
			return catalogErr(e, err)
		}
		lines, missing := hosted.ExpandEnv(map[string]string{"U": a.Username, "P": a.Password}, nil, vals)
		if len(missing) > 0 {
			return switchboard.Errorf(switchboard.ErrConfig, "catalog server %q: registryAuth needs secret %s of project %q, which is missing; set it first", e.Name, strings.Join(missing, ", "), project)
		}
		auth = &engine.RegistryAuth{}
		for _, l := range lines {
			if k, v, _ := strings.Cut(l, "="); k == "U" {
				auth.Username = v
			} else {
				auth.Password = v
			}
		}
	}
	if err := o.eng.EnsureImage(ctx, e.Image, engine.PullOptions{Policy: policy, Auth: auth, Owner: project, Progress: onPull}); err != nil {
		if errors.Is(err, switchboard.ErrUnavailable) && !strings.Contains(err.Error(), "image") {
			return catalogErr(e, err)
		}
		hint := ""
		if errors.Is(err, switchboard.ErrForbidden) {
			hint = " (registryAuth, from the calling project's secrets)"
		}
		return switchboard.Errorf(switchboard.KindOf(err), "catalog server %q: %s%s", e.Name, switchboard.Message(err), hint)
	}
	return nil
}

// catalogErr names the catalog server in an engine error, without the
// engine's address.
func catalogErr(e *CatalogEntry, err error) error {
	switch {
	case errors.Is(err, switchboard.ErrUnavailable):
		return switchboard.Errorf(switchboard.ErrUnavailable, "catalog server %q: the Docker engine is not reachable; start Docker, or set DOCKER_HOST to its address", e.Name)
	case errors.Is(err, context.Canceled), errors.Is(err, switchboard.ErrCanceled):
		return switchboard.Errorf(switchboard.ErrCanceled, "catalog server %q: starting it was cancelled", e.Name)
	}
	return switchboard.Errorf(switchboard.ErrConfig, "catalog server %q: %s", e.Name, switchboard.Message(err))
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// environment resolves an entry's env values and secrets from the
// project's secrets.
func (o *OnDemand) environment(ctx context.Context, project string, e *CatalogEntry) ([]string, error) {
	if len(e.Env) == 0 && len(e.Secrets) == 0 {
		return nil, nil
	}
	vals, err := o.opts.Secrets(ctx, project)
	if err != nil {
		return nil, err
	}
	env, missing := hosted.ExpandEnv(e.Env, e.Secrets, vals)
	if len(missing) > 0 {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "catalog server %q needs secret %s of project %q; set it (switchboard secrets set NAME) and run %s again",
			e.Name, strings.Join(missing, ", "), project, ToolAdd)
	}
	return env, nil
}

// retire removes an instance's container in the background and gives
// back its reservation once it is gone (discard).
func (o *OnDemand) retire(in *instance) {
	if in == nil {
		return
	}
	o.discard(in, true)
}

// discard removes an instance's container in the background: removal
// first (it ends a call still running on it: its owner is gone), then the
// connection, which then closes at once. With release, the container's
// place under MaxContainers is given back once it is gone (not before:
// the cap counts containers on the engine) and goes to a pool short of
// its target, if one is, so a pool held back by the cap refills as places
// free up; without, the caller passed the place on.
func (o *OnDemand) discard(in *instance, release bool) {
	if in.long {
		o.mu.Lock()
		o.long--
		o.mu.Unlock()
	}
	o.goBG(func() {
		if in.used {
			// Containers that served their call go one at a time: in a
			// burst, removals running side by side take the engine's CPU
			// from the calls on warm containers (their places stay
			// counted until they are gone).
			o.removing <- struct{}{}
			defer func() { <-o.removing }()
		}
		rctx, cancel := context.WithTimeout(context.Background(), o.opts.StopTimeout+10*time.Second)
		if err := o.eng.Remove(rctx, in.id); err != nil {
			o.log.Warn("removing a catalog container", "server", in.entry.Name, "container", hosted.ShortID(in.id), "err", err)
		}
		cancel()
		o.countRuntime(in.entry.Name, engine.RuntimeChoice{Name: in.runtime}, -1)
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = in.mgr.Close(cctx)
		cancel()
		in.st.Close()
		if release {
			o.mu.Lock()
			o.count--
			for _, p := range o.pools {
				o.refillLocked(p)
			}
			o.mu.Unlock()
		}
	})
}
