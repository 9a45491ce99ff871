package engine

import (
	"context"
	"io"
	"time"
)

// Provider is what hosted servers, the catalog and the sandbox need of a
// place that runs containers: *Engine, on a Docker Engine, is its one
// implementation, and docs/kubernetes.md maps it onto Kubernetes method by
// method. It is made of five small parts, one per concern; the services
// take the whole, and nothing Docker-typed crosses it.
type Provider interface {
	Containers
	Ownership
	Volumes
	Images
	Runtimes
}

// Containers runs hardened containers (see Spec) and their processes.
type Containers interface {
	// Create makes a container from s (not started); Launch creates,
	// attaches and starts one, watched while watch lasts; StartAttached
	// (re)starts an existing one with its stdio attached first.
	Create(ctx context.Context, s Spec) (string, error)
	Launch(ctx context.Context, s Spec, watch context.Context) (Running, error)
	StartAttached(ctx context.Context, id string, watch context.Context) (Running, error)
	Start(ctx context.Context, id string) error
	Attach(ctx context.Context, id string) (*Stream, error)
	Stop(ctx context.Context, id string, timeout time.Duration) error
	Remove(ctx context.Context, id string) error
	Pause(ctx context.Context, id string) error
	Unpause(ctx context.Context, id string) error
	Exec(ctx context.Context, id string, s ExecSpec) (int, error)
	WaitNextExit(ctx context.Context, id string) <-chan Exit
	Inspect(ctx context.Context, id string) (State, error)
	Logs(ctx context.Context, id string, tail int) (string, error)
	StderrLogs(ctx context.Context, id string, tail int) (string, error)
	Stats(ctx context.Context, id string) (Stats, error)
}

// Ownership is who owns what runs: the instance and store every object
// carries, the gateway process every container carries, and removal of
// one's own (see the package comment).
type Ownership interface {
	Instance() string
	Store() string
	Owner() string
	// RemoveOwned removes this process's containers carrying labels;
	// TakeOver removes those of a dead owner before a replica starts its
	// own.
	RemoveOwned(ctx context.Context, labels map[string]string) ([]string, error)
	TakeOver(ctx context.Context, labels map[string]string) ([]string, error)
}

// Volumes keeps named, labelled volumes, sized where the host allows.
type Volumes interface {
	CreateVolume(ctx context.Context, name string, labels map[string]string) error
	CreateSizedVolume(ctx context.Context, name string, labels map[string]string, d Disk) error
	FindVolume(ctx context.Context, name string, labels map[string]string, legacy ...string) (string, error)
	InspectVolume(ctx context.Context, name string) (Volume, error)
	ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error)
	RemoveVolume(ctx context.Context, name string) error
	DiskLimits() error
}

// Images are what containers run: checked against the operator's rules,
// pulled as a policy says, or imported from a root file system.
type Images interface {
	CheckImage(ref string) error
	EnsureImage(ctx context.Context, ref string, opts PullOptions) error
	ImageExists(ctx context.Context, ref string) (bool, error)
	ImportImage(ctx context.Context, rootfs io.Reader, ref string, changes []string) error
}

// Runtimes is the place itself: whether it answers, its resources, and
// the container runtime (runc, gVisor) each container runs under.
type Runtimes interface {
	Ping(ctx context.Context) error
	Info(ctx context.Context) (Info, error)
	KnownInfo() (Info, bool)
	ChooseRuntime(ctx context.Context, override string, needs RuntimeNeeds) (RuntimeChoice, error)
	ChosenRuntime(ctx context.Context, override string, needs RuntimeNeeds) (RuntimeChoice, bool, error)
	Runtimes() RuntimeReport
}

var _ Provider = (*Engine)(nil)
