package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// fakeSandbox is a working in-memory stand-in for the sandbox service
// (the real one needs a Docker engine): one workspace with a live
// session, snapshots that restore into new workspaces.
type fakeSandbox struct {
	mu   sync.Mutex
	off  map[string]bool
	rows []switchboard.WorkspaceInfo
	ops  []string
}

func (f *fakeSandbox) op(op, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op+" "+id)
}

func (f *fakeSandbox) Workspaces(context.Context, string) ([]switchboard.WorkspaceInfo, error) {
	f.op("list", "")
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rows), nil
}

func (f *fakeSandbox) GetWorkspace(_ context.Context, _, id string) (switchboard.WorkspaceInfo, error) {
	f.op("get", id)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, row := range f.rows {
		if row.WorkspaceID == id {
			return row, nil
		}
	}
	return switchboard.WorkspaceInfo{}, switchboard.Errorf(switchboard.ErrNotFound, "workspace not found")
}

func (f *fakeSandbox) AttachWorkspace(_ context.Context, _, _, id string) (switchboard.SandboxSession, error) {
	f.op("attach", id)
	return switchboard.SandboxSession{WorkspaceID: id}, nil
}

func (f *fakeSandbox) DetachWorkspace(_ context.Context, _, id string, _ bool) (switchboard.WorkspaceInfo, error) {
	f.op("detach", id)
	return switchboard.WorkspaceInfo{WorkspaceID: id}, nil
}

func (f *fakeSandbox) SnapshotWorkspace(_ context.Context, _, id string, _ bool) (switchboard.WorkspaceInfo, error) {
	f.op("snapshot", id)
	f.mu.Lock()
	defer f.mu.Unlock()
	row := switchboard.WorkspaceInfo{WorkspaceID: "snap-1", Status: "snapshot", SnapshotOf: id, CreatedAt: time.Now()}
	f.rows = append(f.rows, row)
	return row, nil
}

func (f *fakeSandbox) RestoreSnapshot(_ context.Context, _, id string) (switchboard.WorkspaceInfo, error) {
	f.op("restore", id)
	return switchboard.WorkspaceInfo{WorkspaceID: id}, nil
}

func (f *fakeSandbox) DeleteWorkspace(_ context.Context, _, id string, _ bool) error {
	f.op("delete", id)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, row := range f.rows {
		if row.WorkspaceID == id {
			f.rows = append(f.rows[:i], f.rows[i+1:]...)
			return nil
		}
	}
	return switchboard.Errorf(switchboard.ErrNotFound, "workspace not found")
}

func (f *fakeSandbox) SandboxEnabled(project string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.off[project]
}

func (f *fakeSandbox) SetSandboxEnabled(_ context.Context, project string, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off[project] = !on
	return nil
}

