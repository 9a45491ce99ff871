package hosted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/registrytest"
)

// TestPullFromPrivateRegistry: a hosted server whose image is only in a
// private registry is registered at once, pulls its image with the
// project's registry credentials (status "pulling"), then runs and
// answers; another project without credentials is refused the image
// (present then), by tag or digest; wrong credentials end in "failed"
// naming the cause, never the password; an image outside the allow-list
// is refused at registration.
func TestPullFromPrivateRegistry(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	reg := registrytest.Start(t, "bob", "registry-pw-1")
	ctx := context.Background()
	ref := reg.Addr + "/tools/fixture:v1"
	enginetest.GoImageCopy(t, e.eng, fixturePkg, ref) // content no other name shares
	if err := e.eng.PushImage(ctx, ref, &engine.RegistryAuth{Username: "bob", Password: "registry-pw-1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.eng.RemoveImage(ctx, ref); err != nil {
		t.Fatal(err)
	}
	e.secrets["REG_USER"], e.secrets["REG_PASS"], e.secrets["BAD_PASS"] = "bob", "registry-pw-1", "wrong-pw-2"
	svc := e.start()

	auth := &switchboard.RegistryAuth{Username: "${REG_USER}", Password: "${REG_PASS}"}
	st := e.register(switchboard.HostedRegistration{Name: "pulled", Image: ref, RegistryAuth: auth})
	switch st.Status {
	case switchboard.HostedPulling, switchboard.HostedStarting, switchboard.HostedRunning:
	default:
		t.Fatalf("registered with an image to pull: status %q (%s), want pulling", st.Status, st.LastError)
	}
	e.wait("pulled", "running after the pull", isStatus(switchboard.HostedRunning))
	if ok, _ := e.eng.ImageExists(ctx, ref); !ok {
		t.Fatalf("%s not on the engine after the server started", ref)
	}
	if out, err := e.call("echo", map[string]string{"text": "pulled"}); err != nil || !strings.Contains(out, "pulled") {
		t.Fatalf("calling the pulled server: %q, %v", out, err)
	}
	if got, _ := svc.Get(ctx, "default", "pulled"); got.Config.RegistryAuth == nil || got.Config.RegistryAuth.Password != "${REG_PASS}" {
		t.Errorf("status shows registry_auth %+v, want the references only", got.Config.RegistryAuth)
	}

	// Another project, without credentials, names the image (present
	// now) by its tag or its digest: refused, as the registry refuses it.
	if _, err := e.st.CreateProject(ctx, switchboard.Project{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	digest, err := e.eng.ImageDigest(ctx, ref)
	if err != nil || digest == "" {
		t.Fatalf("digest of %s: %q, %v", ref, digest, err)
	}
	for name, image := range map[string]string{"by-tag": ref, "by-digest": digest} {
		_, err := svc.Register(ctx, "other", switchboard.HostedRegistration{Name: name, Image: image})
		if !errors.Is(err, switchboard.ErrForbidden) || !strings.Contains(err.Error(), "refused this project's") {
			t.Errorf("another project's server %s: %v; want ErrForbidden, refused by the registry", name, err)
		}
		if _, err := svc.Get(ctx, "other", name); !errors.Is(err, switchboard.ErrNotFound) {
			t.Errorf("the refused server %s exists: %v", name, err)
		}
	}

	// Wrong credentials, the image gone from the engine: the pull is
	// refused.
	_ = e.eng.RemoveImage(ctx, ref)
	e.register(switchboard.HostedRegistration{Name: "bad-creds", Image: ref, RegistryAuth: &switchboard.RegistryAuth{Username: "${REG_USER}", Password: "${BAD_PASS}"}})
	st = e.wait("bad-creds", "failed", isStatus(switchboard.HostedFailed))
	if !strings.Contains(st.LastError, "refused access") || strings.Contains(st.LastError, "wrong-pw-2") || strings.Contains(st.LastError, "registry-pw-1") {
		t.Errorf("wrong credentials: last_error %q; want the registry's refusal without a password", st.LastError)
	}

	for name, r := range map[string]switchboard.HostedRegistration{
		"literal credentials": {Name: "lit", Image: ref, RegistryAuth: &switchboard.RegistryAuth{Username: "bob", Password: "registry-pw-1"}},
		"bad pull policy":     {Name: "pol", Image: ref, PullPolicy: "sometimes"},
	} {
		if _, err := svc.Register(ctx, "default", r); !errors.Is(err, switchboard.ErrInvalid) || strings.Contains(err.Error(), "registry-pw-1") {
			t.Errorf("%s: %v; want ErrInvalid without the password", name, err)
		}
	}
	e.eng.SetImageRules(engine.ImageRules{Allow: []string{"ghcr.io/acme/"}})
	defer e.eng.SetImageRules(engine.ImageRules{})
	_, err = svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "outside", Image: ref})
	if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "MCP_SERVER_IMAGE_ALLOW") {
		t.Errorf("an image outside the allow-list: %v; want ErrInvalid naming MCP_SERVER_IMAGE_ALLOW", err)
	}
	if _, err := svc.Get(ctx, "default", "outside"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("the refused server exists: %v", err)
	}
}
