package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// A sized volume is a named local volume whose data lives in an ext4 file
// system image of a fixed size, so a program that fills it gets ENOSPC
// ("no space left on device") and nothing else notices. The local volume
// driver cannot mount a plain file (its o=loop is passed to the kernel,
// which refuses it), so each image is attached to a loop device and the
// volume's device is a symlink in the disk directory that names it:
//
//	<DiskDir>/<volume>.img  sparse ext4 image, root owned by Disk.UID:GID
//	<DiskDir>/<volume>.dev  symlink to the loop device backing the image
//
// The engine mounts the volume (through the symlink, which the kernel
// follows) when the first container using it starts and unmounts it when
// the last one stops. Loop device numbers do not survive a reboot, so
// RestoreDisks re-attaches every image whose device is gone and points its
// symlink at the new one. RemoveVolume detaches the device and deletes the
// image.

// Disk is the size and owner of a sized volume.
type Disk struct {
	// Bytes is the size of the file system image. ext4's journal, inode
	// tables and reserve take about 6% of it (a 1 GiB image holds 958 MiB
	// of files); on the host, the sparse image takes only what is written.
	Bytes int64
	// UID and GID own the volume's root directory: the user the
	// containers that mount it run as.
	UID, GID int
}

// minDiskBytes is the smallest image worth a file system.
const minDiskBytes = 16 << 20

// diskMountOpts: no devices or setuid files from inside a workspace, and
// deleted files give their blocks back to the host (the loop device turns
// discards into holes in the sparse image).
const diskMountOpts = "nodev,nosuid,discard"

// diskTools are the programs sized volumes need on the engine's host.
var diskTools = []string{"mkfs.ext4", "debugfs", "losetup"}

// disks is an engine's sized-volume state.
type disks struct {
	dir string

	limitsMu sync.Mutex
	decided  bool
	err      error // DiskLimits' answer, once decided

	mu sync.Mutex // serialises image creation, attachment and removal
}

func newDisks(dir string) *disks { return &disks{dir: dir} }

func (d *disks) image(name string) string { return filepath.Join(d.dir, name+".img") }
func (d *disks) link(name string) string  { return filepath.Join(d.dir, name+".dev") }

// DiskLimits reports whether sized volumes work with this engine: nil
// when they do, else an ErrConfig error saying why not (no disk directory
// configured, an engine reached over TCP or run rootless, a gateway not
// running as root, no loop devices, mkfs.ext4, debugfs or losetup
// missing). It is decided on the first call that reaches the engine and
// the answer kept.
func (e *Engine) DiskLimits() error {
	d := e.disk
	d.limitsMu.Lock()
	defer d.limitsMu.Unlock()
	if d.decided {
		return d.err
	}
	final, err := e.checkDiskLimits()
	d.decided, d.err = final, err
	return err
}

// errEngineUnreachable: the engine's socket did not answer.
var errEngineUnreachable = errors.New("the Docker engine's socket cannot be reached")

