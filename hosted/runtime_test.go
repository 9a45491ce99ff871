package hosted_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestRegistrationRuntime: a hosted server's runtime overrides the
// gateway's setting. With a setting the engine does not list, a server
// without a runtime of its own is refused at registration, naming it, and
// nothing is stored; one naming the engine's default runtime, or auto,
// runs under the default, as its status and its container both say.
func TestRegistrationRuntime(t *testing.T) {
	const unlisted = enginetest.UnlistedRuntime
	eng, def := enginetest.NewUnlisted(t)
	ctx := context.Background()
	e := newEnv(t, eng, nil, fastTiming())
	svc := e.start()

	_, err := svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "plain", Image: e.image})
	if !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(switchboard.Message(err), unlisted) {
		t.Fatalf("a server under the unlisted setting: %v; want ErrInvalid naming %s", err, unlisted)
	}
	if list, _ := svc.List(ctx, "default"); len(list) != 0 {
		t.Fatalf("servers after the refusal: %+v", list)
	}
	for _, rt := range []string{def, engine.RuntimeAuto} {
		name := "fx-" + rt
		e.register(switchboard.HostedRegistration{Name: name, Runtime: rt})
		st := e.wait(name, "running", running)
		state, err := eng.Inspect(ctx, st.ContainerID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Runtime != def || state.Runtime != def {
			t.Errorf("runtime %s: status says %q, the container %q; want %s", rt, st.Runtime, state.Runtime, def)
		}
	}
}
