package engine

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// defaultPidsLimit caps processes when a Spec sets none: a fork bomb
// stops at it.
const defaultPidsLimit = 256

// Mount is a named volume mounted into a container. The volume must
// exist when the container is created (made by CreateVolume or
// CreateSizedVolume), unless External: the engine would otherwise make an
// empty one of that name for the container, which nothing owns, and a
// workspace removed while its container was being made would come back
// empty instead of failing.
type Mount struct {
	Volume   string
	Target   string
	ReadOnly bool
	// External marks an operator's volume (MCP_SERVER_SANDBOX_VOLUMES),
	// which the engine creates when it is missing.
	External bool
}

// labelMadeForContainer marks a volume the engine made for a container
// because it was missing: the engine applies a mount's volume labels only
// to a volume it creates then.
const labelMadeForContainer = "io.switchboard.made-for-container"

// Bind mounts a host directory into a container. It exists for one
// purpose: the directories an operator lists in MCP_SERVER_SANDBOX_VOLUMES
// (environment configuration, validated by config/). Never fill one from
// a tool argument, an API request or a hosted server's registration.
// Create refuses a host path that is relative, unclean, "/", or reaches
// the Docker socket, the engine's data, /proc, /sys or /dev, and the
// engine refuses one that does not exist; propagation is rprivate.
type Bind struct {
	HostPath string
	Target   string
	ReadOnly bool
}

// bindForbidden are host paths no Bind may equal, lie under or contain.
var bindForbidden = []string{"/proc", "/sys", "/dev", "/var/run/docker.sock", "/run/docker.sock", "/var/lib/docker"}

// check refuses what no Bind may mount. Errors: ErrInvalid.
func (b Bind) check() error {
	h := b.HostPath
	if !strings.HasPrefix(h, "/") || path.Clean(h) != h || strings.Contains(h, "/../") || h == "/" {
		return switchboard.Errorf(switchboard.ErrInvalid, "bind mount: the host path must be an absolute, clean directory other than /")
	}
	if !strings.HasPrefix(b.Target, "/") || path.Clean(b.Target) != b.Target || b.Target == "/" {
		return switchboard.Errorf(switchboard.ErrInvalid, "bind mount: the container path must be absolute and clean, and not /")
	}
	for _, f := range bindForbidden {
		if h == f || strings.HasPrefix(h, f+"/") || strings.HasPrefix(f, h+"/") {
			return switchboard.Errorf(switchboard.ErrInvalid, "bind mount: %s reaches %s, which gives access to the host", h, f)
		}
	}
	return nil
}

// Spec describes a container to create. Hardening is not optional: every
// container drops all capabilities, gets no-new-privileges, an init
// process as PID 1, a pids limit, capped logs, no restart policy (the
// gateway restarts) and no network unless Network names one. There is no
// way to ask for privileged mode, devices or host namespaces; host
// directories only through Binds (see Bind: operator configuration only).
type Spec struct {
	Name       string // "" lets the engine pick
	Image      string
	Cmd        []string
	Entrypoint []string
	Env        []string // "K=V"
	WorkingDir string
	User       string
	Labels     map[string]string // LabelManaged, LabelInstance and LabelStore are added
	// Stdin keeps stdin open for an attach bridge (no TTY).
	Stdin bool
	// Ephemeral is a container that must not outlive the attach of the
	// process that launched it (a runtime probe): its stdin closes when
	// that attach ends, and once it exits the engine removes it, also
	// when the process that made it died before it could.
	Ephemeral    bool
	NanoCPUs     int64 // 1e9 is one CPU; 0 is unlimited
	MemoryBytes  int64 // also the memory+swap limit (no swap); 0 is unlimited
	PidsLimit    int64 // 0 takes 256
	DiskBytes    int64 // applied only when Info.DiskQuota, else ignored
	Network      string
	ReadOnlyRoot bool
	Tmpfs        map[string]string // path -> options ("rw,nosuid,size=64m")
	Mounts       []Mount
	// Binds are host directories from operator configuration (see Bind);
	// hosted servers never set it.
	Binds []Bind
	// Runtime is "" for the engine's default, or a runtime it lists (see
	// ChooseRuntime). Under gVisor PidsLimit and MemoryBytes stay the
	// guest's, and the host's limits are raised by the sandbox's own (see
	// GVisorHostLimits): gVisor keeps neither inside, so its callers do.
	Runtime     string
	StopTimeout time.Duration // default 10s
	// DiskQuota must be set by the caller from Info when DiskBytes should
	// be applied; the engine does not probe on every create.
	DiskQuota bool
}

