package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestOnDemandProjectGone: deleting a project (ProjectGone, what the
// gateway's project deletion calls) removes every catalog container of
// that project, its sessions' and its sessionless callers' long-lived
// ones and its warm pool's, and nothing of another project, whose
// long-lived server keeps its state and answers.
func TestOnDemandProjectGone(t *testing.T) {
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
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, Version: "test", WarmPool: 1})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	ctx := context.Background()
	call := func(project, session, tool, args string) string {
		t.Helper()
		res, err := o.SessionTools(project).CallCatalogTool(ctx, switchboard.CallRequest{Project: project, Session: session, Tool: tool, Arguments: json.RawMessage(args)})
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
	of := func(project string) int {
		t.Helper()
		cs, err := eng.List(ctx, map[string]string{engine.LabelKind: catalog.KindCatalog, engine.LabelProject: project})
		if err != nil {
			t.Fatal(err)
		}
		return len(cs)
	}

	call("p", "s1", "write_file", `{"path":"/tmp/k","text":"p1"}`)
	call("p", "", "write_file", `{"path":"/tmp/k","text":"p2"}`)
	call("p", "s1", "echo", `{"text":"x"}`) // the per-call pool of p fills again after it
	call("q", "s9", "write_file", `{"path":"/tmp/k","text":"kept"}`)
	// Two long-lived containers and the refilled warm one.
	eventually(t, time.Minute, "project p's two long-lived containers and its warm one", func() bool { return of("p") == 3 })

	gctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := o.ProjectGone(gctx, "p"); err != nil {
		t.Fatalf("ProjectGone: %v", err)
	}
	if n := of("p"); n != 0 {
		t.Errorf("%d catalog containers of the deleted project p left after ProjectGone", n)
	}
	if got := call("q", "s9", "read_file", `{"path":"/tmp/k"}`); got != "kept" {
		t.Errorf("project q's long-lived server read %q after p's deletion; want its file", got)
	}
	if n := of("q"); n != 1 {
		t.Errorf("project q has %d catalog containers after p's deletion, want its 1", n)
	}
}
