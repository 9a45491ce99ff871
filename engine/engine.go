// Package engine is the one place Switchboard talks to a Docker Engine:
// images, hardened containers, their attach streams, exec, volumes,
// labels and cleanup. hosted/ (MCP servers in containers), catalog/ and
// sandbox/ (code execution) take it as a Provider (provider.go: what a
// service needs of a place that runs containers); nothing Docker-typed
// leaves it. It also owns what is the same for every service: names
// (Name, injective), the sweep of dead owners' containers (Sweeper) and
// a project's teardown (Teardown, each service a ProjectHolder).
//
// Ownership has one rule. Every object it creates carries LabelManaged,
// LabelInstance (the gateway instance's name, shared by replicas) and
// LabelStore (the identity of the store that owns it: one data dir or
// database), and what it serves: LabelKind, LabelProject and LabelRef
// (the store row or session it belongs to). An engine finds, adopts and
// removes only its instance's objects that carry its store's identity (or
// none: see ours), so two gateways given one instance name on two stores
// never touch each other's. Every container also carries LabelOwner, the
// owner id of the gateway process that created it (see package lease),
// and only that process changes it: RemoveOwned removes the caller's own,
// and Sweep removes those whose owner is no longer alive (a gateway
// killed with -9), never a live one's, so a second gateway on the same
// data dir or a replica on the same database leaves the first one's
// containers alone. Volumes outlive processes and carry no
// owner: the store row named by LabelRef owns them, and whoever deletes
// the row removes the volume.
//
// Errors are the root package's sentinels: ErrNotFound, ErrConflict,
// ErrInvalid, ErrUnavailable (the engine cannot be reached) and
// ErrInternal, each with a message safe to show a client.
package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// ProviderName names this implementation of Provider in what the gateway stores and
// reports (a workspace row's provider, a hosted server's status).
const ProviderName = "docker"

// Labels on every object the engine creates, and the ones callers set.
const (
	LabelManaged  = "io.switchboard.managed"  // "1" on everything we create
	LabelInstance = "io.switchboard.instance" // Options.Instance
	LabelStore    = "io.switchboard.store"    // Options.Store, the identity of the store that owns it
	LabelOwner    = "io.switchboard.owner"    // containers: Options.Owner, the gateway process holding it
	LabelKind     = "io.switchboard.kind"     // the caller's kind: "mcp_server", "catalog", "sandbox", "workspace", "helper"
	LabelProject  = "io.switchboard.project"  // the project it serves
	LabelRef      = "io.switchboard.ref"      // the store row or session it belongs to
)

// Options configure an Engine.
type Options struct {
	// Host is the engine's address ("unix:///var/run/docker.sock",
	// "tcp://host:2375"); empty takes DOCKER_HOST, then the default socket.
	Host string
	// Instance names this gateway instance; every object carries it. It
	// must be stable across restarts of the same gateway (a hash of its
	// data dir or database, say) and differ between gateways.
	Instance string
	// Owner is the owner id of this gateway process (lease.Process.ID),
	// put on every container it creates. "" leaves containers ownerless:
	// any Sweep of the instance removes them (commands and tests that
	// hold no lease).
	Owner string
	// Store is the identity of the gateway's store (the id it keeps),
	// put on every object; the engine lists, adopts and removes only
	// objects carrying it or none. "" (commands and tests that open no
	// store) takes every object of the instance as its own.
	Store  string
	Logger *slog.Logger
	// DiskDir is a directory on the engine's host for the file system
	// images of sized volumes (CreateSizedVolume); "" turns them off.
	DiskDir string
	// Runtime is the container runtime setting: "" or RuntimeAuto, or a
	// runtime name the engine lists (see ChooseRuntime).
	Runtime string
	// ProbeImage is the image the runtime probe runs in (it needs a
	// shell, coreutils and python3: the sandbox image); with "" auto
	// always takes the engine's default runtime, and a named one is used
	// unprobed.
	ProbeImage string
	// Prefer is the runtime auto prefers; "" is RuntimeGVisor. Tests
	// name a deliberately broken runtime here to see auto fall back.
	Prefer string
}

// Engine is a connection to one Docker Engine on behalf of one gateway
// instance. It is safe for concurrent use.
type Engine struct {
	cli      *client.Client
	host     string
	instance string
	owner    string
	store    string
	log      *slog.Logger
	disk     *disks

	foreignMu sync.Mutex
	foreign   map[string]bool // other stores' identities already warned of

	pulls pulls

	infoMu sync.Mutex
	info   Info
	infoAt time.Time // zero: not read yet

	rt        runtimes
	probesRun atomic.Int64 // probes this engine ran (tests check reuse)
}