// Create creates (does not start) a container. Errors: ErrNotFound when
// the image is missing (the message names it), ErrInvalid for a spec the
// engine refuses (an unknown runtime, a bad limit), ErrConflict when the
// name is taken, ErrUnavailable when the engine is down.
func (e *Engine) Create(ctx context.Context, s Spec) (string, error) {
	if s.Image == "" {
		return "", switchboard.Errorf(switchboard.ErrInvalid, "container: an image is required")
	}
	stop := int(s.StopTimeout / time.Second)
	if stop <= 0 {
		stop = 10
	}
	pids := s.PidsLimit
	if pids <= 0 {
		pids = defaultPidsLimit
	}
	mem := s.MemoryBytes
	if info, ok := e.KnownInfo(); ok && s.Runtime != "" && info.isGVisor(s.Runtime) {
		pids, mem = GVisorHostLimits(pids, mem)
	}
	network := s.Network
	if network == "" {
		network = "none"
	}
	init := true
	cfg := &container.Config{
		Image: s.Image, Cmd: s.Cmd, Entrypoint: s.Entrypoint, Env: s.Env, WorkingDir: s.WorkingDir,
		User: s.User, Labels: e.containerLabels(s.Labels), StopTimeout: &stop,
		OpenStdin: s.Stdin, StdinOnce: s.Ephemeral, AttachStdin: s.Stdin, AttachStdout: s.Stdin, AttachStderr: s.Stdin,
	}
	if network == "none" {
		cfg.NetworkDisabled = false // "none" gives a loopback-only namespace
	}
	hc := &container.HostConfig{
		Init:           &init,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		AutoRemove:     s.Ephemeral,
		NetworkMode:    container.NetworkMode(network),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		ReadonlyRootfs: s.ReadOnlyRoot,
		Tmpfs:          s.Tmpfs,
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		Runtime:        s.Runtime,
		Resources: container.Resources{
			NanoCPUs:  s.NanoCPUs,
			Memory:    mem,
			PidsLimit: &pids,
		},
	}
	if mem > 0 {
		hc.Resources.MemorySwap = mem
	}
	if s.DiskBytes > 0 && s.DiskQuota {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(s.DiskBytes, 10)}
	}
	for _, m := range s.Mounts {
		mm := mount.Mount{Type: mount.TypeVolume, Source: m.Volume, Target: m.Target, ReadOnly: m.ReadOnly}
		if !m.External {
			mm.VolumeOptions = &mount.VolumeOptions{Labels: e.labels(map[string]string{labelMadeForContainer: "1"})}
		}
		hc.Mounts = append(hc.Mounts, mm)
	}
	for _, b := range s.Binds {
		if err := b.check(); err != nil {
			return "", err
		}
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: b.HostPath, Target: b.Target, ReadOnly: b.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: s.Name, Config: cfg, HostConfig: hc})
	if err != nil {
		if cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "image") {
			return "", switchboard.Errorf(switchboard.ErrNotFound, "image %q is not present in the Docker engine; pull, build or load it first", s.Image)
		}
		return "", e.wrap(err, "create container")
	}
	if err := e.checkMounts(ctx, res.ID, s.Mounts); err != nil {
		return "", err
	}
	return res.ID, nil
}

