// Package enginetest gives tests a real Docker Engine and images they build
// themselves (there is no registry to pull from): a missing engine skips the
// test, or fails it when SWITCHBOARD_TEST_REQUIRE names "docker" (or "all").
package enginetest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestLabel marks images this package made; cleanup touches no others.
const TestLabel = "io.switchboard.test"

// RuntimeEnv names the container runtime tests run their containers
// under ("runc", "runsc"); unset is the engine's setting "auto". CI runs
// the hosted, catalog and sandbox suites once under each runtime.
const RuntimeEnv = "SWITCHBOARD_TEST_RUNTIME"

// ProbeImage is the image tests' engines probe a runtime named by
// RuntimeEnv in: the sandbox image as `switchboard sandbox build-image`
// tags it (.ci/run builds it first); where it is missing the runtime is
// used unprobed. Without RuntimeEnv tests' engines have no probe image,
// so auto takes the engine's default runtime whatever else it lists: the
// suites run under runc, and under gVisor when RuntimeEnv says so.
const ProbeImage = "switchboard-sandbox:latest"

func probeImage() string {
	if r := os.Getenv(RuntimeEnv); r != "" && r != engine.RuntimeAuto {
		return ProbeImage
	}
	return ""
}

// New returns an Engine with a fresh instance name. Every container and
// volume carrying that instance label is removed when t ends. Its runtime
// setting is RuntimeEnv's value, else auto.
func New(t testing.TB) *engine.Engine { return NewWith(t, nil) }

// NewWith is New with options changed by mod (a runtime preference, a
// probe image) before the engine is made.
func NewWith(t testing.TB, mod func(*engine.Options)) *engine.Engine {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	// An owner id like no live gateway's: a gateway's Sweep would take
	// these containers for leftovers, which no test shares an instance
	// with anyway.
	opts := engine.Options{Instance: "test-" + hex.EncodeToString(b[:]), Owner: "test-" + hex.EncodeToString(b[:]),
		Runtime: os.Getenv(RuntimeEnv), ProbeImage: probeImage()}
	if mod != nil {
		mod(&opts)
	}
	e, err := engine.New(opts)
	if err != nil {
		testenv.Need(t, "docker", false, err.Error())
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Ping(ctx); err != nil {
		_ = e.Close()
		testenv.Need(t, "docker", false, err.Error())
		return nil
	}
	t.Cleanup(func() { Cleanup(t, e) })
	return e
}

// UnlistedRuntime is a runtime name no engine lists.
const UnlistedRuntime = "switchboard-no-such-runtime"

// NewUnlisted returns an engine whose runtime setting is UnlistedRuntime
// (what takes no runtime of its own is refused), without a probe image so
// that auto is the engine's default whatever else it lists (also under
// RuntimeEnv), and that default's name.
func NewUnlisted(t testing.TB) (*engine.Engine, string) {
	t.Helper()
	e := NewWith(t, func(o *engine.Options) { o.Runtime, o.ProbeImage = UnlistedRuntime, "" })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return e, info.DefaultRuntime
}

// Cleanup removes every container and volume of e's instance, whatever
// store it carries.
func Cleanup(t testing.TB, e *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// An ownerless engine of the instance sweeps every container, the
	// owned ones of e included.
	all, err := engine.New(engine.Options{Instance: e.Instance(), Host: e.Host()})
	if err != nil {
		t.Errorf("cleanup containers: %v", err)
		return
	}
	defer all.Close()
	if _, err := all.Sweep(ctx, func(context.Context, string) (bool, error) { return false, nil }); err != nil {
		t.Errorf("cleanup containers: %v", err)
	}
	vols, err := all.ListVolumes(ctx, nil) // every store's
	if err != nil {
		t.Errorf("cleanup volumes: %v", err)
	}
	for _, v := range vols {
		if err := e.RemoveVolume(ctx, v.Name); err != nil {
			t.Errorf("cleanup volume %s: %v", v.Name, err)
		}
	}
}

var (
	buildMu sync.Mutex
	built   = map[string]string{} // pkg -> image ref, per test process
	bins    = map[string][]byte{} // pkg -> its binary, per test process
)

// GoImage builds the Go main package pkg (an import path in this module)
// as a static binary and returns an image that holds it at /server and runs
// it (CMD ["/server"], USER 65534:65534, /tmp present). The image is tagged
// "switchboard-test/<last element>:<first 12 hex digits of the binary's
// SHA-256>" and reused when present; older tags of that repository, made
// by this package, are removed.
func GoImage(t testing.TB, e *engine.Engine, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if ref, ok := built[pkg]; ok {
		return ref
	}
	data := goBinary(t, pkg)
	sum := sha256.Sum256(data)
	repo := "switchboard-test/" + path.Base(pkg)
	ref := repo + ":" + hex.EncodeToString(sum[:6])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ok, err := e.ImageExists(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		importServer(t, e, data, ref)
		// Older builds of the same fixture are ours and stale.
		tags, err := e.Images(ctx, repo)
		if err == nil {
			for _, tag := range tags {
				if tag != ref && strings.HasPrefix(tag, repo+":") {
					_ = e.RemoveImage(ctx, tag)
				}
			}
		}
	}
	built[pkg] = ref
	return ref
}

// GoImageCopy is GoImage's image of pkg as an image of its own (its own
// id, by one more label), named ref and removed when t ends: content that
// no other name on the engine shares, as an image only a registry had.
func GoImageCopy(t testing.TB, e *engine.Engine, pkg, ref string) {
	t.Helper()
	buildMu.Lock()
	data := goBinary(t, pkg)
	buildMu.Unlock()
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	importServer(t, e, data, ref, "LABEL "+TestLabel+".copy="+hex.EncodeToString(nonce[:]))
	id, err := e.ImageID(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Containers of it hold it: they go first, then it, by every name.
		Cleanup(t, e)
		_ = e.RemoveImage(context.Background(), id)
	})
}