// New returns an Engine for opts. It does no I/O: an engine that is down
// shows up on the first call (Ping says why).
func New(opts Options) (*Engine, error) {
	if opts.Instance == "" {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "engine: an instance name is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	o := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		o = append(o, client.WithHost(opts.Host))
	}
	cli, err := client.New(o...)
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrInvalid, "Docker engine address is invalid: %v; set DOCKER_HOST to unix:///var/run/docker.sock or tcp://host:port", err)
	}
	if opts.Runtime == RuntimeAuto {
		opts.Runtime = ""
	}
	return &Engine{cli: cli, host: cli.DaemonHost(), instance: opts.Instance, owner: opts.Owner, store: opts.Store, log: opts.Logger, disk: newDisks(opts.DiskDir),
		rt: runtimes{setting: opts.Runtime, probeImage: opts.ProbeImage, prefer: cmp.Or(opts.Prefer, RuntimeGVisor)}}, nil
}

// Close releases the client's connections.
func (e *Engine) Close() error { return e.cli.Close() }

// Instance returns the instance name this engine labels objects with.
func (e *Engine) Instance() string { return e.instance }

// Store returns the store identity this engine labels objects with.
func (e *Engine) Store() string { return e.store }

// Owner returns the owner id this engine labels containers with.
func (e *Engine) Owner() string { return e.owner }

// Host returns the engine address in use.
func (e *Engine) Host() string { return e.host }

// Ping checks that the engine answers. Errors: ErrUnavailable.
func (e *Engine) Ping(ctx context.Context) error {
	if _, err := e.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return e.unreachable(err)
	}
	return nil
}

func (e *Engine) unreachable(err error) error {
	return switchboard.Errorf(switchboard.ErrUnavailable, "Docker engine not reachable at %s: %s; start Docker or set DOCKER_HOST", e.host, causeText(err))
}

// Info is what the gateway needs to know about the engine.
type Info struct {
	ServerVersion  string
	Driver         string
	DefaultRuntime string
	Runtimes       []string
	NCPU           int
	MemTotal       int64
	// DiskQuota is true when the storage driver enforces a per-container
	// size (overlay2 on xfs with project quotas, btrfs, zfs).
	DiskQuota bool

	runtimeArgs map[string]string // runtime -> its path and arguments
}

// HasRuntime reports whether the engine offers the named runtime.
func (i Info) HasRuntime(name string) bool {
	for _, r := range i.Runtimes {
		if r == name {
			return true
		}
	}
	return false
}

// infoTTL is how long Info keeps an answer: runtimes can be added to a
// running engine (SIGHUP), so not forever.
const infoTTL = time.Minute

// Info describes the engine; an answer is kept for a minute, for every
// caller (hosted servers, the catalog, the sandbox). Errors:
// ErrUnavailable.
func (e *Engine) Info(ctx context.Context) (Info, error) {
	e.infoMu.Lock()
	defer e.infoMu.Unlock()
	if !e.infoAt.IsZero() && time.Since(e.infoAt) < infoTTL {
		return e.info, nil
	}
	info, err := e.readInfo(ctx)
	if err != nil {
		return Info{}, err
	}
	e.info, e.infoAt = info, time.Now()
	return info, nil
}

// KnownInfo returns the last Info read, without asking the engine;
// false when none was read yet.
func (e *Engine) KnownInfo() (Info, bool) {
	e.infoMu.Lock()
	defer e.infoMu.Unlock()
	return e.info, !e.infoAt.IsZero()
}

func (e *Engine) readInfo(ctx context.Context) (Info, error) {
	res, err := e.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return Info{}, e.wrap(err, "engine info")
	}
	in := res.Info
	out := Info{ServerVersion: in.ServerVersion, Driver: in.Driver, DefaultRuntime: in.DefaultRuntime, NCPU: in.NCPU, MemTotal: in.MemTotal}
	out.runtimeArgs = map[string]string{}
	for name, r := range in.Runtimes {
		out.Runtimes = append(out.Runtimes, name)
		out.runtimeArgs[name] = r.Path + " " + strings.Join(r.Args, " ")
	}
	switch in.Driver {
	case "btrfs", "zfs":
		out.DiskQuota = true
	case "overlay2":
		for _, kv := range in.DriverStatus {
			if kv[0] == "Backing Filesystem" && kv[1] == "xfs" {
				// Only with pquota; create fails loudly otherwise, which
				// Create reports as ErrInvalid.
				out.DiskQuota = true
			}
		}
	}
	return out, nil
}

// wrap turns a client error into a domain error whose message names what
// was being done. It never leaks the engine's raw response for unknown
// failures beyond its first line.
func (e *Engine) wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch {
	case client.IsErrConnectionFailed(err), isNetErr(err):
		return e.unreachable(err)
	case cerrdefs.IsNotFound(err):
		return switchboard.Errorf(switchboard.ErrNotFound, "%s: %s", what, causeText(err))
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return switchboard.Errorf(switchboard.ErrConflict, "%s: %s", what, causeText(err))
	case cerrdefs.IsInvalidArgument(err):
		return switchboard.Errorf(switchboard.ErrInvalid, "%s: %s", what, causeText(err))
	case cerrdefs.IsUnavailable(err):
		return switchboard.Errorf(switchboard.ErrUnavailable, "%s: %s", what, causeText(err))
	}
	return fmt.Errorf("%w: %s: %s", switchboard.ErrInternal, what, causeText(err))
}

func isNetErr(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || (errors.As(err, &ne) && ne.Timeout())
}