// checkMounts fails a container created on a volume that did not exist:
// the container and the empty volume the engine made for it are removed.
func (e *Engine) checkMounts(ctx context.Context, id string, mounts []Mount) error {
	for _, m := range mounts {
		if m.External {
			continue
		}
		v, err := e.InspectVolume(ctx, m.Volume)
		if err == nil && v.Labels[labelMadeForContainer] == "" {
			continue
		}
		cctx := context.WithoutCancel(ctx)
		if rerr := e.Remove(cctx, id); rerr != nil {
			e.log.Warn("container on a missing volume: removing it", "container", id, "err", rerr)
		}
		if err == nil {
			// Only the engine's empty volume: nothing else mounts it yet.
			if rerr := e.RemoveVolume(cctx, m.Volume); rerr != nil {
				e.log.Warn("container on a missing volume: removing the volume made for it", "volume", m.Volume, "err", rerr)
			}
			return switchboard.Errorf(switchboard.ErrNotFound, "volume %q does not exist (removed while its container was being made); nothing was started", m.Volume)
		}
		return err
	}
	return nil
}

// Start starts a created or stopped container.
func (e *Engine) Start(ctx context.Context, id string) error {
	_, err := e.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
	return e.wrap(err, "start container")
}

// Stop sends SIGTERM and SIGKILL after timeout. A stopped or missing
// container is not an error.
func (e *Engine) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int((timeout + time.Second - 1) / time.Second)
	_, err := e.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs})
	if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsNotModified(err) {
		return e.wrap(err, "stop container")
	}
	return nil
}

// Kill sends signal ("KILL", "TERM") to the container's main process.
func (e *Engine) Kill(ctx context.Context, id, signal string) error {
	_, err := e.cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: signal})
	return e.wrap(err, "kill container")
}

// Remove removes a container, running or not; a missing one is not an
// error. Its named volumes stay.
func (e *Engine) Remove(ctx context.Context, id string) error {
	_, err := e.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		// "removal already in progress": someone else (a sweep, another
		// replica) removes it. Wait for that removal to end, so that once
		// Remove returns the container and its name are gone and a
		// container of the same name can be created.
		if cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "in progress") {
			return e.waitRemoved(ctx, id)
		}
		return e.wrap(err, "remove container")
	}
	return nil
}

// waitRemoved waits, bounded by ctx, until a container being removed is
// gone.
func (e *Engine) waitRemoved(ctx context.Context, id string) error {
	wr := e.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionRemoved})
	select {
	case <-wr.Result:
		return nil
	case err := <-wr.Error:
		if cerrdefs.IsNotFound(err) {
			return nil // gone before the wait began
		}
		return e.wrap(err, "wait for a container's removal")
	}
}

// Pause freezes every process of a container.
func (e *Engine) Pause(ctx context.Context, id string) error {
	_, err := e.cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
	return e.wrap(err, "pause container")
}

// Unpause resumes a paused container.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	_, err := e.cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
	return e.wrap(err, "unpause container")
}

// Exit is how a container's main process ended.
type Exit struct {
	Code      int
	OOMKilled bool
	Err       error // the wait itself failed (engine connection lost)
}

// WaitNextExit reports the container's next exit. Register it before
// Start, so a process that dies at once is not missed.
func (e *Engine) WaitNextExit(ctx context.Context, id string) <-chan Exit {
	return e.wait(ctx, id, container.WaitConditionNextExit)
}

// WaitNotRunning reports when a container (adopted, already running) stops.
func (e *Engine) WaitNotRunning(ctx context.Context, id string) <-chan Exit {
	return e.wait(ctx, id, container.WaitConditionNotRunning)
}