func TestSandboxPage(t *testing.T) {
	f := &fakeSandbox{off: map[string]bool{}, rows: []switchboard.WorkspaceInfo{
		{WorkspaceID: "ws-1", Status: "running", SessionID: "sess-1", AgentSessionID: "agent-7", LastUsedAt: time.Now()},
	}}
	g := newGatewayWith(t, adminToken, nil, f)
	b := g.browser(t)
	b.login(adminToken, "")
	p := b.get("/ui/p/a/sandbox")
	for _, want := range []string{"<strong>enabled</strong>", `data-workspace="ws-1"`, "sess-1", "held by agent-7", "No snapshots.",
		`action="/ui/p/a/sandbox/workspace-delete"`, "Delete workspace ws-1 and its files (stops its session)"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("sandbox page lacks %q", want)
		}
	}
	tok := b.csrf("/ui/p/a/sandbox")
	for _, step := range []struct{ action, id string }{{"workspace-snapshot", "ws-1"}, {"snapshot-restore", "snap-1"}, {"workspace-detach", "ws-1"}, {"sandbox-disable", ""}} {
		if p := b.post("/ui/p/a/sandbox/"+step.action, url.Values{"csrf": {tok}, "id": {step.id}}); p.status != http.StatusSeeOther {
			t.Errorf("%s: %d\n%s", step.action, p.status, p.body)
		}
	}
	if f.SandboxEnabled("a") {
		t.Errorf("sandbox still enabled for a")
	}
	p = b.get("/ui/p/a/sandbox")
	if !strings.Contains(p.body, "<strong>disabled</strong>") || !strings.Contains(p.body, `data-snapshot="snap-1"`) || !strings.Contains(p.body, "Delete snapshot snap-1") {
		t.Errorf("sandbox page after the actions lacks the switch or the snapshot")
	}
	// Deleting the snapshot: a DELETE through the API, then the page
	// without it; an unknown id shows the API's 404 on the page.
	if p := b.post("/ui/p/a/sandbox/workspace-delete", url.Values{"csrf": {tok}, "id": {"snap-1"}}); p.status != http.StatusSeeOther {
		t.Errorf("workspace-delete: %d\n%s", p.status, p.body)
	}
	if p := b.get("/ui/p/a/sandbox?done=workspace-delete"); strings.Contains(p.body, `data-snapshot="snap-1"`) || !strings.Contains(p.body, "Deleted.") {
		t.Errorf("sandbox page after the delete still lists the snapshot or lacks the flash")
	}
	if p := b.post("/ui/p/a/sandbox/workspace-delete", url.Values{"csrf": {tok}, "id": {"snap-1"}}); p.status != http.StatusNotFound || !strings.Contains(p.body, "workspace not found") {
		t.Errorf("deleting an unknown workspace: %d", p.status)
	}
	// Without the CSRF token nothing is deleted.
	if p := b.post("/ui/p/a/sandbox/workspace-delete", url.Values{"id": {"ws-1"}}); p.status == http.StatusSeeOther {
		t.Errorf("workspace-delete without a CSRF token: %d", p.status)
	}
	f.mu.Lock()
	if n := len(f.rows); n != 1 {
		t.Errorf("rows after the deletes: %d, want 1 (ws-1)", n)
	}
	f.mu.Unlock()
	// Another project with a project token: the API's 403.
	pt := g.browser(t)
	pt.login(g.projectToken(t, "b"), "b")
	if p := pt.get("/ui/p/a/sandbox"); p.status != http.StatusForbidden {
		t.Errorf("project token, another project's sandbox: %d, want 403", p.status)
	}
}

// TestSandboxPageReadable (issue 20, item 9): a workspace's UUID shows
// as its first 8 characters (the whole id in the title), a healthy ready
// (or running) badge is green (good), others neutral, and times read as
// relative ("5 min ago"), with the UTC time only in the tooltip.
func TestSandboxPageReadable(t *testing.T) {
	const ws, snap = "3f2a9c4e-1b7d-4e8a-9c21-5d6e7f809a1b", "8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
	f := &fakeSandbox{off: map[string]bool{}, rows: []switchboard.WorkspaceInfo{
		{WorkspaceID: ws, Status: "ready", LastUsedAt: time.Now().Add(-5 * time.Minute)},
		{WorkspaceID: "d0d0d0d0-0000-4000-8000-000000000000", Status: "creating", LastUsedAt: time.Now()},
		{WorkspaceID: snap, Status: "snapshot", SnapshotOf: ws, CreatedAt: time.Now().Add(-2 * time.Hour)},
	}}
	g := newGatewayWith(t, adminToken, nil, f)
	b := g.browser(t)
	b.login(adminToken, "")
	p := b.get("/ui/p/a/sandbox")
	for _, want := range []string{
		`<th scope="row"><code title="` + ws + `">3f2a9c4e</code>`,
		`<span class="state good">ready</span>`,
		`<span class="state neutral">creating</span>`,
		`<code title="` + snap + `">8c1d2e3f</code> of <code title="` + ws + `">3f2a9c4e</code>`,
		`>5 min ago</time>`,
	} {
		if !strings.Contains(p.body, want) {
			t.Errorf("sandbox page lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`>[^<>]*UTC[^<>]*<`).FindString(p.body); m != "" {
		t.Errorf("sandbox page shows UTC as text: %s (the UTC time belongs in the tooltip)", m)
	}
}

// TestSandboxOff: a gateway without the sandbox says so on the page.
func TestSandboxOff(t *testing.T) {
	g := newGateway(t, "")
	p := g.browser(t).get("/ui/p/a/sandbox")
	if p.status != http.StatusOK || !strings.Contains(p.body, "this gateway runs without the sandbox") {
		t.Errorf("sandbox page without the sandbox: %d", p.status)
	}
}
