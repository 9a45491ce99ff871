package catalog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
)

// fixturePkg is the MCP server the fixture image runs.
const fixturePkg = "github.com/switchboard-mcp/switchboard/internal/mcptest/mcpfixture"

// onDemandEnv is a catalog of the fixture image: "longfix" long-lived,
// "callfix" a container per call.
func onDemandEnv(t *testing.T, warm int) (*catalog.OnDemand, *engine.Engine, *notes) {
	t.Helper()
	return onDemandEnvWith(t, func(o *catalog.OnDemandOptions) { o.WarmPool = warm })
}

// onDemandEnvWith is onDemandEnv with options set by opt.
func onDemandEnvWith(t *testing.T, opt func(*catalog.OnDemandOptions)) (*catalog.OnDemand, *engine.Engine, *notes) {
	t.Helper()
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  longfix: {title: Long fixture, description: A fixture that lives as long as the session, image: %q, longLived: true, disableNetwork: true,
            env: [{name: MCPFIXTURE_NAME, value: "${NAME}"}]}
  callfix: {title: Per-call fixture, description: A fixture started for every call, image: %q, disableNetwork: true}
`, image, image)))
	if err != nil {
		t.Fatal(err)
	}
	n := &notes{}
	opts := catalog.OnDemandOptions{
		Engine: eng, Catalog: cat, Version: "test",
		Secrets: func(context.Context, string) (map[string]string, error) {
			return map[string]string{"NAME": "long-one"}, nil
		},
		Notify: n.add,
	}
	opt(&opts)
	o := catalog.NewOnDemand(opts)
	t.Cleanup(func() {
		if err := o.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if left := catalogContainers(t, eng); len(left) > 0 {
			t.Errorf("containers left after Close: %v", left)
		}
	})
	return o, eng, n
}

type notes struct {
	mu  sync.Mutex
	got []string
}

func (n *notes) add(project, session string) {
	n.mu.Lock()
	n.got = append(n.got, project+"/"+session)
	n.mu.Unlock()
}

func (n *notes) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// catalogContainers lists the engine's catalog containers as
// "owner/server/id".
func catalogContainers(t *testing.T, eng *engine.Engine) []string {
	t.Helper()
	cs, err := eng.List(context.Background(), map[string]string{engine.LabelKind: catalog.KindCatalog})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Labels[engine.LabelRef]+"/"+c.Labels[hosted.LabelServer]+"/"+c.ID[:12])
	}
	slices.Sort(out)
	return out
}

func callText(t *testing.T, st *catalog.SessionTools, session, tool, args string) string {
	t.Helper()
	res, err := st.CallSessionTool(context.Background(), switchboard.CallRequest{Project: "p", Session: session, Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("%s result %s", tool, res)
	}
	return r.Content[0].Text
}

func TestOnDemandLongLivedBoundToSession(t *testing.T) {
	o, eng, n := onDemandEnv(t, 0)
	ctx := context.Background()
	st := o.SessionTools("p")
	if st.SessionCatalog("s1") != nil {
		t.Fatal("a session that added nothing has tools of its own")
	}
	res, err := o.Add(ctx, "p", "s1", "longfix", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.LongLived || res.Already || !slices.Contains(res.Tools, "echo") {
		t.Fatalf("Add = %+v, want a long-lived server with echo", res)
	}
	if got := n.all(); !slices.Equal(got, []string{"p/s1"}) {
		t.Fatalf("notified %v, want p/s1 once", got)
	}
	c := st.SessionCatalog("s1")
	if _, ok := c.Lookup("echo"); !ok {
		t.Fatalf("session catalog %+v has no echo", c)
	}
	if st.SessionCatalog("s2") != nil || o.SessionTools("q").SessionCatalog("s1") != nil {
		t.Fatal("another session, or the same id in another project, sees s1's tools")
	}
	// The same container serves every call: a file written stays.
	callText(t, st, "s1", "write_file", `{"path":"/tmp/x","text":"kept"}`)
	if got := callText(t, st, "s1", "read_file", `{"path":"/tmp/x"}`); got != "kept" {
		t.Fatalf("read_file = %q, want the file the previous call wrote", got)
	}
	// The secret-backed env reached the container.
	if got := callText(t, st, "s1", "read_file", `{"path":"/proc/self/environ"}`); !strings.Contains(got, "MCPFIXTURE_NAME=long-one") {
		t.Fatalf("environment %q lacks the resolved secret", got)
	}
	if again, err := o.Add(ctx, "p", "s1", "longfix", nil); err != nil || !again.Already {
		t.Fatalf("second Add = %+v, %v; want already added", again, err)
	}
	if got := catalogContainers(t, eng); len(got) != 1 || !strings.HasPrefix(got[0], "s1/longfix/") {
		t.Fatalf("containers %v, want one owned by s1", got)
	}
	// A second session gets its own container.
	if _, err := o.Add(ctx, "p", "s2", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	if got := callText(t, st, "s2", "read_file", `{"path":"/tmp/x"}`); strings.Contains(got, "kept") {
		t.Fatal("s2 sees the file of s1's container")
	}
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if got := catalogContainers(t, eng); len(got) != 1 || !strings.HasPrefix(got[0], "s2/longfix/") {
		t.Fatalf("containers after s1 ended: %v, want only s2's", got)
	}
	if st.SessionCatalog("s1") != nil {
		t.Fatal("an ended session keeps its tools")
	}
	if err := o.Remove(ctx, "p", "s2", "", "longfix"); err != nil {
		t.Fatal(err)
	}
	o.WaitRetired()
	if got := catalogContainers(t, eng); len(got) != 0 {
		t.Fatalf("containers after mcp-remove: %v, want none", got)
	}
	if _, err := st.CallSessionTool(ctx, switchboard.CallRequest{Project: "p", Session: "s2", Tool: "echo"}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("call after remove: %v, want ErrNotFound", err)
	}
}

func TestOnDemandPerCallContainers(t *testing.T) {
	o, eng, _ := onDemandEnv(t, 1)
	ctx := context.Background()
	st := o.SessionTools("p")
	res, err := o.Add(ctx, "p", "s1", "callfix", func(name string) bool { return name == "echo" })
	if err != nil {
		t.Fatal(err)
	}
	if res.LongLived || !slices.Contains(res.Shadowed, "echo") {
		t.Fatalf("Add = %+v, want per-call with echo shadowed by the project", res)
	}
	// Every call runs in a container of its own (its hostname is its
	// short id), removed after the result.
	seen := map[string]bool{}
	for range 3 {
		host := strings.TrimSpace(callText(t, st, "s1", "read_file", `{"path":"/etc/hostname"}`))
		if host == "" || seen[host] {
			t.Fatalf("hostname %q: want a new container per call (seen %v)", host, seen)
		}
		seen[host] = true
		o.WaitRetired()
		for _, c := range catalogContainers(t, eng) {
			if strings.HasSuffix(c, "/"+host) {
				t.Fatalf("container %s still exists after its call", c)
			}
		}
	}
	// A file written by one call is gone in the next.
	callText(t, st, "s1", "write_file", `{"path":"/tmp/y","text":"lost"}`)
	if got := callText(t, st, "s1", "read_file", `{"path":"/tmp/y"}`); strings.Contains(got, "lost") {
		t.Fatal("a per-call container saw the previous call's file")
	}
	// Ending the last session using the server drains its warm pool,
	// refills under way included.
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if left := catalogContainers(t, eng); len(left) != 0 {
		t.Fatalf("containers after the last session using the pool ended: %v", left)
	}
	if s := o.Status(); s.Sessions != 0 || s.Containers != 0 || s.Warm != 0 {
		t.Fatalf("status %+v, want no session with servers and no containers", s)
	}
}

func TestOnDemandRefusals(t *testing.T) {
	o, _, _ := onDemandEnv(t, 0)
	ctx := context.Background()
	// Without a session, Add acts for the sessionless caller ""
	// (issue 23); an unknown server is refused all the same.
	if _, err := o.Add(ctx, "p", "", "nope", nil); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("Add of an unknown server without a session: %v, want ErrInvalid", err)
	}
	if _, err := o.Add(ctx, "p", "s1", "nope", nil); !errors.Is(err, switchboard.ErrInvalid) || !strings.Contains(err.Error(), "mcp-find") {
		t.Fatalf("Add of an unknown server: %v, want ErrInvalid pointing at mcp-find", err)
	}
	if err := o.Remove(ctx, "p", "s1", "", "longfix"); !errors.Is(err, switchboard.ErrInvalid) {
		t.Fatalf("Remove of a server never added: %v, want ErrInvalid", err)
	}
	// A session that ended starts nothing, even if its mcp-add raced the
	// end and reaches the service after it.
	o.SessionEnded("p", "gone")
	if _, err := o.Add(ctx, "p", "gone", "longfix", nil); !errors.Is(err, switchboard.ErrCanceled) {
		t.Fatalf("Add for an ended session: %v, want ErrCanceled", err)
	}
	if s := o.Status(); s.Containers != 0 {
		t.Fatalf("status %+v after refusals, want no containers", s)
	}
	// No engine: a configuration error naming the variable.
	o2 := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: nil, Catalog: o.Catalog()})
	if _, err := o2.Add(ctx, "p", "s1", "callfix", nil); !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Fatalf("Add without an engine: %v, want ErrConfig naming DOCKER_HOST", err)
	}
	_ = o2.Close(ctx)
}

func TestOnDemandContainerCap(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf("registry:\n  longfix: {image: %q, longLived: true, disableNetwork: true}\n", image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, MaxContainers: 1})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	ctx := context.Background()
	if _, err := o.Add(ctx, "p", "s1", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(ctx, "p", "s2", "longfix", nil); !errors.Is(err, switchboard.ErrResourceLimit) || !strings.Contains(err.Error(), "MCP_SERVER_CATALOG_MAX_CONTAINERS") {
		t.Fatalf("second long-lived container: %v, want ErrResourceLimit naming the variable", err)
	}
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if _, err := o.Add(ctx, "p", "s2", "longfix", nil); err != nil {
		t.Fatalf("after s1 ended the slot is free again: %v", err)
	}
}

func TestCatalogToolsArguments(t *testing.T) {
	cat, err := catalog.ParseCatalog(strings.NewReader("registry:\n  fetch: {image: \"mcp/fetch:1\", title: Fetch, description: Fetches web pages}\n  memory: {image: \"mcp/memory:1\", longLived: true, description: A knowledge graph}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Catalog: cat})
	defer o.Close(context.Background())
	tools := o.ProjectTools("p")
	call := func(tool, args string) (json.RawMessage, error) {
		return tools.CallTool(context.Background(), switchboard.CallRequest{Project: "p", Session: "s", Tool: tool, Arguments: json.RawMessage(args)})
	}
	for name, tc := range map[string]struct{ tool, args string }{
		"add without name":  {"mcp-add", `{}`},
		"add empty name":    {"mcp-add", `{"name":""}`},
		"add number name":   {"mcp-add", `{"name":7}`},
		"add unknown field": {"mcp-add", `{"name":"fetch","nmae":"x"}`},
		"add unknown":       {"mcp-add", `{"name":"` + strings.Repeat("x", 5000) + `"}`},
		"find bad limit":    {"mcp-find", `{"limit":0}`},
		"find bad query":    {"mcp-find", `{"query":3}`},
		"remove not added":  {"mcp-remove", `{"name":"fetch"}`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := call(tc.tool, tc.args)
			if !errors.Is(err, switchboard.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid (-32602)", err)
			}
			if len(err.Error()) > 600 {
				t.Fatalf("error message of %d bytes echoes the input", len(err.Error()))
			}
		})
	}
	res, err := call("mcp-find", `{"query":"WEB pages"}`)
	if err != nil {
		t.Fatal(err)
	}
	var found struct {
		StructuredContent struct {
			Servers []catalog.FoundServer `json:"servers"`
			Total   int                   `json:"total"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &found); err != nil || found.StructuredContent.Total != 1 || found.StructuredContent.Servers[0].Name != "fetch" {
		t.Fatalf("mcp-find web pages = %s (%v)", res, err)
	}
	res, err = call("mcp-find", `{"limit":1}`)
	if err != nil || json.Unmarshal(res, &found) != nil || found.StructuredContent.Total != 2 || len(found.StructuredContent.Servers) != 1 {
		t.Fatalf("mcp-find limit 1 = %s (%v), want 1 of 2", res, err)
	}
}