func (e *Engine) wait(ctx context.Context, id string, cond container.WaitCondition) <-chan Exit {
	out := make(chan Exit, 1)
	wr := e.cli.ContainerWait(ctx, id, client.ContainerWaitOptions{Condition: cond})
	go func() {
		select {
		case r := <-wr.Result:
			ex := Exit{Code: int(r.StatusCode)}
			if r.Error != nil && r.Error.Message != "" {
				ex.Err = switchboard.Errorf(switchboard.ErrInternal, "wait: %s", r.Error.Message)
			}
			// OOM is only in the inspect state.
			ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if st, err := e.Inspect(ictx, id); err == nil {
				ex.OOMKilled = st.OOMKilled
			}
			cancel()
			out <- ex
		case err := <-wr.Error:
			out <- Exit{Code: -1, Err: e.wrap(err, "wait for container")}
		}
	}()
	return out
}

// State is a container as inspected.
type State struct {
	ID, Name, Image, Status string
	Running                 bool
	Paused                  bool
	ExitCode                int
	OOMKilled               bool
	StartedAt, FinishedAt   time.Time
	// IP is the first network's address; "" without a network.
	IP           string
	Labels       map[string]string
	Runtime      string
	NetworkMode  string
	NanoCPUs     int64
	MemoryBytes  int64
	PidsLimit    int64
	ReadOnlyRoot bool
	Init         bool
	CapDrop      []string
	SecurityOpt  []string
	StorageOpt   map[string]string
	Mounts       []Mount
	Binds        []Bind
}