// goBinary builds pkg once per test process; buildMu is held.
func goBinary(t testing.TB, pkg string) []byte {
	t.Helper()
	if b, ok := bins[pkg]; ok {
		return b
	}
	bin := filepath.Join(t.TempDir(), "server")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	bins[pkg] = data
	return data
}

// importServer makes image ref of the server binary data.
func importServer(t testing.TB, e *engine.Engine, data []byte, ref string, changes ...string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	now := time.Unix(0, 0)
	for _, d := range []string{"tmp/", "data/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "server", Mode: 0o755, Size: int64(len(data)), ModTime: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changes = append([]string{`CMD ["/server"]`, "USER 65534:65534", "LABEL " + TestLabel + "=1"}, changes...)
	if err := e.ImportImage(ctx, &buf, ref, changes); err != nil {
		t.Fatal(err)
	}
}

// Disks returns an engine like base (its instance, host and owner) that
// makes sized volumes in a fresh disk directory, and that directory. A
// host where sized volumes cannot work skips the test, or fails it when
// SWITCHBOARD_TEST_REQUIRE names "loopdisk". When t ends, before base's
// cleanup, its containers and volumes go through it, so their loop
// devices and images go too.
func Disks(t testing.TB, base *engine.Engine) (*engine.Engine, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disks")
	e, err := engine.New(engine.Options{Instance: base.Instance(), Host: base.Host(), Owner: base.Owner(), DiskDir: dir, Runtime: os.Getenv(RuntimeEnv), ProbeImage: probeImage()})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.DiskLimits(); err != nil {
		testenv.Need(t, "loopdisk", false, err.Error())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := e.RemoveOwned(ctx, nil); err != nil {
			t.Errorf("cleanup containers: %v", err)
		}
		vols, _ := e.ListVolumes(ctx, nil)
		for _, v := range vols {
			if err := e.RemoveVolume(ctx, v.Name); err != nil {
				t.Errorf("cleanup volume %s: %v", v.Name, err)
			}
		}
		_ = e.Close()
	})
	return e, dir
}

// TestRuntime is the runtime RuntimeEnv names, or "".
func TestRuntime() string { return os.Getenv(RuntimeEnv) }

// Broken is the name of a runtime registered with the engine whose binary
// always fails (.ci/run registers it beside runsc; docs/sandbox.md says how).
const Broken = "switchboard-broken"

// BrokenRuntime returns Broken when the engine lists it; otherwise the
// test is skipped, or fails where SWITCHBOARD_TEST_REQUIRE names
// "runtimes" (CI, once it registered the engine's runtimes).
func BrokenRuntime(t testing.TB, e *engine.Engine) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := e.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Need(t, "runtimes", info.HasRuntime(Broken), "the engine lists no runtime "+Broken+
		" (register one whose binary always fails in /etc/docker/daemon.json, \"runtimes\", then kill -HUP dockerd; .ci/run does)")
	return Broken
}

// NoNetwork is the name of a runtime .ci/run registers that gives
// containers no network: runsc with --network=none (their bridge
// interface never reaches them).
const NoNetwork = "switchboard-nonet"
