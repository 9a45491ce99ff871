package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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
