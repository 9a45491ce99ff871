package engine_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/registrytest"
)

// pushRandom makes an image of one random 256 KiB file, pushes it to the
// registry as name:tag (with auth when set) and removes it from the
// engine, so the engine does not have it. It returns the pushed reference.
func pushRandom(t *testing.T, e *engine.Engine, reg *registrytest.Registry, name string, auth *engine.RegistryAuth) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := reg.Addr + "/" + name + ":v1"
	importRandom(t, e, ref)
	if err := e.PushImage(ctx, ref, auth); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	if err := e.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.RemoveImage(context.Background(), ref) })
	return ref
}

// importRandom makes image ref of one random 256 KiB file.
func importRandom(t *testing.T, e *engine.Engine, ref string) {
	t.Helper()
	data := make([]byte, 256<<10)
	rand.Read(data)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "blob", Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	tw.Write(data)
	tw.Close()
	if err := e.ImportImage(context.Background(), &buf, ref, []string{"LABEL " + enginetest.TestLabel + "=1"}); err != nil {
		t.Fatal(err)
	}
}

func TestPullFromRegistry(t *testing.T) {
	e := enginetest.New(t)
	reg := registrytest.Start(t, "", "")
	ctx := context.Background()

	t.Run("missing image pulled once, with progress, shared by concurrent callers", func(t *testing.T) {
		ref := pushRandom(t, e, reg, "pulled", nil)
		before := engine.PullsStarted(e)
		var mu sync.Mutex
		var seen []engine.PullProgress
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Go(func() {
				errs[i] = e.EnsureImage(ctx, ref, engine.PullOptions{Progress: func(p engine.PullProgress) {
					mu.Lock()
					seen = append(seen, p)
					mu.Unlock()
				}})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("EnsureImage: %v", err)
			}
		}
		if ok, _ := e.ImageExists(ctx, ref); !ok {
			t.Fatalf("%s not on the engine after the pull", ref)
		}
		if n := engine.PullsStarted(e) - before; n != 1 {
			t.Errorf("3 concurrent first uses began %d pulls, want 1 shared pull", n)
		}
		last := seen[len(seen)-1]
		if last.Image != ref || last.Layers == 0 || last.LayersDone != last.Layers {
			t.Errorf("last progress %+v: want every layer of %s done", last, ref)
		}
		// Present now: if-not-present does not pull again; always does.
		if err := e.EnsureImage(ctx, ref, engine.PullOptions{}); err != nil || engine.PullsStarted(e)-before != 1 {
			t.Errorf("present image: err %v, pulls %d; want no new pull", err, engine.PullsStarted(e)-before)
		}
		if err := e.EnsureImage(ctx, ref, engine.PullOptions{Policy: engine.PullAlways}); err != nil || engine.PullsStarted(e)-before != 2 {
			t.Errorf("policy always: err %v, pulls %d; want a second pull", err, engine.PullsStarted(e)-before)
		}
	})

	t.Run("digest pinning", func(t *testing.T) {
		ref := pushRandom(t, e, reg, "pinned", nil)
		if err := e.EnsureImage(ctx, ref, engine.PullOptions{}); err != nil {
			t.Fatal(err)
		}
		digest, err := e.ImageDigest(ctx, ref)
		if err != nil || !strings.Contains(digest, "@sha256:") {
			t.Fatalf("digest of %s: %q, %v", ref, digest, err)
		}
		if err := e.RemoveImage(ctx, ref); err != nil {
			t.Fatal(err)
		}
		_ = e.RemoveImage(ctx, digest)
		e.SetImageRules(engine.ImageRules{RequireDigest: true})
		defer e.SetImageRules(engine.ImageRules{})
		if err := e.EnsureImage(ctx, ref, engine.PullOptions{}); !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "@sha256:") {
			t.Errorf("a tag under RequireDigest: %v; want ErrInvalid asking for a digest", err)
		}
		if err := e.EnsureImage(ctx, digest, engine.PullOptions{}); err != nil {
			t.Fatalf("pull by digest %s: %v", digest, err)
		}
		t.Cleanup(func() { _ = e.RemoveImage(context.Background(), digest) })
		if ok, _ := e.ImageExists(ctx, digest); !ok {
			t.Errorf("%s not present after its pull", digest)
		}
	})

	t.Run("allow-list", func(t *testing.T) {
		ref := pushRandom(t, e, reg, "elsewhere", nil)
		e.SetImageRules(engine.ImageRules{Allow: []string{"ghcr.io/", "docker.io/mcp/*"}})
		defer e.SetImageRules(engine.ImageRules{})
		err := e.EnsureImage(ctx, ref, engine.PullOptions{})
		if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "MCP_SERVER_IMAGE_ALLOW") {
			t.Errorf("an image outside the allow-list: %v; want ErrInvalid naming MCP_SERVER_IMAGE_ALLOW", err)
		}
		if ok, _ := e.ImageExists(ctx, ref); ok {
			t.Errorf("the refused image was pulled")
		}
		e.SetImageRules(engine.ImageRules{Allow: []string{reg.Addr + "/"}})
		if err := e.EnsureImage(ctx, ref, engine.PullOptions{}); err != nil {
			t.Errorf("an image of an allowed registry: %v", err)
		}
	})

	t.Run("failures are named and bounded", func(t *testing.T) {
		cases := []struct {
			name, ref string
			policy    engine.PullPolicy
			rules     engine.ImageRules
			want      error
			says      string
		}{
			{"unknown image", reg.Addr + "/nothing-here:v1", "", engine.ImageRules{}, switchboard.ErrNotFound, "no such image"},
			{"policy never", reg.Addr + "/nothing-here:v1", engine.PullNever, engine.ImageRules{}, switchboard.ErrNotFound, "pull policy is never"},
			{"registry down", closedAddr(t) + "/x:v1", "", engine.ImageRules{}, switchboard.ErrUnavailable, "cannot be reached"},
			{"stalled registry", registrytest.Stalled(t) + "/x:v1", "", engine.ImageRules{StallTimeout: 2 * time.Second}, switchboard.ErrTimeout, "no progress"},
		}
		for _, c := range cases {
			e.SetImageRules(c.rules)
			err := e.EnsureImage(ctx, c.ref, engine.PullOptions{Policy: c.policy})
			if switchboard.KindOf(err) != c.want || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), c.ref) {
				t.Errorf("%s: %v; want %v saying %q and naming the image", c.name, err, c.want, c.says)
			}
			if ok, _ := e.ImageExists(ctx, c.ref); ok {
				t.Errorf("%s: an image is on the engine", c.name)
			}
		}
		e.SetImageRules(engine.ImageRules{})
	})
}

