// Package sandboxtest gives tests the sandbox image, built by the same
// builder as `switchboard sandbox build-image` and reused by its content
// tag, so only the first run on a machine pays for the build.
package sandboxtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

var (
	mu  sync.Mutex
	ref string
)

// Image returns the sandbox image's ref, building it when the engine
// lacks it (about 30 s cold; the .debs are cached in the user cache
// directory). Without apt-get the test is skipped, or fails where
// SWITCHBOARD_TEST_REQUIRE names docker.
func Image(t testing.TB, e *engine.Engine) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if ref != "" {
		if ok, err := e.ImageExists(context.Background(), ref); err == nil && ok {
			return ref
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := (&sandbox.Builder{Engine: e}).Build(ctx)
	if err != nil {
		testenv.Need(t, "docker", false, "building the sandbox image: "+err.Error())
		return ""
	}
	ref = res.Ref
	return ref
}