// Inspect returns a container's state. Errors: ErrNotFound.
func (e *Engine) Inspect(ctx context.Context, id string) (State, error) {
	res, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return State{}, e.wrap(err, "inspect container")
	}
	c := res.Container
	st := State{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/"), Image: c.Image}
	if c.Config != nil {
		st.Labels = c.Config.Labels
		st.Image = c.Config.Image
	}
	if c.State != nil {
		st.Status = string(c.State.Status)
		st.Running, st.Paused = c.State.Running, c.State.Paused
		st.ExitCode, st.OOMKilled = c.State.ExitCode, c.State.OOMKilled
		st.StartedAt, st.FinishedAt = parseTime(c.State.StartedAt), parseTime(c.State.FinishedAt)
	}
	if h := c.HostConfig; h != nil {
		st.Runtime, st.NetworkMode = h.Runtime, string(h.NetworkMode)
		st.NanoCPUs, st.MemoryBytes = h.NanoCPUs, h.Memory
		if h.PidsLimit != nil {
			st.PidsLimit = *h.PidsLimit
		}
		st.ReadOnlyRoot = h.ReadonlyRootfs
		st.Init = h.Init != nil && *h.Init
		st.CapDrop, st.SecurityOpt, st.StorageOpt = h.CapDrop, h.SecurityOpt, h.StorageOpt
		for _, m := range h.Mounts {
			if m.Type == mount.TypeBind {
				st.Binds = append(st.Binds, Bind{HostPath: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
				continue
			}
			st.Mounts = append(st.Mounts, Mount{Volume: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
		}
	}
	if c.NetworkSettings != nil {
		for _, n := range c.NetworkSettings.Networks {
			if n != nil && n.IPAddress.IsValid() {
				st.IP = n.IPAddress.String()
				break
			}
		}
	}
	return st, nil
}

// List returns this store's containers of the instance (in any state)
// that carry the given labels.
func (e *Engine) List(ctx context.Context, labels map[string]string) ([]State, error) {
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: e.filters(labels)})
	if err != nil {
		return nil, e.wrap(err, "list containers")
	}
	out := make([]State, 0, len(res.Items))
	for _, c := range res.Items {
		if !e.ours("container", c.ID, c.Labels) {
			continue
		}
		st, err := e.Inspect(ctx, c.ID)
		if err != nil {
			if cerrdefs.IsNotFound(err) || switchboardNotFound(err) {
				continue // removed meanwhile
			}
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

func switchboardNotFound(err error) bool { return errors.Is(err, switchboard.ErrNotFound) }

// RemoveOwned removes this process's containers carrying labels (its
// own only: another gateway's, live or not, are left to Sweep) and
// returns their ids.
// An engine without an owner id removes the ownerless ones.
func (e *Engine) RemoveOwned(ctx context.Context, labels map[string]string) ([]string, error) {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	if e.owner != "" {
		l[LabelOwner] = e.owner
	}
	removed, err := e.remove(ctx, l, func(st State) bool { return st.Labels[LabelOwner] != e.owner })
	ids := make([]string, len(removed))
	for i, st := range removed {
		ids[i] = st.ID
	}
	return ids, err
}

// TakeOver removes this store's containers carrying labels whoever
// created them, and returns their ids: what a replica that takes over a
// row (a hosted server whose owner died or let its lease go) does before
// it starts the row's container, so no second copy ever runs beside one
// a dead owner left on this engine.
func (e *Engine) TakeOver(ctx context.Context, labels map[string]string) ([]string, error) {
	if len(labels) == 0 {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "engine: TakeOver needs labels naming what is taken over")
	}
	removed, err := e.remove(ctx, labels, nil)
	ids := make([]string, len(removed))
	for i, st := range removed {
		ids[i] = st.ID
	}
	return ids, err
}

// Sweep removes this store's containers whose owner is not alive: a
// gateway process that ended without removing them (killed with -9), or
// none at all (an older gateway's, a command's). Those of this process and
// of every owner alive reports true for stay; when alive fails, the owner
// is taken to be alive. It returns what it removed.
func (e *Engine) Sweep(ctx context.Context, alive func(ctx context.Context, owner string) (bool, error)) ([]State, error) {
	verdict := map[string]bool{}
	return e.remove(ctx, nil, func(st State) bool {
		o := st.Labels[LabelOwner]
		if e.owner != "" && o == e.owner {
			return true
		}
		v, ok := verdict[o]
		if !ok {
			a, err := alive(ctx, o)
			if err != nil {
				e.log.Warn("engine: cannot tell whether a container's owner is alive; keeping its containers", "owner", o, "err", err)
				a = true
			}
			verdict[o], v = a, a
		}
		return v
	})
}

// remove removes this store's containers carrying labels for which
// keep returns false (all when keep is nil), and returns them. It reads
// the engine's list only (id, name, image, labels, state), not each
// container's inspect: Sweep runs every lease period.
func (e *Engine) remove(ctx context.Context, labels map[string]string, keep func(State) bool) ([]State, error) {
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: e.filters(labels)})
	if err != nil {
		return nil, e.wrap(err, "list containers")
	}
	var removed []State
	for _, c := range res.Items {
		st := State{ID: c.ID, Image: c.Image, Labels: c.Labels, Status: string(c.State), Running: c.State == container.StateRunning}
		if len(c.Names) > 0 {
			st.Name = strings.TrimPrefix(c.Names[0], "/")
		}
		if !e.ours("container", st.Name, st.Labels) || (keep != nil && keep(st)) {
			continue
		}
		if err := e.Remove(ctx, st.ID); err != nil {
			return removed, err
		}
		removed = append(removed, st)
	}
	return removed, nil
}

// Stats is a container's resource use.
type Stats struct {
	CPUPercent  float64 // of one CPU: 150 is one and a half
	MemoryBytes int64
	MemoryLimit int64
	Pids        int64
}

// Stats samples a container's resource use; it takes about a second (the
// engine takes two samples for the CPU figure).
func (e *Engine) Stats(ctx context.Context, id string) (Stats, error) {
	res, err := e.cli.ContainerStats(ctx, id, client.ContainerStatsOptions{Stream: false, IncludePreviousSample: true})
	if err != nil {
		return Stats{}, e.wrap(err, "container stats")
	}
	defer res.Body.Close()
	var s container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&s); err != nil {
		return Stats{}, e.wrap(err, "container stats")
	}
	out := Stats{MemoryBytes: int64(s.MemoryStats.Usage), MemoryLimit: int64(s.MemoryStats.Limit), Pids: int64(s.PidsStats.Current)}
	// Page cache is not the process's memory (as docker stats shows it).
	if v, ok := s.MemoryStats.Stats["total_inactive_file"]; ok && v < s.MemoryStats.Usage {
		out.MemoryBytes -= int64(v)
	} else if v, ok := s.MemoryStats.Stats["inactive_file"]; ok && v < s.MemoryStats.Usage {
		out.MemoryBytes -= int64(v)
	}
	cpuDelta := float64(s.CPUStats.CPUUsage.TotalUsage) - float64(s.PreCPUStats.CPUUsage.TotalUsage)
	sysDelta := float64(s.CPUStats.SystemUsage) - float64(s.PreCPUStats.SystemUsage)
	cpus := float64(s.CPUStats.OnlineCPUs)
	if cpus == 0 {
		cpus = float64(len(s.CPUStats.CPUUsage.PercpuUsage))
	}
	if cpuDelta > 0 && sysDelta > 0 {
		out.CPUPercent = cpuDelta / sysDelta * cpus * 100
	}
	return out, nil
}

// Logs returns up to the last tail lines the container wrote (stdout and
// stderr interleaved as the log driver kept them).
func (e *Engine) Logs(ctx context.Context, id string, tail int) (string, error) {
	return e.logs(ctx, id, tail, true)
}

// StderrLogs is Logs without the container's stdout, for a container
// whose stdout is a protocol channel (a hosted MCP server over stdio:
// its stdout lines are JSON-RPC traffic, not log).
func (e *Engine) StderrLogs(ctx context.Context, id string, tail int) (string, error) {
	return e.logs(ctx, id, tail, false)
}

func (e *Engine) logs(ctx context.Context, id string, tail int, stdout bool) (string, error) {
	if tail <= 0 {
		tail = 100
	}
	rc, err := e.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: stdout, ShowStderr: true, Tail: strconv.Itoa(tail)})
	if err != nil {
		return "", e.wrap(err, "container logs")
	}
	defer rc.Close()
	var buf capped
	buf.max = 1 << 20
	if _, err := stdcopy.StdCopy(&buf, &buf, rc); err != nil && ctx.Err() == nil {
		return buf.String(), e.wrap(err, "container logs")
	}
	return buf.String(), nil
}