func TestOnDemandMissingSecret(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf("registry:\n  longfix: {image: %q, longLived: true, disableNetwork: true, secrets: [{name: fix.key, env: KEY}]}\n", image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat,
		Secrets: func(context.Context, string) (map[string]string, error) { return map[string]string{"other": "x"}, nil }})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	_, err = o.Add(context.Background(), "p", "s1", "longfix", nil)
	if !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(err.Error(), "fix_key") {
		t.Fatalf("Add with a missing secret: %v, want ErrConfig naming fix_key", err)
	}
	if left := catalogContainers(t, eng); len(left) != 0 {
		t.Fatalf("containers after a refused Add: %v", left)
	}
}

// TestOnDemandCallInFlightAtSessionEnd: a session that ends while a call
// runs on its long-lived container loses the container at once; the call
// fails instead of keeping it alive.
func TestOnDemandCallInFlightAtSessionEnd(t *testing.T) {
	o, eng, _ := onDemandEnv(t, 0)
	ctx := context.Background()
	if _, err := o.Add(ctx, "p", "s1", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	st := o.SessionTools("p")
	done := make(chan error, 1)
	go func() {
		_, err := st.CallSessionTool(ctx, switchboard.CallRequest{Project: "p", Session: "s1", Tool: "seq", Arguments: json.RawMessage(`{"i":1,"ms":120000}`)})
		done <- err
	}()
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if left := catalogContainers(t, eng); len(left) != 0 {
		t.Fatalf("containers after the session ended mid-call: %v", left)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the call on a removed container succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call on a removed container did not end")
	}
	if s := o.Status(); s.Containers != 0 || s.LongLived != 0 || s.Sessions != 0 {
		t.Fatalf("status %+v, want nothing counted", s)
	}
}

// TestOnDemandReAddAfterExit: a long-lived container that exited is
// replaced by the next mcp-add, within the cap it held, and the session is
// counted once.
func TestOnDemandReAddAfterExit(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf("registry:\n  longfix: {image: %q, longLived: true, disableNetwork: true}\n  callfix: {image: %q, disableNetwork: true}\n", image, image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, MaxContainers: 1})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	ctx := context.Background()
	st := o.SessionTools("p")
	if _, err := o.Add(ctx, "p", "s1", "longfix", nil); err != nil {
		t.Fatal(err)
	}
	// The cap covers per-call containers too.
	if _, err := o.Add(ctx, "p", "s1", "callfix", nil); !errors.Is(err, switchboard.ErrResourceLimit) {
		t.Fatalf("a per-call server with the cap taken: %v, want ErrResourceLimit", err)
	}
	// The container exits (the fixture's exit tool): the call reports it.
	if _, err := st.CallSessionTool(ctx, switchboard.CallRequest{Project: "p", Session: "s1", Tool: "exit", Arguments: json.RawMessage(`{"code":3}`)}); err == nil {
		t.Fatal("exit answered")
	}
	res, err := o.Add(ctx, "p", "s1", "longfix", nil)
	if err != nil || res.Already {
		t.Fatalf("re-add after the container exited: %+v, %v; want a new container", res, err)
	}
	if got := callText(t, st, "s1", "echo", `{"text":"back"}`); !strings.Contains(got, "back") {
		t.Fatalf("echo on the new container = %q", got)
	}
	o.WaitRetired()
	if s := o.Status(); s.Sessions != 1 || s.Containers != 1 || s.LongLived != 1 {
		t.Fatalf("status %+v, want one session, one container", s)
	}
	if left := catalogContainers(t, eng); len(left) != 1 {
		t.Fatalf("containers %v, want only the new one", left)
	}
	o.SessionEnded("p", "s1")
	o.WaitRetired()
	if s := o.Status(); s.Sessions != 0 || s.Containers != 0 {
		t.Fatalf("status after the session ended %+v", s)
	}
}

// TestOnDemandVolumesPerProject: a catalog entry's named volume persists
// across sessions of one project and is not shared with another project.
func TestOnDemandVolumesPerProject(t *testing.T) {
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf("registry:\n  notes: {image: %q, longLived: true, disableNetwork: true, volumes: [\"notes:/data\"]}\n", image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	ctx := context.Background()
	for _, k := range [][2]string{{"p", "s1"}, {"q", "s1"}} {
		if _, err := o.Add(ctx, k[0], k[1], "notes", nil); err != nil {
			t.Fatal(err)
		}
	}
	callText(t, o.SessionTools("p"), "s1", "write_file", `{"path":"/data/n","text":"p's note"}`)
	if got := callText(t, o.SessionTools("q"), "s1", "read_file", `{"path":"/data/n"}`); strings.Contains(got, "p's note") {
		t.Fatal("project q reads project p's catalog volume")
	}
	o.SessionEnded("p", "s1")
	if _, err := o.Add(ctx, "p", "s2", "notes", nil); err != nil {
		t.Fatal(err)
	}
	if got := callText(t, o.SessionTools("p"), "s2", "read_file", `{"path":"/data/n"}`); got != "p's note" {
		t.Fatalf("a later session of p reads %q, want p's note", got)
	}
}
