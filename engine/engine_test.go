package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

const fixture = "github.com/switchboard-mcp/switchboard/engine/internal/linefixture"

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAttachWaitAndHardening(t *testing.T) {
	e := enginetest.New(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, ReadOnlyRoot: true, NanoCPUs: 5e8, MemoryBytes: 64 << 20,
		Labels: map[string]string{engine.LabelKind: "test"}, Tmpfs: map[string]string{"/tmp": "rw,size=1m"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Attach(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	exit := e.WaitNextExit(ctx, id)
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(s)
	if _, err := s.Write([]byte("hello\nstderr oops\n")); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	if _, err := s.Write([]byte("exit 7\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case ex := <-exit:
		if ex.Code != 7 || ex.Err != nil {
			t.Fatalf("exit %+v, want code 7", ex)
		}
	case <-ctx.Done():
		t.Fatal("no exit")
	}
	<-s.Done()
	if !strings.Contains(s.Stderr(), "oops") {
		t.Errorf("stderr tail %q lacks oops", s.Stderr())
	}
	st, err := e.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		CapDrop, SecurityOpt []string
		Init, ReadOnly       bool
		Net                  string
		CPU, Mem, Pids       int64
		Kind                 string
	}{st.CapDrop, st.SecurityOpt, st.Init, st.ReadOnlyRoot, st.NetworkMode, st.NanoCPUs, st.MemoryBytes, st.PidsLimit, st.Labels[engine.LabelKind]}
	want := struct {
		CapDrop, SecurityOpt []string
		Init, ReadOnly       bool
		Net                  string
		CPU, Mem, Pids       int64
		Kind                 string
	}{[]string{"ALL"}, []string{"no-new-privileges:true"}, true, true, "none", 5e8, 64 << 20, 256, "test"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("hardening (-want +got):\n%s", d)
	}
	list, err := e.List(ctx, map[string]string{engine.LabelKind: "test"})
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("List = %v, %v; want just %s", list, err, id)
	}
	// Another instance on the same engine sees none of it.
	other, err := engine.New(engine.Options{Instance: e.Instance() + "-other"})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := other.List(ctx, nil); err != nil || len(l) != 0 {
		t.Fatalf("other instance lists %v, %v", l, err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Inspect(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("inspect after remove: %v, want ErrNotFound", err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := e.Attach(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("attach to a removed container: %v, want ErrNotFound", err)
	}
}

func TestExecAndVolumes(t *testing.T) {
	e := enginetest.New(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	vol := e.Instance() + "-vol"
	if err := e.CreateVolume(ctx, vol, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateVolume(ctx, vol, nil); err != nil {
		t.Fatalf("re-create own volume: %v", err)
	}
	id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, Mounts: []engine.Mount{{Volume: vol, Target: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"/server", "a", "b"}, Env: []string{"EXIT=3"}, Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || out.String() != "a b|in" || errb.String() != "to-stderr" {
		t.Fatalf("exec = %d %q %q", code, out.String(), errb.String())
	}
	if err := e.RemoveVolume(ctx, vol); !errors.Is(err, switchboard.ErrConflict) {
		t.Fatalf("remove volume in use: %v, want ErrConflict", err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveVolume(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if vs, err := e.ListVolumes(ctx, nil); err != nil || len(vs) != 0 {
		t.Fatalf("volumes left: %v %v", vs, err)
	}
}

// TestMountOfMissingVolume: a container is never made on a volume that
// does not exist (the engine would make an empty one nobody owns, and a
// workspace removed while its container was being made would come back
// empty): Create fails with ErrNotFound and leaves neither a container nor
// a volume. An operator's volume (External) is still made when missing.
func TestMountOfMissingVolume(t *testing.T) {
	e := enginetest.New(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	gone := e.Instance() + "-gone"
	_, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, Labels: map[string]string{"t": "missing"},
		Mounts: []engine.Mount{{Volume: gone, Target: "/data"}}})
	if !errors.Is(err, switchboard.ErrNotFound) || !strings.Contains(err.Error(), gone) {
		t.Fatalf("create on a missing volume: %v, want ErrNotFound naming it", err)
	}
	if l, err := e.List(ctx, map[string]string{"t": "missing"}); err != nil || len(l) != 0 {
		t.Fatalf("containers left: %v %v", l, err)
	}
	if _, err := e.InspectVolume(ctx, gone); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("volume made for the refused container: %v, want ErrNotFound", err)
	}
	ext := e.Instance() + "-external"
	id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, Mounts: []engine.Mount{{Volume: ext, Target: "/data", External: true}}})
	if err != nil {
		t.Fatalf("create on a missing external volume: %v", err)
	}
	if err := e.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveVolume(ctx, ext); err != nil {
		t.Fatal(err)
	}
}

// TestBinds: a host directory an operator configured is shared both ways,
// read-only when asked; what reaches the host's control surfaces is
// refused before the engine sees it.
func TestBinds(t *testing.T) {
	e := enginetest.New(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	rw, ro := t.TempDir(), t.TempDir()
	for _, d := range []string{rw, ro} {
		if err := os.Chmod(d, 0o777); err != nil { // the fixture runs as 65534
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rw, "from-host"), []byte("host text"), 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, ReadOnlyRoot: true,
		Binds: []engine.Bind{{HostPath: rw, Target: "/data"}, {HostPath: ro, Target: "/refs", ReadOnly: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	run := func(env ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code, err := e.Exec(ctx, id, engine.ExecSpec{Cmd: []string{"/server", "x"}, Env: env, Stdin: strings.NewReader("container text"), Stdout: &out, Stderr: &errb})
		if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	if code, out, _ := run("READ=/data/from-host"); code != 0 || out != "host text" {
		t.Fatalf("host file in the container: %d %q", code, out)
	}
	if code, _, errb := run("WRITE=/data/from-container"); code != 0 {
		t.Fatalf("write into the bind: %d %s", code, errb)
	}
	if b, err := os.ReadFile(filepath.Join(rw, "from-container")); err != nil || string(b) != "container text" {
		t.Fatalf("container file on the host: %q %v", b, err)
	}
	if code, _, errb := run("WRITE=/refs/x"); code == 0 || !strings.Contains(errb, "read-only") {
		t.Fatalf("write into a read-only bind: %d %s", code, errb)
	}
	st, err := e.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Bind{{HostPath: rw, Target: "/data"}, {HostPath: ro, Target: "/refs", ReadOnly: true}}
	if diff := cmp.Diff(want, st.Binds); diff != "" || len(st.Mounts) != 0 {
		t.Fatalf("inspected binds (-want +got)\n%s mounts %v", diff, st.Mounts)
	}

	for name, b := range map[string]engine.Bind{
		"root":          {HostPath: "/", Target: "/host"},
		"relative":      {HostPath: "data", Target: "/data"},
		"unclean":       {HostPath: rw + "/../x", Target: "/data"},
		"docker socket": {HostPath: "/var/run/docker.sock", Target: "/sock"},
		"run socket":    {HostPath: "/run/docker.sock", Target: "/sock"},
		"socket dir":    {HostPath: "/var/run", Target: "/run2"},
		"engine data":   {HostPath: "/var/lib/docker/volumes", Target: "/v"},
		"proc":          {HostPath: "/proc/1", Target: "/p"},
		"relative dest": {HostPath: rw, Target: "data"},
		"over root":     {HostPath: rw, Target: "/"},
	} {
		if _, err := e.Create(ctx, engine.Spec{Image: img, Binds: []engine.Bind{b}}); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	// A directory that does not exist is the engine's refusal, not created.
	missing := filepath.Join(rw, "absent")
	if _, err := e.Create(ctx, engine.Spec{Image: img, Binds: []engine.Bind{{HostPath: missing, Target: "/m"}}}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("missing host directory: %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the engine created %s: %v", missing, err)
	}
	if list, _ := e.List(ctx, nil); len(list) != 1 {
		t.Errorf("refused specs left containers: %d", len(list))
	}
}

func TestErrors(t *testing.T) {
	e := enginetest.New(t)
	ctx := ctxT(t)
	if _, err := e.Create(ctx, engine.Spec{Image: "switchboard-test/absent:nope"}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("missing image: %v, want ErrNotFound", err)
	}
	img := enginetest.GoImage(t, e, fixture)
	if _, err := e.Create(ctx, engine.Spec{Image: img, Runtime: "no-such-runtime"}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("unknown runtime: %v, want ErrInvalid", err)
	}
	down, err := engine.New(engine.Options{Instance: "x", Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if err := down.Ping(ctx); !errors.Is(err, switchboard.ErrUnavailable) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Fatalf("unreachable engine: %v, want ErrUnavailable naming DOCKER_HOST", err)
	}
}