// capped is a buffer that keeps the first max bytes and drops the rest.
type capped struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		if len(p) > room {
			c.b = append(c.b, p[:room]...)
		} else {
			c.b = append(c.b, p...)
		}
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// gVisor's sandbox in host terms, measured on the ptrace platform: about
// 40 host tasks for the Sentry and gofer at rest, then each guest process
// is a stub process of its own with its threads (50 sleeping processes
// took 422 host tasks; a small session's fork bomb held at its 128 by
// RLIMIT_NPROC peaked at about 2,200), and the Sentry's memory beside
// the guest's.
const (
	gvisorTasksPerProcess = 48
	gvisorSentryTasks     = 256
	gvisorSentryMemory    = 128 << 20
)

// GVisorHostLimits turns a guest's process and memory limits into the
// host limits of its gVisor sandbox (what the container's cgroup gets). Hitting the host's process limit
// crashes the Sentry (the whole container ends, exit 2), and its memory
// limit OOM-kills the Sentry; so the host limits are the guest's plus
// what the sandbox itself uses, and the guest's are kept inside by the
// caller (the sandbox's supervisor: RLIMIT_AS and RLIMIT_NPROC).
func GVisorHostLimits(pids, mem int64) (int64, int64) {
	pids = pids*gvisorTasksPerProcess + gvisorSentryTasks
	if mem > 0 {
		mem += gvisorSentryMemory
	}
	return pids, mem
}
