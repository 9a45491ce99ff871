package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/registrytest"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// TestSandboxImageFromRegistry: `sandbox build-image --push REGISTRY`
// publishes the sandbox image to a private registry, and a gateway whose
// setting names the pushed image (by digest) on an engine without it
// pulls it at the first session with its sandbox registry credentials,
// which then runs code; without them the session is refused, naming the
// settings.
func TestSandboxImageFromRegistry(t *testing.T) {
	t.Parallel() // its own registry and image names; mostly waits on the push and the pull
	e := enginetest.New(t)
	sandboxtest.Image(t, e) // built (or reused) here, as build-image would
	reg := registrytest.Start(t, "sbx", "sbx-pw-7")
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "MCP_SERVER_DATA_DIR":
			return t.TempDir()
		case "SWITCHBOARD_REGISTRY_USER":
			return reg.User
		case "SWITCHBOARD_REGISTRY_PASSWORD":
			return reg.Password
		}
		return ""
	}
	if err := runSandbox(t.Context(), []string{"build-image", "--no-latest", "--push", reg.Addr}, getenv, &out, &errOut); err != nil {
		t.Fatalf("build-image --push: %v\n%s%s", err, out.String(), errOut.String())
	}
	pushed, name := "", ""
	for _, l := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(l, "pushed "); ok {
			pushed = p
		}
		if _, v, ok := strings.Cut(l, "MCP_SERVER_SANDBOX_IMAGE_PYTHON="); ok {
			name, _, _ = strings.Cut(v, " ")
		}
	}
	if !strings.HasPrefix(pushed, reg.Addr+"/switchboard-sandbox:") || !strings.Contains(name, "@sha256:") {
		t.Fatalf("build-image --push printed %q: want the pushed tag and the name by digest", out.String())
	}
	// The engine must not have it under the name the gateway uses.
	ctx := context.Background()
	_ = e.RemoveImage(ctx, pushed)
	_ = e.RemoveImage(ctx, name)
	if ok, _ := e.ImageExists(ctx, name); ok {
		t.Fatalf("%s still on the engine", name)
	}
	t.Cleanup(func() { _ = e.RemoveImage(context.Background(), name) })

	env := map[string]string{"MCP_SERVER_SANDBOX_IMAGE_PYTHON": name, "MCP_SERVER_SANDBOX_IMAGE_NODE": name,
		"MCP_SERVER_IMAGE_ALLOW": reg.Addr + "/", "MCP_SERVER_SANDBOX_WARM_POOL": "0"}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	// Without the gateway's credentials the registry refuses the pull.
	anon := sandboxGateway(t, t.TempDir(), env)
	res, err := sdkConnect(t, anon.url+"/mcp", nil).CallTool(cctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "print(1)"}})
	msg := "no error"
	if err != nil {
		msg = err.Error()
	} else if res.IsError {
		msg = text(t, res)
	}
	if !strings.Contains(msg, "refused access") || !strings.Contains(msg, "MCP_SERVER_SANDBOX_REGISTRY_USER") || strings.Contains(msg, reg.Password) {
		t.Fatalf("execute_code without registry credentials: %s; want the refusal naming the settings", msg)
	}

	env["MCP_SERVER_SANDBOX_REGISTRY_USER"], env["MCP_SERVER_SANDBOX_REGISTRY_PASSWORD"] = reg.User, reg.Password
	g := sandboxGateway(t, t.TempDir(), env)
	cs := sdkConnect(t, g.url+"/mcp", nil)
	res, err = cs.CallTool(cctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": "print(6*7)"}})
	if err != nil || res.IsError {
		t.Fatalf("execute_code on the pulled image: %v %+v", err, res)
	}
	if r := structured(t, res); r["stdout"] != "42\n" {
		t.Fatalf("execute_code = %v", r)
	}
	if ok, _ := e.ImageExists(ctx, name); !ok {
		t.Errorf("%s not on the engine after the session started", name)
	}
}
