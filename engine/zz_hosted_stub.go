// TEMPORARY stub of the documented engine API (/work/plan/engine-api.md) so
// hosted/ compiles before engine/ lands on main. Deleted at the merge.
package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

type Options struct {
	Host     string
	Instance string
	Logger   *slog.Logger
}
type Engine struct{ inst string }

func New(opts Options) (*Engine, error)          { return &Engine{inst: opts.Instance}, nil }
func (e *Engine) Close() error                   { return nil }
func (e *Engine) Instance() string               { return e.inst }
func (e *Engine) Ping(ctx context.Context) error { return errors.New("stub") }

type Info struct {
	ServerVersion, Driver, DefaultRuntime string
	Runtimes                              []string
	NCPU                                  int
	MemTotal                              int64
	DiskQuota                             bool
}

func (e *Engine) Info(ctx context.Context) (Info, error) { return Info{}, errors.New("stub") }

const LabelManaged = "io.switchboard.managed"
const LabelInstance = "io.switchboard.instance"
const LabelKind = "io.switchboard.kind"
const LabelOwner = "io.switchboard.owner"

func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) { return false, nil }

type Mount struct {
	Volume, Target string
	ReadOnly       bool
}
type Spec struct {
	Name            string
	Image           string
	Cmd, Entrypoint []string
	Env             []string
	WorkingDir      string
	User            string
	Labels          map[string]string
	Stdin           bool
	NanoCPUs        int64
	MemoryBytes     int64
	PidsLimit       int64
	DiskBytes       int64
	Network         string
	ReadOnlyRoot    bool
	Tmpfs           map[string]string
	Mounts          []Mount
	Runtime         string
	StopTimeout     time.Duration
}

func (e *Engine) Create(ctx context.Context, s Spec) (string, error) { return "", nil }

type Stream struct{ io.ReadWriter }

func (s *Stream) Stderr() string                                         { return "" }
func (s *Stream) Close() error                                           { return nil }
func (e *Engine) Attach(ctx context.Context, id string) (*Stream, error) { return nil, nil }

type Exit struct {
	Code      int
	OOMKilled bool
	Err       error
}

func (e *Engine) WaitNextExit(ctx context.Context, id string) <-chan Exit   { return nil }
func (e *Engine) WaitNotRunning(ctx context.Context, id string) <-chan Exit { return nil }
func (e *Engine) Start(ctx context.Context, id string) error                { return nil }
func (e *Engine) Stop(ctx context.Context, id string, timeout time.Duration) error {
	return nil
}
func (e *Engine) Kill(ctx context.Context, id, signal string) error { return nil }
func (e *Engine) Remove(ctx context.Context, id string) error       { return nil }

type State struct {
	ID, Name, Image, Status          string
	Running                          bool
	ExitCode                         int
	OOMKilled                        bool
	StartedAt, FinishedAt            time.Time
	IP                               string
	Labels                           map[string]string
	Runtime, NetworkMode             string
	NanoCPUs, MemoryBytes, PidsLimit int64
	ReadOnlyRoot, Init               bool
	CapDrop, SecurityOpt             []string
}

func (e *Engine) Inspect(ctx context.Context, id string) (State, error) { return State{}, nil }
func (e *Engine) List(ctx context.Context, labels map[string]string) ([]State, error) {
	return nil, nil
}

type Stats struct {
	CPUPercent                     float64
	MemoryBytes, MemoryLimit, Pids int64
}

func (e *Engine) Stats(ctx context.Context, id string) (Stats, error)           { return Stats{}, nil }
func (e *Engine) Logs(ctx context.Context, id string, tail int) (string, error) { return "", nil }

type Volume struct {
	Name, Mountpoint string
	Labels           map[string]string
}

func (e *Engine) CreateVolume(ctx context.Context, name string, labels map[string]string) error {
	return nil
}
func (e *Engine) RemoveVolume(ctx context.Context, name string) error { return nil }
func (e *Engine) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	return nil, nil
}
func (e *Engine) InspectVolume(ctx context.Context, name string) (Volume, error) {
	return Volume{}, nil
}
func (e *Engine) Reap(ctx context.Context, labels map[string]string, keep func(State) bool) ([]string, error) {
	return nil, nil
}