// causeText is the engine's message without the client's boilerplate.
func causeText(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "Error response from daemon: ")
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// labels returns the caller's labels plus ours (a volume's: no owner).
func (e *Engine) labels(extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+2)
	for k, v := range extra {
		l[k] = v
	}
	delete(l, LabelOwner)
	l[LabelManaged] = "1"
	l[LabelInstance] = e.instance
	delete(l, LabelStore)
	if e.store != "" {
		l[LabelStore] = e.store
	}
	return l
}

// containerLabels are a container's: labels plus this process as owner.
func (e *Engine) containerLabels(extra map[string]string) map[string]string {
	l := e.labels(extra)
	if e.owner != "" {
		l[LabelOwner] = e.owner
	}
	return l
}

// filters selects this instance's objects carrying the given labels; ours
// then keeps those of this store (a label filter cannot ask for a label
// that is absent).
func (e *Engine) filters(extra map[string]string) client.Filters {
	f := make(client.Filters).Add("label", LabelManaged+"=1", LabelInstance+"="+e.instance)
	for k, v := range extra {
		f = f.Add("label", k+"="+v)
	}
	return f
}

// ours reports whether an object of this instance, by its labels,
// belongs to this engine's store. One carrying another store's identity
// belongs to another gateway that was given the same instance name: it is
// never listed, adopted or removed here, and the first one seen of each
// such store is warned of. One carrying no store identity was made before
// the label existed (or by a command that opens no store): it counts as
// this store's, as the instance name matches, and a container of it is
// still removed only when its owner is dead (Sweep's alive, which takes a
// process that runs on this host for alive whatever its store), so an
// older gateway that still runs keeps its containers.
func (e *Engine) ours(kind, name string, l map[string]string) bool {
	s := l[LabelStore]
	if e.store == "" || s == "" || s == e.store {
		return true
	}
	e.foreignMu.Lock()
	warned := e.foreign[s]
	if !warned {
		if e.foreign == nil {
			e.foreign = map[string]bool{}
		}
		e.foreign[s] = true
	}
	e.foreignMu.Unlock()
	if !warned {
		e.log.Warn("another gateway uses this instance name with another store; its containers and volumes are left alone. Give each gateway its own MCP_SERVER_INSTANCE (or leave it unset)",
			"instance", e.instance, "store", e.store, "other_store", s, kind, name)
	}
	return false
}

// ImageExists reports whether ref is present in the engine.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, ok, err := e.inspectImage(ctx, ref)
	return ok, err
}

// ImportImage creates image ref from rootfs, an uncompressed tar of the
// root file system, with Dockerfile-style changes ("CMD [\"/server\"]",
// "USER 65534:65534", "ENV K=V", "WORKDIR /x"). Nothing is pulled.
func (e *Engine) ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error {
	rc, err := e.cli.ImageImport(ctx, client.ImageImportSource{Source: rootfs, SourceName: "-"}, ref, client.ImageImportOptions{Changes: changes})
	if err != nil {
		return e.wrap(err, "import image "+ref)
	}
	defer rc.Close()
	// The body is a JSON progress stream; an error arrives inside it.
	b, err := io.ReadAll(io.LimitReader(rc, 1<<20))
	if err != nil {
		return e.wrap(err, "import image "+ref)
	}
	if i := strings.Index(string(b), `"errorDetail"`); i >= 0 {
		return fmt.Errorf("%w: import image %s: %s", switchboard.ErrInternal, ref, strings.TrimSpace(string(b[i:])))
	}
	return nil
}

// ImageID returns the id (sha256:...) of the image ref names: ErrNotFound
// when the engine has none, ErrUnavailable.
func (e *Engine) ImageID(ctx context.Context, ref string) (string, error) {
	img, found, err := e.inspectImage(ctx, ref)
	if err == nil && !found {
		err = switchboard.Errorf(switchboard.ErrNotFound, "image %s is not on the Docker engine", ref)
	}
	return img.ID, err
}

// RemoveImage removes image ref; a missing image is not an error.
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	img, found, err := e.inspectImage(ctx, ref)
	if err != nil || !found {
		return err
	}
	if _, err := e.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return e.wrap(err, "remove image "+ref)
	}
	// A private image's mark is a name too: left alone, it would keep
	// the image.
	if left, found, err := e.inspectImage(ctx, img.ID); err == nil && found && isPrivate(left) && len(left.RepoTags) == 1 && len(left.RepoDigests) == 0 {
		if _, err := e.cli.ImageRemove(ctx, privateTag(img.ID), client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return e.wrap(err, "remove image "+ref)
		}
	}
	return nil
}

// Images lists the tags of repository repo ("switchboard-test/echo").
func (e *Engine) Images(ctx context.Context, repo string) ([]string, error) {
	res, err := e.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", repo)})
	if err != nil {
		return nil, e.wrap(err, "list images")
	}
	var out []string
	for _, im := range res.Items {
		out = append(out, im.RepoTags...)
	}
	return out, nil
}

// parseTime reads the engine's RFC 3339 timestamps; the zero value stays
// zero ("0001-01-01T00:00:00Z").
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}
