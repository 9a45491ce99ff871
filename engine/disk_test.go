package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// diskEngine returns a real engine with sized volumes in a fresh disk
// directory, sharing the instance of enginetest's engine (which removes
// what is left of its containers). A host where sized volumes cannot work
// (not root, no loop devices) skips the test, or fails it when
// SWITCHBOARD_TEST_REQUIRE names "loopdisk".
func diskEngine(t testing.TB) (*engine.Engine, string) {
	t.Helper()
	return enginetest.Disks(t, enginetest.New(t))
}

// TestSizedVolume: a program that writes past the limit gets ENOSPC, its
// container goes on, space freed is usable again; the volume survives its
// loop device going away (a reboot) through RestoreDisks, and removal
// leaves nothing on the host.
func TestSizedVolume(t *testing.T) {
	e, dir := diskEngine(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	vol := e.Instance() + "-sized"
	d := engine.Disk{Bytes: 32 << 20, UID: 1000, GID: 1000}
	if err := e.CreateSizedVolume(ctx, vol, map[string]string{engine.LabelKind: "workspace"}, d); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateSizedVolume(ctx, vol, nil, d); err != nil {
		t.Fatalf("re-create own volume: %v", err)
	}
	if err := e.CreateSizedVolume(ctx, vol, map[string]string{engine.LabelKind: "catalog"}, d); !errors.Is(err, switchboard.ErrConflict) || !strings.Contains(err.Error(), engine.LabelKind) {
		t.Fatalf("re-create as another kind's volume: %v, want ErrConflict naming %s", err, engine.LabelKind)
	}
	v, err := e.InspectVolume(ctx, vol)
	if err != nil || v.Labels[engine.LabelKind] != "workspace" || v.Labels[engine.LabelInstance] != e.Instance() {
		t.Fatalf("inspect: %+v %v", v, err)
	}

	// /w is not in the image: the engine copies nothing in, so the root
	// directory's owner is mkfs's, and uid 1000 may write there.
	start := func() string {
		t.Helper()
		id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, User: "1000:1000", Mounts: []engine.Mount{{Volume: vol, Target: "/w"}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	type result struct {
		Code   int
		Stdout string
		ENOSPC bool
	}
	run := func(id string, stdin []byte, env ...string) result {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"/server"}, Env: env, Stdin: bytes.NewReader(stdin), Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 && !strings.Contains(errb.String(), "no space left on device") {
			t.Logf("exec %v: %d %s", env, code, errb.String())
		}
		return result{code, out.String(), strings.Contains(errb.String(), "no space left on device")}
	}

	id := start()
	small := bytes.Repeat([]byte("s"), 1<<20)
	steps := []struct {
		name  string
		stdin []byte
		env   string
		want  result
	}{
		{"past the limit", make([]byte, 40<<20), "WRITE=/w/big", result{Code: 1, ENOSPC: true}},
		{"full", small, "WRITE=/w/small", result{Code: 1, ENOSPC: true}},
		{"free the big file", nil, "WRITE=/w/big", result{}},
		{"write again", small, "WRITE=/w/small", result{}},
		{"read it", nil, "READ=/w/small", result{Stdout: string(small)}},
	}
	for _, s := range steps {
		if got := run(id, s.stdin, s.env); got != s.want {
			t.Fatalf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
	if st, err := e.Inspect(ctx, id); err != nil || !st.Running {
		t.Fatalf("container after ENOSPC: running=%v %v", st.Running, err)
	}
	// Only what the program wrote: no lost+found.
	ents, err := os.ReadDir(v.Mountpoint)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	if diff := cmp.Diff([]string{"big", "small"}, names); diff != "" {
		t.Errorf("volume root (-want +got):\n%s", diff)
	}
	if err := e.RemoveVolume(ctx, vol); !errors.Is(err, switchboard.ErrConflict) {
		t.Fatalf("remove volume in use: %v, want ErrConflict", err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	// The engine unmounted the file system with its last container.
	if ents, err := os.ReadDir(v.Mountpoint); err != nil || len(ents) != 0 {
		t.Fatalf("volume directory with no container: %v %v", ents, err)
	}

	// A reboot loses the loop device: the volume cannot be mounted until
	// RestoreDisks attaches its image again.
	link := filepath.Join(dir, vol+".dev")
	dev, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
		t.Fatalf("losetup -d: %v %s", err, out)
	}
	id, err = e.Create(ctx, engine.Spec{Image: img, Stdin: true, Mounts: []engine.Mount{{Volume: vol, Target: "/w"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err == nil {
		t.Fatal("a volume without its loop device was mounted")
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.RestoreDisks(ctx); err != nil {
		t.Fatal(err)
	}
	id = start()
	if got := run(id, nil, "READ=/w/small"); got != (result{Stdout: string(small)}) {
		t.Fatalf("after RestoreDisks: %+v", got)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}

	if err := e.RemoveVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("disk directory after removal: %v", left)
	}
	if devs := loopsUnder(dir); len(devs) != 0 {
		t.Errorf("loop devices left: %v", devs)
	}
}

// TestRestoreDisksRemovesOrphans: an image whose volume is gone (removed
// by an engine without the disk directory, or outside the gateway) is
// detached and deleted.
func TestRestoreDisksRemovesOrphans(t *testing.T) {
	e, dir := diskEngine(t)
	ctx := ctxT(t)
	vol := e.Instance() + "-orphan"
	if err := e.CreateSizedVolume(ctx, vol, nil, engine.Disk{Bytes: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	// Removed outside the gateway: the image and its loop device stay.
	docker, lerr := exec.LookPath("docker")
	testenv.Need(t, "docker", lerr == nil, "no docker command to remove the volume outside the gateway")
	if out, err := exec.Command(docker, "volume", "rm", vol).CombinedOutput(); err != nil {
		t.Fatalf("docker volume rm: %v %s", err, out)
	}
	if devs := loopsUnder(dir); len(devs) != 1 {
		t.Fatalf("loop devices before: %v, want one", devs)
	}
	if err := e.RestoreDisks(ctx); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("disk directory: %v", left)
	}
	if devs := loopsUnder(dir); len(devs) != 0 {
		t.Errorf("loop devices left: %v", devs)
	}
}

// TestRemoveSizedVolumeWithoutDiskDir: an engine without the disk
// directory (a command's, a test's cleanup) that removes a sized volume
// removes its image and loop device too: the volume names them.
func TestRemoveSizedVolumeWithoutDiskDir(t *testing.T) {
	e, dir := diskEngine(t)
	ctx := ctxT(t)
	vol := e.Instance() + "-plainrm"
	if err := e.CreateSizedVolume(ctx, vol, nil, engine.Disk{Bytes: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	plain, err := engine.New(engine.Options{Instance: e.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.RemoveVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("disk directory: %v", left)
	}
	if devs := loopsUnder(dir); len(devs) != 0 {
		t.Errorf("loop devices left: %v", devs)
	}

	// Its image deleted first (a test's temporary directory went before
	// its cleanup): the loop device, backed by the deleted file, goes too.
	if err := e.CreateSizedVolume(ctx, vol, nil, engine.Disk{Bytes: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, vol+".img")
	devs := loopDevicesOf(img)
	if len(devs) != 1 {
		t.Fatalf("loop devices of %s: %v, want one", img, devs)
	}
	if err := os.Remove(img); err != nil {
		t.Fatal(err)
	}
	if err := plain.RemoveVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(devs[0]), "loop", "backing_file")); err == nil && strings.Contains(string(b), img) {
		t.Errorf("%s still backed by the deleted image: %s", devs[0], b)
	}
}

// loopDevicesOf lists the loop devices backed by img, deleted or not.
func loopDevicesOf(img string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)") == img {
			devs = append(devs, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(f))))
		}
	}
	return devs
}

// TestSizedVolumeRefused: bad arguments are ErrInvalid before anything
// else; without a disk directory, or with an engine that is not local,
// sized volumes are ErrConfig. No engine is needed.
func TestSizedVolumeRefused(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	for name, c := range map[string]struct {
		opts engine.Options
		vol  string
		disk engine.Disk
		want error
	}{
		"slash":       {engine.Options{DiskDir: dir}, "a/b", engine.Disk{Bytes: 1 << 30}, switchboard.ErrInvalid},
		"dot":         {engine.Options{DiskDir: dir}, ".x", engine.Disk{Bytes: 1 << 30}, switchboard.ErrInvalid},
		"too small":   {engine.Options{DiskDir: dir}, "ws", engine.Disk{Bytes: 1 << 20}, switchboard.ErrInvalid},
		"bad owner":   {engine.Options{DiskDir: dir}, "ws", engine.Disk{Bytes: 1 << 30, UID: -1}, switchboard.ErrInvalid},
		"no dir":      {engine.Options{}, "ws", engine.Disk{Bytes: 1 << 30}, switchboard.ErrConfig},
		"relative":    {engine.Options{DiskDir: "disks"}, "ws", engine.Disk{Bytes: 1 << 30}, switchboard.ErrConfig},
		"tcp engine":  {engine.Options{DiskDir: dir, Host: "tcp://127.0.0.1:1"}, "ws", engine.Disk{Bytes: 1 << 30}, switchboard.ErrConfig},
		"no such one": {engine.Options{DiskDir: dir, Host: "unix:///nonexistent/docker.sock"}, "ws", engine.Disk{Bytes: 1 << 30}, switchboard.ErrConfig},
	} {
		t.Run(name, func(t *testing.T) {
			c.opts.Instance = "x"
			e, err := engine.New(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if err := e.CreateSizedVolume(ctx, c.vol, nil, c.disk); !errors.Is(err, c.want) {
				t.Fatalf("CreateSizedVolume: %v, want %v", err, c.want)
			}
			if c.want == switchboard.ErrConfig {
				if err := e.DiskLimits(); !errors.Is(err, switchboard.ErrConfig) {
					t.Fatalf("DiskLimits: %v, want ErrConfig", err)
				}
				if strings.Contains(switchboard.Message(e.DiskLimits()), dir) {
					t.Errorf("the message names the host path: %v", e.DiskLimits())
				}
			}
		})
	}
}

// loopsUnder lists the loop devices backed by files in dir.
func loopsUnder(dir string) []string {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var devs []string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dir+"/") {
			devs = append(devs, f)
		}
	}
	slices.Sort(devs)
	return devs
}

// BenchmarkSizedVolume measures what a sized workspace costs: creating the
// volume (mkfs, debugfs, losetup, the engine's create) against a plain one,
// and starting a container that mounts it (the engine mounts the ext4
// image) against one that mounts a plain volume. It reports the median
// and 90th percentile. Run: go test ./engine -run '^$' -bench SizedVolume -benchtime 10x
func BenchmarkSizedVolume(b *testing.B) {
	e, _ := diskEngine(b)
	img := enginetest.GoImage(b, e, fixture)
	ctx := context.Background()
	create := func(name string, sized bool) error {
		if sized {
			return e.CreateSizedVolume(ctx, name, nil, engine.Disk{Bytes: 1 << 30, UID: 1000, GID: 1000})
		}
		return e.CreateVolume(ctx, name, nil)
	}
	for _, sized := range []bool{false, true} {
		kind := "plain"
		if sized {
			kind = "1GiB"
		}
		b.Run("create-"+kind, func(b *testing.B) {
			var times []time.Duration
			i := 0
			for b.Loop() {
				name := fmt.Sprintf("%s-bench-%d", e.Instance(), i)
				i++
				t0 := time.Now()
				if err := create(name, sized); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
				b.StopTimer()
				if err := e.RemoveVolume(ctx, name); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportPercentiles(b, times)
		})
		b.Run("start-"+kind, func(b *testing.B) {
			name := fmt.Sprintf("%s-bench-start-%s", e.Instance(), kind)
			if err := create(name, sized); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.RemoveVolume(ctx, name) }()
			var times []time.Duration
			for b.Loop() {
				t0 := time.Now()
				id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, User: "1000:1000", Mounts: []engine.Mount{{Volume: name, Target: "/w"}}})
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Start(ctx, id); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
				b.StopTimer()
				if err := e.Remove(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportPercentiles(b, times)
		})
	}
}

func reportPercentiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	// Nearest rank: the smallest time at least p percent are not above.
	rank := func(p int) time.Duration { return times[(len(times)*p+99)/100-1] }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(rank(50)), "p50-ms")
	b.ReportMetric(ms(rank(90)), "p90-ms")
	b.Logf("n=%d p50=%v p90=%v max=%v", len(times), rank(50), rank(90), times[len(times)-1])
}