func closedAddr(t *testing.T) string {
	t.Helper()
	return registrytest.Closed(t)
}

// TestPullPrivate: an image pulled with one project's registry
// credentials is used by another project only once the registry accepts
// that project's own; this holds under every name of the image (its
// digest, its id), after a restart (another Engine on the same engine,
// as a restarted gateway or another replica has) and while the registry
// is down. An image the engine had under another name is not private.
func TestPullPrivate(t *testing.T) {
	e := enginetest.New(t)
	reg := registrytest.Start(t, "alice", "s3cret-pw")
	ctx := context.Background()
	good := &engine.RegistryAuth{Username: "alice", Password: "s3cret-pw"}
	wrong := &engine.RegistryAuth{Username: "alice", Password: "nope"}
	ref := pushRandom(t, e, reg, "private/tool", good)

	for _, c := range []struct {
		name string
		auth *engine.RegistryAuth
	}{{"no credentials", nil}, {"wrong password", wrong}} {
		err := e.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1", Auth: c.auth})
		if !errors.Is(err, switchboard.ErrForbidden) || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: %v; want ErrForbidden without the password", c.name, err)
		}
	}
	if err := e.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1", Auth: good}); err != nil {
		t.Fatalf("with the right credentials: %v", err)
	}
	id, private := engine.Private(e, ref)
	if !private {
		t.Fatalf("%s (%s) pulled with credentials carries no mark", ref, id)
	}
	digest, err := e.ImageDigest(ctx, ref)
	if err != nil || digest == "" {
		t.Fatalf("digest of %s: %q, %v", ref, digest, err)
	}
	// Present now, but p2 never showed credentials the registry takes,
	// under any name of the image.
	refused := func(e *engine.Engine, when string) {
		t.Helper()
		for _, name := range []string{ref, digest, id, strings.TrimPrefix(id, "sha256:")[:12]} {
			for _, auth := range []*engine.RegistryAuth{nil, wrong} {
				if err := e.EnsureImage(ctx, name, engine.PullOptions{Owner: "p2", Auth: auth}); !errors.Is(err, switchboard.ErrForbidden) || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("%s: another project (credentials %v) used the private image as %s: %v", when, auth != nil, name, err)
				}
			}
		}
	}
	refused(e, "after the pull")
	if err := e.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1"}); err != nil {
		t.Errorf("the project that pulled it: %v", err)
	}

	// A restarted gateway, or another replica, has none of e's memory.
	restarted := enginetest.New(t)
	refused(restarted, "after a restart")
	if err := restarted.EnsureImage(ctx, digest, engine.PullOptions{Owner: "p2", Auth: good}); err != nil {
		t.Errorf("after a restart, another project with its own good credentials: %v", err)
	}
	if err := restarted.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p3"}); !errors.Is(err, switchboard.ErrForbidden) {
		t.Errorf("after p2 proved its access, p3 without credentials: %v", err)
	}
	if err := restarted.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1", Auth: good}); err != nil {
		t.Errorf("after a restart, the project that pulled it: %v", err)
	}

	// The registry down: nobody unproven gets in; p1, proven by this
	// process, keeps its image.
	reg.Stop()
	if err := restarted.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p3"}); !errors.Is(err, switchboard.ErrForbidden) && !errors.Is(err, switchboard.ErrUnavailable) {
		t.Errorf("registry down, a project never checked: %v; want refused", err)
	}
	if err := restarted.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1", Auth: good}); err != nil {
		t.Errorf("registry down, the project checked before: %v", err)
	}

	// Removing its last name removes the image, mark and all.
	if err := e.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if ok, _ := e.ImageExists(ctx, id); ok {
		t.Errorf("image %s left on the engine by its mark after its last name was removed", id)
	}
}

