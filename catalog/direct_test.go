package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestCallCatalogToolByName: a catalog tool called by name, without
// mcp-add, runs: a per-call server in a container for that call (none
// left after), a long-lived one started once for the caller (a session,
// or a sessionless caller) and kept until the session ends
// or the idle expiry; mcp-add works without a session; mcp-find shows
// each server's tools.
func TestCallCatalogToolByName(t *testing.T) {
	o, eng := byNameEnv(t, 0)
	ctx := context.Background()
	st := o.SessionTools("p")
	call := func(session, tool, args string) string {
		t.Helper()
		if !st.ProvidesTool(tool) {
			t.Fatalf("the catalog does not know who offers %s", tool)
		}
		return callByName(t, o, "p", session, tool, args)
	}

	// Per-call, sessionless and with a session: a container per call.
	for _, session := range []string{"", "s1"} {
		if got := call(session, "echo", `{"text":"direct"}`); !strings.Contains(got, "direct") {
			t.Errorf("echo on session %q = %q", session, got)
		}
	}
	o.WaitRetired()
	if left := catalogContainers(t, eng); len(left) != 0 {
		t.Errorf("per-call containers left after the calls: %v", left)
	}

	// Long-lived, sessionless: one container serves the calls.
	call("", "write_file", `{"path":"/tmp/k","text":"kept"}`)
	if got := call("", "read_file", `{"path":"/tmp/k"}`); got != "kept" {
		t.Errorf("read_file = %q: the sessionless callers' long-lived container did not keep the file", got)
	}
	if n := len(catalogContainers(t, eng)); n != 1 {
		t.Errorf("%d catalog containers for one long-lived server, want 1", n)
	}
	// Found with its tools, as listed by the server once it ran.
	raw, err := o.ProjectTools("p").CallTool(ctx, switchboard.CallRequest{Project: "p", Tool: catalog.ToolFind, Arguments: json.RawMessage(`{"query":"longfix"}`)})
	if err != nil || !strings.Contains(string(raw), `"inputSchema"`) || !strings.Contains(string(raw), `"read_file"`) {
		t.Errorf("mcp-find after the server ran: %s, %v; want its tools with schemas", raw, err)
	}
	// The idle expiry removes it; the next call starts afresh.
	catalog.ExpireIdle(o, "p", "")
	o.WaitRetired()
	if left := catalogContainers(t, eng); len(left) != 0 {
		t.Errorf("containers left after the idle expiry: %v", left)
	}
	if got := call("", "read_file", `{"path":"/tmp/k"}`); got == "kept" {
		t.Error("a new activation after the expiry still has the old container's file")
	}

	// mcp-add without a session, then mcp-remove.
	if _, err := o.Add(ctx, "q", "", "longfix", nil); err != nil {
		t.Fatalf("mcp-add without a session: %v", err)
	}
	if err := o.Remove(ctx, "q", "", "", "longfix"); err != nil {
		t.Errorf("mcp-remove without a session: %v", err)
	}
	if st.ProvidesTool("no_such_tool") {
		t.Error("a tool no server offers is provided")
	}
}

// TestCatalogCallsDoNotWait: a sessionless caller's call of a server it
// has running does not wait while the same caller starts another server
// (one that never answers initialize, as a stalled start or a long pull),
// a second activation of the stalled server waits only as long as its
// caller's context, and one caller's activations are not another's.
func TestCatalogCallsDoNotWait(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  longfix: {image: %q, longLived: true, disableNetwork: true, tools: [{name: write_file}, {name: read_file}]}
  stallfix: {image: %q, longLived: true, disableNetwork: true, env: [{name: MCPFIXTURE_HTTP, value: ":8080"}], tools: [{name: stall}]}
`, image, image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, Version: "test", ConnectTimeout: 3 * time.Minute})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	st := o.SessionTools("p")
	call := func(ctx context.Context, tool, args string) error {
		_, err := st.CallCatalogTool(ctx, switchboard.CallRequest{Project: "p", Caller: "c", Tool: tool, Arguments: json.RawMessage(args)})
		return err
	}
	ctx := context.Background()
	if err := call(ctx, "write_file", `{"path":"/tmp/k","text":"kept"}`); err != nil {
		t.Fatal(err)
	}
	if st.SessionCatalog("c") == nil || st.SessionCatalog("d") != nil {
		t.Error("the caller's activation is not its own: want tools for caller c and none for caller d")
	}

	stallCtx, stop := context.WithCancel(ctx)
	stalled := make(chan error, 1)
	go func() { stalled <- call(stallCtx, "stall", `{}`) }()
	eventually(t, time.Minute, "the stalled server's container", func() bool {
		return slices.ContainsFunc(catalogContainers(t, eng), func(c string) bool { return strings.Contains(c, "/stallfix/") })
	})
	// The stalled start holds its own server's activation only.
	fast, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := call(fast, "read_file", `{"path":"/tmp/k"}`); err != nil {
		t.Errorf("a call of a running server waited for another server's start: %v", err)
	}
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	if err := call(short, "stall", `{}`); !errors.Is(err, switchboard.ErrCanceled) {
		t.Errorf("a second activation of the stalled server = %v; want ErrCanceled when its context ends", err)
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled start ended early: %v", err)
	default:
	}
	stop()
	if err := <-stalled; err == nil {
		t.Error("the stalled start succeeded")
	}
}

// byNameEnv is a catalog whose entries list their tools: "callfix" (echo)
// a container per call, "longfix" (write_file, read_file) long-lived;
// with a warm pool of warm per-call containers.
func byNameEnv(t *testing.T, warm int) (*catalog.OnDemand, *engine.Engine) {
	t.Helper()
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  callfix: {image: %q, disableNetwork: true, tools: [{name: echo}]}
  longfix: {image: %q, longLived: true, disableNetwork: true, tools: [{name: write_file}, {name: read_file}]}
`, image, image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, Version: "test", WarmPool: warm})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	return o, eng
}

// callByName calls a catalog tool by its name (no mcp-add) for session
// of project ("" sessionless) and returns its first text.
func callByName(t *testing.T, o *catalog.OnDemand, project, session, tool, args string) string {
	t.Helper()
	res, err := o.SessionTools(project).CallCatalogTool(context.Background(), switchboard.CallRequest{Project: project, Session: session, Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s in %s on session %q: %v", tool, project, session, err)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if json.Unmarshal(res, &r) != nil || len(r.Content) == 0 {
		t.Fatalf("%s result %s", tool, res)
	}
	return r.Content[0].Text
}
