package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
)

// TestOnDemandProjectGone: deleting a project (ProjectGone, what the
// gateway's project deletion calls) removes every catalog container of
// that project, its sessions' and its sessionless callers' long-lived
// ones and its warm pool's, and nothing of another project, whose
// long-lived server keeps its state and answers.
func TestOnDemandProjectGone(t *testing.T) {
	o, eng := byNameEnv(t, 1)
	ctx := context.Background()
	call := func(project, session, tool, args string) string {
		t.Helper()
		return callByName(t, o, project, session, tool, args)
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