// checkDiskLimits returns DiskLimits' answer, and whether it is final.
func (e *Engine) checkDiskLimits() (final bool, err error) {
	off := func(why string, args ...any) error {
		return switchboard.Errorf(switchboard.ErrConfig, "sized volumes are off: "+why, args...)
	}
	dir := e.disk.dir
	if dir == "" {
		return true, off("no disk directory is configured")
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return true, off("the disk directory must be an absolute, clean path")
	}
	sock, ok := strings.CutPrefix(e.host, "unix://")
	if !ok {
		return true, off("the Docker engine is not reached through a local socket; file system images must live on the engine's host")
	}
	if os.Geteuid() != 0 {
		return true, off("the gateway does not run as root, which attaching loop devices needs")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return true, off("this host has no loop devices (/dev/loop-control)")
	}
	for _, tool := range diskTools {
		if _, err := exec.LookPath(tool); err != nil {
			return true, off("%s is not installed (packages e2fsprogs and util-linux)", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true, off("the disk directory cannot be created: %v", errors.Unwrap(err))
	}
	if err := engineSeesDir(sock, dir); err != nil {
		// An engine not up yet may be up at the next call.
		return !errors.Is(err, errEngineUnreachable), off("%s", err)
	}
	return true, nil
}

// CreateSizedVolume creates a named local volume carrying labels (as
// CreateVolume does) whose contents cannot grow past d.Bytes: writes
// beyond it fail with ENOSPC inside the container. A volume that already
// exists with every label it would be given (see CreateVolume) is reused
// as it is, sized or not, and its image attached if its loop device is
// gone; one that differs in any label is ErrConflict. Errors: ErrInvalid for a bad name or a
// size under 16 MiB, ErrConfig when DiskLimits is not nil, ErrInternal
// when making the file system fails, and the engine's errors.
func (e *Engine) CreateSizedVolume(ctx context.Context, name string, labels map[string]string, d Disk) error {
	if !validVolumeName(name) {
		return switchboard.Errorf(switchboard.ErrInvalid, "sized volume: %q is not a valid volume name", name)
	}
	if d.Bytes < minDiskBytes {
		return switchboard.Errorf(switchboard.ErrInvalid, "sized volume: the size must be at least %d MiB", minDiskBytes>>20)
	}
	if d.UID < 0 || d.GID < 0 {
		return switchboard.Errorf(switchboard.ErrInvalid, "sized volume: the owner must be a non-negative uid and gid")
	}
	if err := e.DiskLimits(); err != nil {
		return err
	}
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	if v, err := e.InspectVolume(ctx, name); err == nil {
		if err := e.sameOwner(name, v.Labels, e.labels(labels)); err != nil {
			return err
		}
		if _, err := os.Stat(e.disk.image(name)); err != nil {
			return nil // a plain volume from before sizes were configured
		}
		return e.attachDisk(ctx, name)
	} else if !errors.Is(err, switchboard.ErrNotFound) {
		return err
	}
	// Leftovers of an earlier attempt that never got its volume.
	if err := e.detachDisk(ctx, name); err != nil {
		return err
	}
	if err := e.makeDisk(ctx, name, d); err != nil {
		return err
	}
	err := e.attachDisk(ctx, name)
	if err == nil {
		_, err = e.cli.VolumeCreate(ctx, client.VolumeCreateOptions{
			Name: name, Driver: "local", Labels: e.labels(labels),
			DriverOpts: map[string]string{"type": "ext4", "device": e.disk.link(name), "o": diskMountOpts},
		})
		err = e.wrap(err, "create volume "+name)
	}
	if err != nil {
		if derr := e.detachDisk(context.WithoutCancel(ctx), name); derr != nil {
			e.log.Warn("sized volume: cleanup after a failed create", "volume", name, "err", derr)
		}
		return err
	}
	return nil
}

// makeDisk writes the image: sparse, ext4 without lost+found (a root-owned
// directory the workspace's user could not remove), the root owned by
// d.UID:d.GID, nothing reserved for root, and no zeroing of the journal
// or inode tables (a fresh sparse file reads as zeroes).
func (e *Engine) makeDisk(ctx context.Context, name string, d Disk) error {
	img := e.disk.image(name)
	tmp := img + ".tmp"
	fail := func(err error) error {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: sized volume %s: %v", switchboard.ErrInternal, name, err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(err)
	}
	err = f.Truncate(d.Bytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	ext := fmt.Sprintf("root_owner=%d:%d,lazy_itable_init=1,lazy_journal_init=1", d.UID, d.GID)
	if _, err := runTool(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", ext, tmp); err != nil {
		return fail(err)
	}
	if _, err := runTool(ctx, "debugfs", "-w", "-R", "rmdir lost+found", tmp); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, img); err != nil {
		return fail(err)
	}
	return nil
}

// attachDisk makes name's symlink name a loop device backed by its image,
// attaching one when none is.
func (e *Engine) attachDisk(ctx context.Context, name string) error {
	img, link := e.disk.image(name), e.disk.link(name)
	if dev, err := os.Readlink(link); err == nil && loopBacking(dev) == img {
		return nil
	}
	devs := loopDevices(img)
	var dev string
	if len(devs) > 0 {
		dev = devs[0]
	} else {
		out, err := runTool(ctx, "losetup", "--find", "--show", img)
		if err != nil {
			return fmt.Errorf("%w: sized volume %s: %v", switchboard.ErrInternal, name, err)
		}
		dev = strings.TrimSpace(out)
	}
	tmp := link + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(dev, tmp); err != nil {
		return fmt.Errorf("%w: sized volume %s: %v", switchboard.ErrInternal, name, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: sized volume %s: %v", switchboard.ErrInternal, name, err)
	}
	e.log.Info("sized volume attached", "volume", name, "device", dev)
	return nil
}

// detachDisk detaches every loop device backed by name's image and
// deletes the image and its symlink; a volume without them is left as it
// is.
func (e *Engine) detachDisk(ctx context.Context, name string) error {
	return e.detachIn(ctx, e.disk, name)
}

// detachIn is detachDisk for the images in d's directory.
func (e *Engine) detachIn(ctx context.Context, d *disks, name string) error {
	img, link := d.image(name), d.link(name)
	var errs []error
	for _, dev := range loopDevices(img) {
		if _, err := runTool(ctx, "losetup", "-d", dev); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []string{link, link + ".tmp", img, img + ".tmp"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: sized volume %s: %v", switchboard.ErrInternal, name, err)
	}
	return nil
}

// removeDisk is RemoveVolume's part: once the volume is gone, so are its
// loop device and image, in dir (the one the volume's device named, which
// an engine without a disk directory, or with another, removes too). It
// does nothing without a directory.
func (e *Engine) removeDisk(ctx context.Context, dir, name string) error {
	if dir == "" || !validVolumeName(name) {
		return nil
	}
	d := e.disk
	if dir != d.dir {
		d = newDisks(dir)
	}
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	return e.detachIn(ctx, d, name)
}

// diskDirOf is the directory of a sized volume's image, read from the
// volume's device option; "" for any other volume.
func diskDirOf(name string, opts map[string]string) string {
	dev := opts["device"]
	if opts["type"] != "ext4" || filepath.Base(dev) != name+".dev" || !filepath.IsAbs(dev) {
		return ""
	}
	return filepath.Dir(dev)
}

// RestoreDisks re-attaches the image of every sized volume whose loop
// device is gone (after a reboot, say) and deletes images whose volume no
// longer exists (removed outside the gateway, or a create cut short).
// Call it when the gateway starts, before any container mounts a sized
// volume: until then such a volume fails to mount. The disk directory
// belongs to one gateway. Errors: nil without a disk directory, the
// DiskLimits error, ErrInternal naming the volumes that failed, and the
// engine's errors.
func (e *Engine) RestoreDisks(ctx context.Context) error {
	if e.disk.dir == "" {
		return nil
	}
	if err := e.DiskLimits(); err != nil {
		return err
	}
	e.disk.mu.Lock()
	defer e.disk.mu.Unlock()
	imgs, err := filepath.Glob(filepath.Join(e.disk.dir, "*.img"))
	if err != nil {
		return fmt.Errorf("%w: sized volumes: %v", switchboard.ErrInternal, err)
	}
	var errs []error
	for _, img := range imgs {
		name := strings.TrimSuffix(filepath.Base(img), ".img")
		res, err := e.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
		switch {
		case err == nil && res.Volume.Options["device"] == e.disk.link(name):
			err = e.attachDisk(ctx, name)
		case err == nil || cerrdefs.IsNotFound(err):
			e.log.Info("sized volume: removing an image without its volume", "volume", name)
			err = e.detachDisk(ctx, name)
		default:
			return e.wrap(err, "inspect volume "+name)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loopBacking returns the file backing loop device dev ("/dev/loop3"), or
// "" when it is not an attached loop device.
func loopBacking(dev string) string {
	base := filepath.Base(dev)
	if !strings.HasPrefix(base, "loop") || dev != "/dev/"+base {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", base, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// loopDevices lists the loop devices backed by img.
func loopDevices(img string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		// A deleted image (its directory removed first) still backs the
		// device, shown as "<path> (deleted)".
		if err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}

// validVolumeName is Docker's rule for volume names, short enough to be a
// file name with a suffix.
func validVolumeName(name string) bool {
	if len(name) < 2 || len(name) > 200 {
		return false
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

// runTool runs a short host program and returns its output; an error
// carries the output's first line.
func runTool(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}