// TestPullPrivateKnownImage: content the engine already had under a name
// of its own (built here) is not made private by a pull with credentials.
func TestPullPrivateKnownImage(t *testing.T) {
	e := enginetest.New(t)
	reg := registrytest.Start(t, "alice", "s3cret-pw")
	ctx := context.Background()
	good := &engine.RegistryAuth{Username: "alice", Password: "s3cret-pw"}
	// Built here (the local name), then pushed and pulled again.
	local := "switchboard-test/known:" + reg.Addr[strings.LastIndex(reg.Addr, ":")+1:]
	ref := reg.Addr + "/known/tool:v1"
	importRandom(t, e, local)
	t.Cleanup(func() { _ = e.RemoveImage(context.Background(), local) })
	if err := e.TagImage(ctx, local, ref); err != nil {
		t.Fatal(err)
	}
	if err := e.PushImage(ctx, ref, good); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.RemoveImage(context.Background(), ref) })
	if err := e.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p1", Auth: good}); err != nil {
		t.Fatal(err)
	}
	if _, private := engine.Private(e, ref); private {
		t.Errorf("%s, on the engine as %s before its pull, was marked private", ref, local)
	}
	if err := e.EnsureImage(ctx, ref, engine.PullOptions{Owner: "p2"}); err != nil {
		t.Errorf("another project, for an image it could name as %s anyway: %v", local, err)
	}
}

func TestCheckImage(t *testing.T) {
	e, err := engine.New(engine.Options{Instance: "check"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetImageRules(engine.ImageRules{Allow: []string{"mcp/*", "ghcr.io/acme/", "127.0.0.1:5000/tools/notes", "alpine"}})
	for ref, ok := range map[string]bool{
		"mcp/fetch:latest": true,
		"docker.io/mcp/github@sha256:" + strings.Repeat("a", 64): true,
		"ghcr.io/acme/x/y:1":                true,
		"ghcr.io/other/x:1":                 false,
		"127.0.0.1:5000/tools/notes:2":      true,
		"127.0.0.1:5000/tools/notes-evil:2": false,
		"alpine:3":                          true,
		"library/alpine":                    true,
		"evil.io/mcp/fetch":                 false,
		"mcpx/fetch":                        false,
		"Not A Ref":                         false,
	} {
		if err := e.CheckImage(ref); (err == nil) != ok {
			t.Errorf("CheckImage(%q) = %v, want allowed %v", ref, err, ok)
		}
	}
}

// TestPullErrorKinds: each engine failure of a pull is classified as what
// the user can do about it, naming the image (the engine's own words, as
// the registry tests meet them, plus a full disk, which they cannot make).
func TestPullErrorKinds(t *testing.T) {
	const ref = "reg.example/x:v1"
	for msg, want := range map[string]error{
		"Error response from daemon: unauthorized: authentication required":                            switchboard.ErrForbidden,
		"Error response from daemon: pull access denied for x, repository does not exist":              switchboard.ErrForbidden,
		"Error response from daemon: manifest for reg.example/x:v1 not found: manifest unknown":        switchboard.ErrNotFound,
		"write /var/lib/docker/tmp/GetImageBlob1: no space left on device":                             switchboard.ErrResourceLimit,
		"Error response from daemon: Get \"https://reg.example/v2/\": dial tcp: connection refused":    switchboard.ErrUnavailable,
		"Error response from daemon: Get \"https://reg.example/v2/\": net/http: TLS handshake timeout": switchboard.ErrUnavailable,
		"something else entirely": switchboard.ErrUnavailable,
	} {
		err := engine.PullError(ref, errors.New(msg))
		if switchboard.KindOf(err) != want || !strings.Contains(err.Error(), ref) {
			t.Errorf("%q: %v (%v), want %v naming %s", msg, err, switchboard.KindOf(err), want, ref)
		}
	}
}
