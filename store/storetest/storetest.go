// Package storetest is the conformance suite every switchboard.Store
// passes: each store's tests call Run with a function that opens a fresh,
// empty store, so both implementations are held to one behaviour.
package storetest

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

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchboard-mcp/switchboard"
)

// Run runs the suite. open returns a new, empty store for one test and
// arranges for it to be closed when that test ends; subtests run in
// parallel, each with its own store.
func Run(t *testing.T, open func(t *testing.T) switchboard.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, switchboard.Store)
	}{
		{"Projects", testProjects},
		{"DeleteProjectCascades", testDeleteProjectCascades},
		{"ProjectSandbox", testProjectSandbox},
		{"Servers", testServers},
		{"ServerErrors", testServerErrors},
		{"ImportManifest", testImportManifest},
		{"ImportManifestErrors", testImportManifestErrors},
		{"Workspaces", testWorkspaces},
		{"ToolCallsFilters", testToolCallsFilters},
		{"ToolCallsKind", testToolCallsKind},
		{"ToolCallsPaging", testToolCallsPaging},
		{"ToolCallsErrors", testToolCallsErrors},
		{"ToolCallsConcurrent", testToolCallsConcurrent},
		{"ToolCallsReplay", testToolCallsReplay},
		{"Secrets", testSecrets},
		{"Tokens", testTokens},
		{"Leases", testLeases},
		{"ServerStates", testServerStates},
		{"CloseTwice", testCloseTwice},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// jsonEqual compares JSON semantically: stores may respace and reorder.
var jsonEqual = cmp.Transformer("json", func(b json.RawMessage) any {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Sprintf("invalid JSON %q", b)
	}
	return v
})

// assigned ignores what the store assigns, for comparing with what was
// given.
var assigned = cmp.Options{
	cmpopts.IgnoreFields(switchboard.Project{}, "CreatedAt", "UpdatedAt"),
	cmpopts.IgnoreFields(switchboard.ServerRecord{}, "ID", "CreatedAt", "UpdatedAt"),
	cmpopts.IgnoreFields(switchboard.Workspace{}, "ID", "CreatedAt", "UpdatedAt"),
	cmpopts.IgnoreFields(switchboard.Secret{}, "CreatedAt", "UpdatedAt"),
	cmpopts.IgnoreFields(switchboard.Token{}, "ID", "CreatedAt"),
	cmpopts.IgnoreFields(switchboard.ToolCallRecord{}, "ID"),
}

func ctx(t *testing.T) context.Context { return t.Context() }

// must(f())(t) returns the value of f, failing t on f's error.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// check fails the test on err.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr checks that err is kind, carries a message and leaks no driver.
func wantErr(t *testing.T, err, kind error, what string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: got error %v, want %v", what, err, kind)
		return
	}
	if switchboard.Message(err) == "" {
		t.Errorf("%s: error %v has no client message", what, err)
	}
}

// checkTime checks a store-assigned time: set, UTC, microseconds, and
// within [lo, now].
func checkTime(t *testing.T, what string, got, lo time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Errorf("%s = %v: not UTC", what, got)
	}
	if got.Nanosecond()%1000 != 0 {
		t.Errorf("%s = %v: finer than microseconds", what, got)
	}
	if got.Before(lo.Truncate(time.Microsecond)) || got.After(time.Now()) {
		t.Errorf("%s = %v, want between %v and now", what, got, lo)
	}
}

func createProject(t *testing.T, s switchboard.Store, id string) switchboard.Project {
	t.Helper()
	return must(s.CreateProject(ctx(t), switchboard.Project{ID: id, Description: "project " + id}))(t)
}

func testProjects(t *testing.T, s switchboard.Store) {
	before := time.Now()
	b := createProject(t, s, "beta")
	a := createProject(t, s, "alpha")
	checkTime(t, "CreatedAt", a.CreatedAt, before)
	if !a.UpdatedAt.Equal(a.CreatedAt) {
		t.Errorf("new project: UpdatedAt %v != CreatedAt %v", a.UpdatedAt, a.CreatedAt)
	}
	if diff := cmp.Diff(switchboard.Project{ID: "alpha", Description: "project alpha"}, a, assigned); diff != "" {
		t.Errorf("CreateProject (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(a, must(s.GetProject(ctx(t), "alpha"))(t)); diff != "" {
		t.Errorf("GetProject (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]switchboard.Project{a, b}, must(s.ListProjects(ctx(t)))(t)); diff != "" {
		t.Errorf("ListProjects: ordered by ID (-want +got):\n%s", diff)
	}

	u := must(s.UpdateProject(ctx(t), switchboard.Project{ID: "alpha", Description: "changed"}))(t)
	if u.Description != "changed" || !u.CreatedAt.Equal(a.CreatedAt) || u.UpdatedAt.Before(a.UpdatedAt) {
		t.Errorf("UpdateProject = %+v, want new description, same CreatedAt, later UpdatedAt than %+v", u, a)
	}
	if diff := cmp.Diff(u, must(s.GetProject(ctx(t), "alpha"))(t)); diff != "" {
		t.Errorf("GetProject after update (-want +got):\n%s", diff)
	}

	_, err := s.CreateProject(ctx(t), switchboard.Project{ID: "alpha"})
	wantErr(t, err, switchboard.ErrConflict, "CreateProject twice")
	_, err = s.CreateProject(ctx(t), switchboard.Project{})
	wantErr(t, err, switchboard.ErrInvalid, "CreateProject without ID")
	_, err = s.GetProject(ctx(t), "nope")
	wantErr(t, err, switchboard.ErrNotFound, "GetProject unknown")
	_, err = s.UpdateProject(ctx(t), switchboard.Project{ID: "nope"})
	wantErr(t, err, switchboard.ErrNotFound, "UpdateProject unknown")
	wantErr(t, s.DeleteProject(ctx(t), "nope"), switchboard.ErrNotFound, "DeleteProject unknown")

	check(t, s.DeleteProject(ctx(t), "alpha"))
	_, err = s.GetProject(ctx(t), "alpha")
	wantErr(t, err, switchboard.ErrNotFound, "GetProject deleted")
	wantErr(t, s.DeleteProject(ctx(t), "alpha"), switchboard.ErrNotFound, "DeleteProject twice")
	if diff := cmp.Diff([]switchboard.Project{b}, must(s.ListProjects(ctx(t)))(t)); diff != "" {
		t.Errorf("ListProjects after delete (-want +got):\n%s", diff)
	}
	// The ID is free again, with nothing of the old project left.
	createProject(t, s, "alpha")
	if got := must(s.ListServers(ctx(t), "alpha"))(t); len(got) != 0 {
		t.Errorf("recreated project has servers %v", got)
	}
}

// testProjectSandbox: the sandbox switch starts as given (nil: follow
// the gateway's default), SetProjectSandbox sets and clears it,
// UpdateProject keeps it, and every read returns it.
func testProjectSandbox(t *testing.T, s switchboard.Store) {
	on, off := true, false
	a := createProject(t, s, "a")
	if a.Sandbox != nil {
		t.Fatalf("new project's switch = %v, want nil", *a.Sandbox)
	}
	b := must(s.CreateProject(ctx(t), switchboard.Project{ID: "b", Sandbox: &off}))(t)
	if b.Sandbox == nil || *b.Sandbox {
		t.Fatalf("CreateProject with the switch off = %+v", b)
	}
	got := must(s.SetProjectSandbox(ctx(t), "a", &off))(t)
	if got.Sandbox == nil || *got.Sandbox || got.Description != a.Description || !got.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("SetProjectSandbox off = %+v", got)
	}
	checkTime(t, "UpdatedAt after SetProjectSandbox", got.UpdatedAt, a.UpdatedAt)
	if diff := cmp.Diff(got, must(s.GetProject(ctx(t), "a"))(t)); diff != "" {
		t.Errorf("GetProject after SetProjectSandbox (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]switchboard.Project{got, b}, must(s.ListProjects(ctx(t)))(t)); diff != "" {
		t.Errorf("ListProjects (-want +got):\n%s", diff)
	}
	// Changing the description keeps the switch.
	u := must(s.UpdateProject(ctx(t), switchboard.Project{ID: "a", Description: "new", Sandbox: &on}))(t)
	if u.Sandbox == nil || *u.Sandbox {
		t.Fatalf("UpdateProject changed the switch: %+v", u)
	}
	if p := must(s.SetProjectSandbox(ctx(t), "a", &on))(t); p.Sandbox == nil || !*p.Sandbox || p.Description != "new" {
		t.Fatalf("SetProjectSandbox on = %+v", p)
	}
	if p := must(s.SetProjectSandbox(ctx(t), "a", nil))(t); p.Sandbox != nil {
		t.Fatalf("SetProjectSandbox nil = %v", *p.Sandbox)
	}
	if p := must(s.GetProject(ctx(t), "a"))(t); p.Sandbox != nil {
		t.Fatalf("GetProject after clearing = %v", *p.Sandbox)
	}
	_, err := s.SetProjectSandbox(ctx(t), "nope", &on)
	wantErr(t, err, switchboard.ErrNotFound, "SetProjectSandbox unknown")
}

func testDeleteProjectCascades(t *testing.T, s switchboard.Store) {
	for _, p := range []string{"gone", "kept"} {
		createProject(t, s, p)
		must(s.CreateServer(ctx(t), server(p, "fs")))(t)
		must(s.ImportManifest(ctx(t), p, "prod", []switchboard.ServerRecord{server("", "m")}))(t)
		must(s.PutSecret(ctx(t), switchboard.Secret{ProjectID: p, Name: "K", Ciphertext: []byte("c")}))(t)
		must(s.CreateToken(ctx(t), switchboard.Token{ProjectID: p, Name: "t", Hash: []byte("hash-" + p)}))(t)
		must(s.CreateWorkspace(ctx(t), switchboard.Workspace{ProjectID: p, ContainerType: switchboard.ContainerWorkspace}))(t)
		check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{call(p, "fs", "read", time.Now())}))
	}
	check(t, s.DeleteProject(ctx(t), "gone"))
	// A record of the deleted project that lands afterwards (a batch in
	// flight, a replayed spool) must not show in a project re-created
	// under its id.
	check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{call("gone", "fs", "late", time.Now())}))
	if _, err := s.CreateProject(ctx(t), switchboard.Project{ID: "kept"}); !errors.Is(err, switchboard.ErrConflict) {
		t.Fatalf("CreateProject of an existing id: %v, want ErrConflict", err)
	}

	createProject(t, s, "gone") // so listings answer instead of ErrNotFound
	if got := must(s.ListServers(ctx(t), "gone"))(t); len(got) != 0 {
		t.Errorf("servers survived their project: %v", got)
	}
	if got := must(s.ListSecrets(ctx(t), "gone"))(t); len(got) != 0 {
		t.Errorf("secrets survived their project: %v", got)
	}
	if got := must(s.ListTokens(ctx(t), "gone"))(t); len(got) != 0 {
		t.Errorf("tokens survived their project: %v", got)
	}
	if _, err := s.TokenByHash(ctx(t), []byte("hash-gone")); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("TokenByHash of a deleted project's token: %v, want ErrNotFound", err)
	}
	if got := must(s.ListWorkspaces(ctx(t), switchboard.WorkspaceFilter{ProjectID: "gone"}))(t); len(got) != 0 {
		t.Errorf("workspaces survived their project: %v", got)
	}
	if got := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{ProjectID: "gone"}))(t); len(got.Calls) != 0 {
		t.Errorf("tool calls survived their project: %v", got.Calls)
	}

	// The other project is untouched.
	if n := len(must(s.ListServers(ctx(t), "kept"))(t)); n != 2 {
		t.Errorf("kept project has %d servers, want 2", n)
	}
	if n := len(must(s.ListSecrets(ctx(t), "kept"))(t)); n != 1 {
		t.Errorf("kept project has %d secrets, want 1", n)
	}
	must(s.TokenByHash(ctx(t), []byte("hash-kept")))(t)
	if n := len(must(s.ListWorkspaces(ctx(t), switchboard.WorkspaceFilter{ProjectID: "kept"}))(t)); n != 1 {
		t.Errorf("kept project has %d workspaces, want 1", n)
	}
	if n := len(must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{ProjectID: "kept"}))(t).Calls); n != 1 {
		t.Errorf("kept project has %d tool calls, want 1", n)
	}
}

func server(project, name string) switchboard.ServerRecord {
	return switchboard.ServerRecord{
		ProjectID:   project,
		Name:        name,
		Description: "the " + name + " server",
		Transport:   switchboard.TransportStdio,
		Config:      json.RawMessage(`{"command": "npx", "args": ["-y", "@mcp/` + name + `"], "env": {"TOKEN": "${TOKEN}"}}`),
		Enabled:     true,
	}
}

func testServers(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	createProject(t, s, "q")
	before := time.Now()

	fs := must(s.CreateServer(ctx(t), server("p", "fs")))(t)
	if fs.ID == "" {
		t.Error("CreateServer assigned no ID")
	}
	checkTime(t, "CreatedAt", fs.CreatedAt, before)
	if diff := cmp.Diff(server("p", "fs"), fs, assigned, jsonEqual); diff != "" {
		t.Errorf("CreateServer (-want +got):\n%s", diff)
	}
	remote := server("p", "api")
	remote.Transport = switchboard.TransportStreamableHTTP
	remote.Config = json.RawMessage(`{"url":"https://api.example.com/mcp","headers":{"Authorization":"Bearer ${API_TOKEN}"},"n":12345678901234567890}`)
	remote.Enabled = false
	remote.ProductID = "crm"
	api := must(s.CreateServer(ctx(t), remote))(t)
	legacy := server("p", "legacy")
	legacy.Transport, legacy.Config = switchboard.TransportSSE, nil
	sse := must(s.CreateServer(ctx(t), legacy))(t)
	legacy.Config = json.RawMessage(`{}`)
	if diff := cmp.Diff(legacy, sse, assigned, jsonEqual); diff != "" {
		t.Errorf("CreateServer with nil config: stored as {} (-want +got):\n%s", diff)
	}
	other := must(s.CreateServer(ctx(t), server("q", "fs")))(t) // same name, other project
	if other.ID == fs.ID {
		t.Error("two servers got one ID")
	}

	if diff := cmp.Diff(api, must(s.GetServer(ctx(t), "p", "api"))(t), jsonEqual); diff != "" {
		t.Errorf("GetServer (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]switchboard.ServerRecord{api, fs, sse}, must(s.ListServers(ctx(t), "p"))(t), jsonEqual); diff != "" {
		t.Errorf("ListServers: ordered by name (-want +got):\n%s", diff)
	}
	createProject(t, s, "empty")
	if got, err := s.ListServers(ctx(t), "empty"); err != nil || len(got) != 0 {
		t.Errorf("ListServers of an empty project = %v, %v; want none, no error", got, err)
	}

	// Update: rename, change everything but product and creation time.
	upd := fs
	upd.Name, upd.Description, upd.Enabled = "files", "renamed", false
	upd.Transport = switchboard.TransportSSE
	upd.Config = json.RawMessage(`{"url":"http://127.0.0.1:9/sse"}`)
	upd.ProductID = "ignored"
	got := must(s.UpdateServer(ctx(t), upd))(t)
	upd.ProductID = ""
	if diff := cmp.Diff(upd, got, jsonEqual, cmpopts.IgnoreFields(switchboard.ServerRecord{}, "UpdatedAt")); diff != "" {
		t.Errorf("UpdateServer (-want +got):\n%s", diff)
	}
	if got.UpdatedAt.Before(fs.UpdatedAt) {
		t.Errorf("UpdatedAt went back: %v -> %v", fs.UpdatedAt, got.UpdatedAt)
	}
	if diff := cmp.Diff(got, must(s.GetServer(ctx(t), "p", "files"))(t), jsonEqual); diff != "" {
		t.Errorf("GetServer after rename (-want +got):\n%s", diff)
	}
	_, err := s.GetServer(ctx(t), "p", "fs")
	wantErr(t, err, switchboard.ErrNotFound, "GetServer by the old name")
	if diff := cmp.Diff(other, must(s.GetServer(ctx(t), "q", "fs"))(t), jsonEqual); diff != "" {
		t.Errorf("the other project's server changed (-want +got):\n%s", diff)
	}

	check(t, s.DeleteServer(ctx(t), "p", "files"))
	_, err = s.GetServer(ctx(t), "p", "files")
	wantErr(t, err, switchboard.ErrNotFound, "GetServer deleted")
	wantErr(t, s.DeleteServer(ctx(t), "p", "files"), switchboard.ErrNotFound, "DeleteServer twice")
	if n := len(must(s.ListServers(ctx(t), "p"))(t)); n != 2 {
		t.Errorf("after delete: %d servers, want 2", n)
	}
	must(s.GetServer(ctx(t), "q", "fs"))(t)
}

func testServerErrors(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	fs := must(s.CreateServer(ctx(t), server("p", "fs")))(t)
	git := must(s.CreateServer(ctx(t), server("p", "git")))(t)

	_, err := s.CreateServer(ctx(t), server("p", "fs"))
	wantErr(t, err, switchboard.ErrConflict, "CreateServer with a taken name")
	_, err = s.CreateServer(ctx(t), server("nope", "fs"))
	wantErr(t, err, switchboard.ErrNotFound, "CreateServer in an unknown project")
	for name, mutate := range map[string]func(*switchboard.ServerRecord){
		"no name":           func(r *switchboard.ServerRecord) { r.Name = "" },
		"no project":        func(r *switchboard.ServerRecord) { r.ProjectID = "" },
		"unknown transport": func(r *switchboard.ServerRecord) { r.Transport = "carrier-pigeon" },
		"db spelling":       func(r *switchboard.ServerRecord) { r.Transport = "streamable_http" },
		"config not JSON":   func(r *switchboard.ServerRecord) { r.Config = json.RawMessage(`{"command":`) },
		"config an array":   func(r *switchboard.ServerRecord) { r.Config = json.RawMessage(`["npx"]`) },
		"config null":       func(r *switchboard.ServerRecord) { r.Config = json.RawMessage(`null`) },
		"config with NUL":   func(r *switchboard.ServerRecord) { r.Config = json.RawMessage(`{"args":["a\u0000b"]}`) },
		"config latin-1":    func(r *switchboard.ServerRecord) { r.Config = json.RawMessage("{\"cwd\":\"/caf\xe9\"}") },
		"name with NUL":     func(r *switchboard.ServerRecord) { r.Name = "a\x00b" },
	} {
		r := server("p", "new")
		mutate(&r)
		_, err := s.CreateServer(ctx(t), r)
		wantErr(t, err, switchboard.ErrInvalid, "CreateServer with "+name)
		u := fs
		mutate(&u)
		_, err = s.UpdateServer(ctx(t), u)
		wantErr(t, err, switchboard.ErrInvalid, "UpdateServer with "+name)
	}

	_, err = s.GetServer(ctx(t), "p", "nope")
	wantErr(t, err, switchboard.ErrNotFound, "GetServer unknown")
	_, err = s.GetServer(ctx(t), "nope", "fs")
	wantErr(t, err, switchboard.ErrNotFound, "GetServer in an unknown project")
	_, err = s.ListServers(ctx(t), "nope")
	wantErr(t, err, switchboard.ErrNotFound, "ListServers of an unknown project")
	wantErr(t, s.DeleteServer(ctx(t), "p", "nope"), switchboard.ErrNotFound, "DeleteServer unknown")

	renamed := git
	renamed.Name = "fs"
	_, err = s.UpdateServer(ctx(t), renamed)
	wantErr(t, err, switchboard.ErrConflict, "UpdateServer onto a taken name")
	for what, id := range map[string]string{
		"unknown ID":   "00000000-0000-4000-8000-000000000000",
		"malformed ID": "not-an-id",
		"empty ID":     "",
	} {
		u := fs
		u.ID = id
		_, err = s.UpdateServer(ctx(t), u)
		wantErr(t, err, switchboard.ErrNotFound, "UpdateServer with "+what)
	}
	createProject(t, s, "q")
	moved := fs
	moved.ProjectID = "q"
	_, err = s.UpdateServer(ctx(t), moved)
	wantErr(t, err, switchboard.ErrNotFound, "UpdateServer with another project's ID")

	// Failed writes changed nothing.
	if diff := cmp.Diff([]switchboard.ServerRecord{fs, git}, must(s.ListServers(ctx(t), "p"))(t), jsonEqual); diff != "" {
		t.Errorf("servers after failed writes (-want +got):\n%s", diff)
	}
}

func manifest(names ...string) []switchboard.ServerRecord {
	var out []switchboard.ServerRecord
	for _, n := range names {
		out = append(out, server("", n))
	}
	return out
}

func testImportManifest(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	createProject(t, s, "q")
	hand := must(s.CreateServer(ctx(t), server("p", "hand")))(t)
	otherProduct := must(s.ImportManifest(ctx(t), "p", "billing", manifest("invoices")))(t)
	otherProject := must(s.ImportManifest(ctx(t), "q", "crm", manifest("contacts")))(t)

	first := must(s.ImportManifest(ctx(t), "p", "crm", manifest("deals", "contacts")))(t)
	want := manifest("contacts", "deals")
	for i := range want {
		want[i].ProjectID, want[i].ProductID = "p", "crm"
	}
	if diff := cmp.Diff(want, first, assigned, jsonEqual); diff != "" {
		t.Errorf("first import: rows ordered by name (-want +got):\n%s", diff)
	}
	for _, r := range first {
		if r.ID == "" || r.CreatedAt.IsZero() {
			t.Errorf("imported row without ID or CreatedAt: %+v", r)
		}
	}
	if diff := cmp.Diff(first[1], must(s.GetServer(ctx(t), "p", "deals"))(t), jsonEqual); diff != "" {
		t.Errorf("GetServer of an imported row (-want +got):\n%s", diff)
	}

	// Re-importing the same manifest, even respaced and reordered, changes
	// nothing at all.
	again := manifest("contacts", "deals")
	again[0].Config = json.RawMessage(`{ "env":{"TOKEN":"${TOKEN}"},"args":["-y","@mcp/contacts"],"command":"npx" }`)
	again[0].ProjectID, again[0].ProductID = "ignored", "ignored"
	second := must(s.ImportManifest(ctx(t), "p", "crm", again))(t)
	if diff := cmp.Diff(first, second, jsonEqual); diff != "" {
		t.Errorf("re-import changed rows (-want +got):\n%s", diff)
	}

	// Change one, drop one, add one.
	next := manifest("contacts", "leads")
	next[0].Enabled = false
	next[0].Description = "now disabled"
	third := must(s.ImportManifest(ctx(t), "p", "crm", next))(t)
	if len(third) != 2 || third[0].Name != "contacts" || third[1].Name != "leads" {
		t.Fatalf("third import = %+v, want contacts and leads", third)
	}
	if c := third[0]; c.ID != first[0].ID || !c.CreatedAt.Equal(first[0].CreatedAt) || c.Enabled || c.Description != "now disabled" {
		t.Errorf("updated row = %+v, want the same ID and CreatedAt as %+v, disabled, new description", c, first[0])
	}
	if third[0].UpdatedAt.Before(first[0].UpdatedAt) {
		t.Errorf("UpdatedAt went back on update")
	}
	_, err := s.GetServer(ctx(t), "p", "deals")
	wantErr(t, err, switchboard.ErrNotFound, "server dropped from the manifest")

	// Rows of other owners are untouched.
	if diff := cmp.Diff(hand, must(s.GetServer(ctx(t), "p", "hand"))(t), jsonEqual); diff != "" {
		t.Errorf("hand-made server changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(otherProduct[0], must(s.GetServer(ctx(t), "p", "invoices"))(t), jsonEqual); diff != "" {
		t.Errorf("other product's server changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(otherProject, must(s.ListServers(ctx(t), "q"))(t), jsonEqual); diff != "" {
		t.Errorf("other project's servers changed (-want +got):\n%s", diff)
	}

	// An empty manifest removes the product's rows, and only those.
	if got := must(s.ImportManifest(ctx(t), "p", "crm", nil))(t); len(got) != 0 {
		t.Errorf("empty import returned %v", got)
	}
	var names []string
	for _, r := range must(s.ListServers(ctx(t), "p"))(t) {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"hand", "invoices"}, names); diff != "" {
		t.Errorf("servers after an empty import (-want +got):\n%s", diff)
	}
}

func testImportManifestErrors(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	must(s.CreateServer(ctx(t), server("p", "hand")))(t)
	must(s.ImportManifest(ctx(t), "p", "billing", manifest("invoices")))(t)
	before := must(s.ImportManifest(ctx(t), "p", "crm", manifest("contacts", "deals")))(t)
	all := must(s.ListServers(ctx(t), "p"))(t)

	// Each of these fails as a whole, even when the bad record comes last.
	_, err := s.ImportManifest(ctx(t), "p", "crm", manifest("contacts", "leads", "hand"))
	wantErr(t, err, switchboard.ErrConflict, "import over a hand-made server")
	_, err = s.ImportManifest(ctx(t), "p", "crm", manifest("leads", "invoices"))
	wantErr(t, err, switchboard.ErrConflict, "import over another product's server")
	_, err = s.ImportManifest(ctx(t), "p", "crm", manifest("leads", "leads"))
	wantErr(t, err, switchboard.ErrInvalid, "import with a name twice")
	bad := manifest("leads", "broken")
	bad[1].Transport = "pigeon"
	_, err = s.ImportManifest(ctx(t), "p", "crm", bad)
	wantErr(t, err, switchboard.ErrInvalid, "import with an invalid record")
	_, err = s.ImportManifest(ctx(t), "p", "", manifest("leads"))
	wantErr(t, err, switchboard.ErrInvalid, "import without product")
	_, err = s.ImportManifest(ctx(t), "nope", "crm", manifest("leads"))
	wantErr(t, err, switchboard.ErrNotFound, "import into an unknown project")

	if diff := cmp.Diff(all, must(s.ListServers(ctx(t), "p"))(t), jsonEqual); diff != "" {
		t.Errorf("failed imports changed servers (-want +got):\n%s", diff)
	}
	if got := must(s.ImportManifest(ctx(t), "p", "crm", manifest("contacts", "deals")))(t); !cmp.Equal(before, got, jsonEqual) {
		t.Errorf("import after failures = %v, want %v", got, before)
	}
}

func testWorkspaces(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	createProject(t, s, "q")
	before := time.Now()
	used := time.Date(2026, 3, 4, 5, 6, 7, 891234567, time.FixedZone("CET", 3600))

	hosted := switchboard.Workspace{
		ProjectID: "p", ContainerType: switchboard.ContainerMCPServer, Image: "ghcr.io/acme/mcp-fs:1",
		Config: json.RawMessage(`{"port": 8000, "env": {"A": "b"}}`), Status: "running", Provider: "docker",
		ContainerID: "c0ffee", LastUsedAt: used,
	}
	w1 := must(s.CreateWorkspace(ctx(t), hosted))(t)
	checkTime(t, "CreatedAt", w1.CreatedAt, before)
	hosted.LastUsedAt = used.UTC().Truncate(time.Microsecond)
	if diff := cmp.Diff(hosted, w1, assigned, jsonEqual); diff != "" {
		t.Errorf("CreateWorkspace (-want +got):\n%s", diff)
	}
	sandbox := switchboard.Workspace{ProjectID: "p", ContainerType: switchboard.ContainerWorkspace, Status: "pending", Provider: "docker", AgentSessionID: "sess-1"}
	w2 := must(s.CreateWorkspace(ctx(t), sandbox))(t)
	sandbox.Config = json.RawMessage(`{}`)
	if diff := cmp.Diff(sandbox, w2, assigned, jsonEqual); diff != "" {
		t.Errorf("CreateWorkspace with zero LastUsedAt and nil config (-want +got):\n%s", diff)
	}
	w3 := must(s.CreateWorkspace(ctx(t), switchboard.Workspace{ProjectID: "q", ContainerType: switchboard.ContainerWorkspace, Status: "running", Provider: "gvisor"}))(t)
	if diff := cmp.Diff(w1, must(s.GetWorkspace(ctx(t), w1.ID))(t), jsonEqual); diff != "" {
		t.Errorf("GetWorkspace (-want +got):\n%s", diff)
	}

	for name, tc := range map[string]struct {
		f    switchboard.WorkspaceFilter
		want []switchboard.Workspace
	}{
		"all":          {switchboard.WorkspaceFilter{}, []switchboard.Workspace{w1, w2, w3}},
		"project":      {switchboard.WorkspaceFilter{ProjectID: "p"}, []switchboard.Workspace{w1, w2}},
		"type":         {switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerWorkspace}, []switchboard.Workspace{w2, w3}},
		"status":       {switchboard.WorkspaceFilter{Status: "running"}, []switchboard.Workspace{w1, w3}},
		"provider":     {switchboard.WorkspaceFilter{Provider: "docker", ProjectID: "p", Status: "pending"}, []switchboard.Workspace{w2}},
		"session":      {switchboard.WorkspaceFilter{AgentSessionID: "sess-1"}, []switchboard.Workspace{w2}},
		"no match":     {switchboard.WorkspaceFilter{ProjectID: "q", Provider: "docker"}, nil},
		"unknown proj": {switchboard.WorkspaceFilter{ProjectID: "nope"}, nil},
	} {
		got := must(s.ListWorkspaces(ctx(t), tc.f))(t)
		if diff := cmp.Diff(tc.want, got, jsonEqual, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListWorkspaces %s: oldest first (-want +got):\n%s", name, diff)
		}
	}

	upd := w2
	upd.Status, upd.ContainerID, upd.Image = "running", "beef", "sandbox:2"
	upd.Config = json.RawMessage(`{"cpus": 1}`)
	upd.LastUsedAt = time.Now().UTC().Truncate(time.Microsecond)
	upd.AgentSessionID = ""
	got := must(s.UpdateWorkspace(ctx(t), upd))(t)
	if diff := cmp.Diff(upd, got, jsonEqual, cmpopts.IgnoreFields(switchboard.Workspace{}, "UpdatedAt")); diff != "" {
		t.Errorf("UpdateWorkspace (-want +got):\n%s", diff)
	}
	if got.UpdatedAt.Before(w2.UpdatedAt) {
		t.Errorf("UpdatedAt went back")
	}
	upd.LastUsedAt = time.Time{}
	if got := must(s.UpdateWorkspace(ctx(t), upd))(t); !got.LastUsedAt.IsZero() {
		t.Errorf("LastUsedAt reset to zero came back as %v", got.LastUsedAt)
	}

	_, err := s.CreateWorkspace(ctx(t), switchboard.Workspace{ProjectID: "nope", ContainerType: switchboard.ContainerWorkspace})
	wantErr(t, err, switchboard.ErrNotFound, "CreateWorkspace in an unknown project")
	_, err = s.CreateWorkspace(ctx(t), switchboard.Workspace{ProjectID: "p", ContainerType: "vm"})
	wantErr(t, err, switchboard.ErrInvalid, "CreateWorkspace of an unknown type")
	_, err = s.CreateWorkspace(ctx(t), switchboard.Workspace{ProjectID: "p", ContainerType: switchboard.ContainerWorkspace, Config: json.RawMessage(`[]`)})
	wantErr(t, err, switchboard.ErrInvalid, "CreateWorkspace with a non-object config")
	bad := w1
	bad.ContainerType = ""
	_, err = s.UpdateWorkspace(ctx(t), bad)
	wantErr(t, err, switchboard.ErrInvalid, "UpdateWorkspace without type")
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "nope", ""} {
		_, err = s.GetWorkspace(ctx(t), id)
		wantErr(t, err, switchboard.ErrNotFound, "GetWorkspace "+id)
		u := w1
		u.ID = id
		_, err = s.UpdateWorkspace(ctx(t), u)
		wantErr(t, err, switchboard.ErrNotFound, "UpdateWorkspace "+id)
		wantErr(t, s.DeleteWorkspace(ctx(t), id), switchboard.ErrNotFound, "DeleteWorkspace "+id)
	}
	moved := w1
	moved.ProjectID = "q"
	_, err = s.UpdateWorkspace(ctx(t), moved)
	wantErr(t, err, switchboard.ErrNotFound, "UpdateWorkspace with another project's ID")

	check(t, s.DeleteWorkspace(ctx(t), w1.ID))
	_, err = s.GetWorkspace(ctx(t), w1.ID)
	wantErr(t, err, switchboard.ErrNotFound, "GetWorkspace deleted")
	wantErr(t, s.DeleteWorkspace(ctx(t), w1.ID), switchboard.ErrNotFound, "DeleteWorkspace twice")
	if n := len(must(s.ListWorkspaces(ctx(t), switchboard.WorkspaceFilter{}))(t)); n != 2 {
		t.Errorf("%d workspaces after delete, want 2", n)
	}
}

func call(project, server, tool string, at time.Time) switchboard.ToolCallRecord {
	return switchboard.ToolCallRecord{
		ProjectID: project, Session: "sess", Server: server, Tool: tool,
		Arguments: json.RawMessage(`{"path": "/tmp/x", "token": "[REDACTED]"}`),
		Outcome:   switchboard.OutcomeOK, Duration: 1500 * time.Microsecond, StartedAt: at,
	}
}

// listAll pages through every record matching f, limit records a page.
func listAll(t *testing.T, s switchboard.Store, f switchboard.ToolCallFilter) []switchboard.ToolCallRecord {
	t.Helper()
	var out []switchboard.ToolCallRecord
	for pages := 0; ; pages++ {
		page := must(s.ListToolCalls(ctx(t), f))(t)
		if f.Limit > 0 && len(page.Calls) > f.Limit {
			t.Fatalf("page of %d records, limit %d", len(page.Calls), f.Limit)
		}
		out = append(out, page.Calls...)
		if page.Next == "" {
			return out
		}
		if len(page.Calls) == 0 || pages > 10000 {
			t.Fatalf("page %d: empty page or endless paging, next %q", pages, page.Next)
		}
		f.Cursor = page.Next
	}
}

func testToolCallsFilters(t *testing.T, s switchboard.Store) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 678901234, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	fail := call("p", "git", "push", at(3))
	fail.Outcome, fail.Code, fail.Duration = switchboard.OutcomeError, -32603, 30*time.Second
	fail.Arguments = nil
	fail.Principal, fail.PrincipalName = "https://id.example.com alice", "alice@example.com" // a person's call
	batch := []switchboard.ToolCallRecord{
		call("p", "fs", "read", at(0)),
		call("p", "fs", "write", at(1)),
		call("q", "fs", "read", at(2)), // the project need not exist
		fail,
		{ProjectID: "p", Session: "other", Server: "", Tool: "nope", Outcome: switchboard.OutcomeError, Code: -32601, StartedAt: at(4)},
		{ProjectID: "p", Server: "fs", Tool: "read", Outcome: switchboard.OutcomeToolError, Arguments: json.RawMessage(`{"big":12345678901234567890,"s":"é\u0000"}`), StartedAt: at(5)},
	}
	check(t, s.InsertToolCalls(ctx(t), batch))

	// What comes back: newest first, everything as given (times truncated
	// to microseconds, nil arguments as {}), IDs assigned and distinct.
	want := slices.Clone(batch)
	slices.Reverse(want)
	for i := range want {
		want[i].StartedAt = want[i].StartedAt.Truncate(time.Microsecond)
		if want[i].Arguments == nil {
			want[i].Arguments = json.RawMessage(`{}`)
		}
	}
	all := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{}))(t)
	if diff := cmp.Diff(want, all.Calls, assigned, jsonEqual); diff != "" {
		t.Errorf("ListToolCalls (-want +got):\n%s", diff)
	}
	if all.Next != "" {
		t.Errorf("single page has Next %q", all.Next)
	}
	ids := map[int64]bool{}
	for _, c := range all.Calls {
		if c.ID == 0 || ids[c.ID] {
			t.Errorf("missing or repeated ID %d", c.ID)
		}
		ids[c.ID] = true
	}
	pick := func(idx ...int) []switchboard.ToolCallRecord { // by index in batch, newest first
		var out []switchboard.ToolCallRecord
		for i := len(batch) - 1; i >= 0; i-- {
			if slices.Contains(idx, i) {
				out = append(out, all.Calls[len(batch)-1-i])
			}
		}
		return out
	}
	for name, tc := range map[string]struct {
		f    switchboard.ToolCallFilter
		want []switchboard.ToolCallRecord
	}{
		"project":        {switchboard.ToolCallFilter{ProjectID: "q"}, pick(2)},
		"server":         {switchboard.ToolCallFilter{ProjectID: "p", Server: "fs"}, pick(0, 1, 5)},
		"tool":           {switchboard.ToolCallFilter{Tool: "read"}, pick(0, 2, 5)},
		"outcome":        {switchboard.ToolCallFilter{Outcome: switchboard.OutcomeError}, pick(3, 4)},
		"tool error":     {switchboard.ToolCallFilter{ProjectID: "p", Outcome: switchboard.OutcomeToolError}, pick(5)},
		"since":          {switchboard.ToolCallFilter{Since: at(4)}, pick(4, 5)},
		"until":          {switchboard.ToolCallFilter{Until: at(1)}, pick(0)},
		"since until":    {switchboard.ToolCallFilter{Since: at(1), Until: at(4)}, pick(1, 2, 3)},
		"sub-µs since":   {switchboard.ToolCallFilter{Since: at(5).Add(-100 * time.Nanosecond)}, pick(5)},
		"everything":     {switchboard.ToolCallFilter{ProjectID: "p", Server: "fs", Tool: "read", Outcome: switchboard.OutcomeOK, Since: at(0), Until: at(1)}, pick(0)},
		"no match":       {switchboard.ToolCallFilter{ProjectID: "p", Server: "git", Outcome: switchboard.OutcomeOK}, nil},
		"unknown server": {switchboard.ToolCallFilter{Server: "nope"}, nil},
	} {
		got := must(s.ListToolCalls(ctx(t), tc.f))(t)
		if diff := cmp.Diff(tc.want, got.Calls, jsonEqual, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ListToolCalls %s (-want +got):\n%s", name, diff)
		}
		if paged := listAll(t, s, withLimit(tc.f, 1)); !cmp.Equal(tc.want, paged, jsonEqual, cmpopts.EquateEmpty()) {
			t.Errorf("ListToolCalls %s one record a page = %v, want %v", name, paged, tc.want)
		}
	}
}

func withLimit(f switchboard.ToolCallFilter, n int) switchboard.ToolCallFilter {
	f.Limit = n
	return f
}

// testToolCallsKind: a prompt get and a resource read are logged like
// calls and come back with their kind; a tool call has none.
func testToolCallsKind(t *testing.T, s switchboard.Store) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	batch := []switchboard.ToolCallRecord{
		call("kinds", "fs", "read", base),
		{ProjectID: "kinds", Server: "fs", Tool: "greet", Kind: switchboard.KindPrompt, Outcome: switchboard.OutcomeOK, StartedAt: base.Add(time.Second)},
		{ProjectID: "kinds", Server: "fs", Tool: "file:///a", Kind: switchboard.KindResource, Outcome: switchboard.OutcomeError, Code: -32002, StartedAt: base.Add(2 * time.Second)},
	}
	check(t, s.InsertToolCalls(ctx(t), batch))
	page := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{ProjectID: "kinds"}))(t)
	var got []string
	for _, c := range page.Calls {
		got = append(got, c.Tool+":"+c.Kind)
	}
	if diff := cmp.Diff([]string{"file:///a:resource", "greet:prompt", "read:"}, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	bad := call("kinds", "fs", "x", base)
	bad.Kind = "template"
	if err := s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{bad}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("unknown kind: %v, want ErrInvalid", err)
	}
}

func testToolCallsPaging(t *testing.T, s switchboard.Store) {
	// 130 calls in 13 batches, ten sharing each start time so the ID
	// breaks ties, inserted out of time order.
	base := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for b := 12; b >= 0; b-- {
		var batch []switchboard.ToolCallRecord
		for i := range 10 {
			c := call("p", "fs", fmt.Sprintf("t%d", i), base.Add(time.Duration(b)*time.Millisecond))
			c.Session = fmt.Sprint(b*10 + i)
			batch = append(batch, c)
		}
		check(t, s.InsertToolCalls(ctx(t), batch))
	}
	sorted := func(calls []switchboard.ToolCallRecord) bool {
		return slices.IsSortedFunc(calls, func(a, b switchboard.ToolCallRecord) int {
			if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
				return c
			}
			return int(b.ID - a.ID)
		})
	}

	whole := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{Limit: 500}))(t).Calls
	if len(whole) != 130 || !sorted(whole) {
		t.Fatalf("got %d calls, sorted %v; want 130 newest first, ID breaking ties", len(whole), sorted(whole))
	}
	for _, limit := range []int{1, 7, 10, 129, 130, 131} {
		got := listAll(t, s, switchboard.ToolCallFilter{ProjectID: "p", Limit: limit})
		if diff := cmp.Diff(whole, got, jsonEqual); diff != "" {
			t.Errorf("paging by %d differs from one page (-want +got):\n%s", limit, diff)
		}
	}
	// The last full page has no Next.
	if p := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{Limit: 130}))(t); p.Next != "" || len(p.Calls) != 130 {
		t.Errorf("exact page: %d calls, Next %q; want 130 and none", len(p.Calls), p.Next)
	}

	// Default and maximum page sizes.
	if p := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{}))(t); len(p.Calls) != switchboard.DefaultToolCallLimit || p.Next == "" {
		t.Errorf("default page: %d calls, Next %q; want %d and a cursor", len(p.Calls), p.Next, switchboard.DefaultToolCallLimit)
	}
	if p := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{Limit: -5}))(t); len(p.Calls) != switchboard.DefaultToolCallLimit {
		t.Errorf("negative limit: %d calls, want the default %d", len(p.Calls), switchboard.DefaultToolCallLimit)
	}
	var big []switchboard.ToolCallRecord
	for i := range switchboard.MaxToolCallLimit {
		big = append(big, call("big", "fs", "read", base.Add(time.Duration(i)*time.Microsecond)))
	}
	check(t, s.InsertToolCalls(ctx(t), big))
	if p := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{Limit: switchboard.MaxToolCallLimit + 500}))(t); len(p.Calls) != switchboard.MaxToolCallLimit || p.Next == "" {
		t.Errorf("limit above the maximum: %d calls, Next %q; want %d and a cursor", len(p.Calls), p.Next, switchboard.MaxToolCallLimit)
	}

	// Records inserted while paging: newer ones stay off the later pages,
	// older ones show up on them; nothing repeats.
	first := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{ProjectID: "p", Limit: 20}))(t)
	late := call("p", "fs", "late", base.Add(time.Hour))
	early := call("p", "fs", "early", base.Add(-time.Hour))
	check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{late, early}))
	rest := listAll(t, s, switchboard.ToolCallFilter{ProjectID: "p", Limit: 20, Cursor: first.Next})
	got := append(slices.Clone(first.Calls), rest...)
	if len(got) != 131 || got[130].Tool != "early" || !sorted(got) {
		t.Errorf("paging across inserts: %d calls, want the 130 then the early one, sorted", len(got))
	}
}

func testToolCallsErrors(t *testing.T, s switchboard.Store) {
	now := time.Now()
	for name, mutate := range map[string]func(*switchboard.ToolCallRecord){
		"no project":        func(c *switchboard.ToolCallRecord) { c.ProjectID = "" },
		"no start":          func(c *switchboard.ToolCallRecord) { c.StartedAt = time.Time{} },
		"unknown outcome":   func(c *switchboard.ToolCallRecord) { c.Outcome = "meh" },
		"negative duration": func(c *switchboard.ToolCallRecord) { c.Duration = -time.Second },
		"arguments garbage": func(c *switchboard.ToolCallRecord) { c.Arguments = json.RawMessage(`{"a":`) },
		"arguments latin-1": func(c *switchboard.ToolCallRecord) { c.Arguments = json.RawMessage("{\"a\":\"caf\xe9\"}") },
		"tool with NUL":     func(c *switchboard.ToolCallRecord) { c.Tool = "read\x00" },
		"record id too long": func(c *switchboard.ToolCallRecord) {
			c.RecordID = strings.Repeat("a", switchboard.MaxRecordIDLen+1)
		},
		"record id with NUL": func(c *switchboard.ToolCallRecord) { c.RecordID = "r\x00" },
	} {
		bad := call("p", "fs", "read", now)
		mutate(&bad)
		err := s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{call("p", "fs", "read", now), bad})
		wantErr(t, err, switchboard.ErrInvalid, "InsertToolCalls with "+name)
	}
	if got := must(s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{}))(t); len(got.Calls) != 0 {
		t.Errorf("failed batches stored %d records, want none", len(got.Calls))
	}
	check(t, s.InsertToolCalls(ctx(t), nil))
	check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{call("p", "fs", "read", now), call("p", "fs", "read", now)}))
	for _, cursor := range []string{"garbage", "!!!!", "AAAA"} {
		_, err := s.ListToolCalls(ctx(t), switchboard.ToolCallFilter{Cursor: cursor})
		wantErr(t, err, switchboard.ErrInvalid, "ListToolCalls with cursor "+cursor)
	}
}

func testToolCallsConcurrent(t *testing.T, s switchboard.Store) {
	const writers, batches, size = 8, 10, 25
	base := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var batch []switchboard.ToolCallRecord
				for i := range size {
					c := call("p", fmt.Sprint("w", w), "t", base.Add(time.Duration(i)*time.Millisecond))
					c.Session = fmt.Sprintf("%d/%d/%d", w, b, i)
					batch = append(batch, c)
				}
				errs <- s.InsertToolCalls(t.Context(), batch)
			}
		})
	}
	// Reads run alongside the writers and see whole batches only.
	wg.Go(func() {
		for range 20 {
			p, err := s.ListToolCalls(t.Context(), switchboard.ToolCallFilter{ProjectID: "p", Server: "w0", Limit: switchboard.MaxToolCallLimit})
			if err != nil {
				errs <- err
				return
			}
			if len(p.Calls)%size != 0 {
				errs <- fmt.Errorf("a reader saw %d records of writer 0: a partial batch", len(p.Calls))
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	got := listAll(t, s, switchboard.ToolCallFilter{ProjectID: "p", Limit: 333})
	sessions := map[string]bool{}
	ids := map[int64]bool{}
	for _, c := range got {
		sessions[c.Session], ids[c.ID] = true, true
	}
	if len(got) != writers*batches*size || len(sessions) != len(got) || len(ids) != len(got) {
		t.Errorf("after concurrent inserts: %d records, %d distinct sessions, %d distinct IDs; want %d of each",
			len(got), len(sessions), len(ids), writers*batches*size)
	}
}

// testToolCallsReplay: the call log replays its crash spool, which may
// hold records already stored; a RecordID is stored once however often
// it comes, while records without one are all kept.
func testToolCallsReplay(t *testing.T, s switchboard.Store) {
	base := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var batch []switchboard.ToolCallRecord
	for i := range 5 {
		c := call("p", "fs", fmt.Sprint("t", i), base.Add(time.Duration(i)*time.Second))
		c.RecordID = fmt.Sprintf("%032x", i)
		batch = append(batch, c)
	}
	check(t, s.InsertToolCalls(ctx(t), batch))
	check(t, s.InsertToolCalls(ctx(t), batch))
	// A batch overlapping the stored records, with a repeat of its own.
	extra := call("p", "fs", "t5", base.Add(5*time.Second))
	extra.RecordID = fmt.Sprintf("%032x", 5)
	check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{batch[4], extra, batch[0], extra}))
	anon := call("p", "fs", "anon", base.Add(6*time.Second))
	check(t, s.InsertToolCalls(ctx(t), []switchboard.ToolCallRecord{anon, anon}))

	want := []switchboard.ToolCallRecord{anon, anon, extra}
	for i := range slices.Backward(batch) {
		want = append(want, batch[i])
	}
	got := listAll(t, s, switchboard.ToolCallFilter{ProjectID: "p"})
	if diff := cmp.Diff(want, got, assigned, jsonEqual); diff != "" {
		t.Errorf("after replays (-want +got):\n%s", diff)
	}
}

func testSecrets(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	createProject(t, s, "q")
	before := time.Now()
	blob := []byte{0, 1, 2, 0xff, 0xfe, 0, 'x'}
	b := must(s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "p", Name: "B_TOKEN", Ciphertext: blob}))(t)
	checkTime(t, "CreatedAt", b.CreatedAt, before)
	if diff := cmp.Diff(switchboard.Secret{ProjectID: "p", Name: "B_TOKEN", Ciphertext: blob}, b, assigned); diff != "" {
		t.Errorf("PutSecret (-want +got):\n%s", diff)
	}
	a := must(s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "p", Name: "A_KEY", Ciphertext: []byte("a")}))(t)
	qa := must(s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "q", Name: "A_KEY", Ciphertext: []byte("qa")}))(t)
	if diff := cmp.Diff(b, must(s.GetSecret(ctx(t), "p", "B_TOKEN"))(t)); diff != "" {
		t.Errorf("GetSecret (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]switchboard.Secret{a, b}, must(s.ListSecrets(ctx(t), "p"))(t)); diff != "" {
		t.Errorf("ListSecrets: ordered by name (-want +got):\n%s", diff)
	}

	// Overwrite: new value, same CreatedAt, no second row.
	a2 := must(s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "p", Name: "A_KEY", Ciphertext: []byte("a2")}))(t)
	if string(a2.Ciphertext) != "a2" || !a2.CreatedAt.Equal(a.CreatedAt) || a2.UpdatedAt.Before(a.UpdatedAt) {
		t.Errorf("overwrite = %+v, want value a2, CreatedAt of %+v", a2, a)
	}
	if diff := cmp.Diff([]switchboard.Secret{a2, b}, must(s.ListSecrets(ctx(t), "p"))(t)); diff != "" {
		t.Errorf("ListSecrets after overwrite (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(qa, must(s.GetSecret(ctx(t), "q", "A_KEY"))(t)); diff != "" {
		t.Errorf("other project's secret changed (-want +got):\n%s", diff)
	}

	_, err := s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "nope", Name: "A", Ciphertext: []byte("x")})
	wantErr(t, err, switchboard.ErrNotFound, "PutSecret in an unknown project")
	_, err = s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "p", Name: "", Ciphertext: []byte("x")})
	wantErr(t, err, switchboard.ErrInvalid, "PutSecret without name")
	_, err = s.PutSecret(ctx(t), switchboard.Secret{ProjectID: "p", Name: "A_KEY"})
	wantErr(t, err, switchboard.ErrInvalid, "PutSecret without value")
	_, err = s.GetSecret(ctx(t), "p", "NOPE")
	wantErr(t, err, switchboard.ErrNotFound, "GetSecret unknown")
	_, err = s.ListSecrets(ctx(t), "nope")
	wantErr(t, err, switchboard.ErrNotFound, "ListSecrets of an unknown project")

	check(t, s.DeleteSecret(ctx(t), "p", "A_KEY"))
	_, err = s.GetSecret(ctx(t), "p", "A_KEY")
	wantErr(t, err, switchboard.ErrNotFound, "GetSecret deleted")
	wantErr(t, s.DeleteSecret(ctx(t), "p", "A_KEY"), switchboard.ErrNotFound, "DeleteSecret twice")
	must(s.GetSecret(ctx(t), "q", "A_KEY"))(t)
	check(t, s.DeleteSecret(ctx(t), "p", "B_TOKEN"))
	if got, err := s.ListSecrets(ctx(t), "p"); err != nil || len(got) != 0 {
		t.Errorf("ListSecrets of a project without secrets = %v, %v; want none, no error", got, err)
	}
}

func testTokens(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	createProject(t, s, "q")
	before := time.Now()
	ci := must(s.CreateToken(ctx(t), switchboard.Token{ProjectID: "p", Name: "ci", Hash: []byte("hash-ci\x00")}))(t)
	checkTime(t, "CreatedAt", ci.CreatedAt, before)
	if ci.ID == "" || !ci.RevokedAt.IsZero() {
		t.Errorf("new token %+v: want an ID and no RevokedAt", ci)
	}
	if diff := cmp.Diff(switchboard.Token{ProjectID: "p", Name: "ci", Hash: []byte("hash-ci\x00")}, ci, assigned); diff != "" {
		t.Errorf("CreateToken (-want +got):\n%s", diff)
	}
	dev := must(s.CreateToken(ctx(t), switchboard.Token{ProjectID: "p", Name: "ci", Hash: []byte("hash-dev")}))(t) // names repeat
	qt := must(s.CreateToken(ctx(t), switchboard.Token{ProjectID: "q", Hash: []byte("hash-q")}))(t)

	if diff := cmp.Diff(ci, must(s.TokenByHash(ctx(t), []byte("hash-ci\x00")))(t)); diff != "" {
		t.Errorf("TokenByHash (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]switchboard.Token{ci, dev}, must(s.ListTokens(ctx(t), "p"))(t)); diff != "" {
		t.Errorf("ListTokens: oldest first (-want +got):\n%s", diff)
	}

	_, err := s.CreateToken(ctx(t), switchboard.Token{ProjectID: "q", Name: "copy", Hash: []byte("hash-ci\x00")})
	wantErr(t, err, switchboard.ErrConflict, "CreateToken with a stored hash")
	_, err = s.CreateToken(ctx(t), switchboard.Token{ProjectID: "nope", Hash: []byte("hash-x")})
	wantErr(t, err, switchboard.ErrNotFound, "CreateToken in an unknown project")
	_, err = s.CreateToken(ctx(t), switchboard.Token{ProjectID: "p", Name: "empty"})
	wantErr(t, err, switchboard.ErrInvalid, "CreateToken without hash")
	_, err = s.TokenByHash(ctx(t), []byte("hash-ci"))
	wantErr(t, err, switchboard.ErrNotFound, "TokenByHash of a prefix")
	_, err = s.ListTokens(ctx(t), "nope")
	wantErr(t, err, switchboard.ErrNotFound, "ListTokens of an unknown project")

	// Revocation: the token stops working and stays listed; revoking
	// again keeps the first time; only its own project can revoke it.
	_, err = s.RevokeToken(ctx(t), "q", ci.ID)
	wantErr(t, err, switchboard.ErrNotFound, "RevokeToken from another project")
	must(s.TokenByHash(ctx(t), []byte("hash-ci\x00")))(t)
	before = time.Now()
	rev := must(s.RevokeToken(ctx(t), "p", ci.ID))(t)
	checkTime(t, "RevokedAt", rev.RevokedAt, before)
	_, err = s.TokenByHash(ctx(t), []byte("hash-ci\x00"))
	wantErr(t, err, switchboard.ErrNotFound, "TokenByHash of a revoked token")
	again := must(s.RevokeToken(ctx(t), "p", ci.ID))(t)
	if !again.RevokedAt.Equal(rev.RevokedAt) {
		t.Errorf("second revocation moved RevokedAt from %v to %v", rev.RevokedAt, again.RevokedAt)
	}
	if diff := cmp.Diff([]switchboard.Token{rev, dev}, must(s.ListTokens(ctx(t), "p"))(t)); diff != "" {
		t.Errorf("ListTokens after revocation (-want +got):\n%s", diff)
	}
	must(s.TokenByHash(ctx(t), []byte("hash-dev")))(t)
	if diff := cmp.Diff(qt, must(s.TokenByHash(ctx(t), []byte("hash-q")))(t)); diff != "" {
		t.Errorf("other project's token (-want +got):\n%s", diff)
	}
	for _, id := range []string{"00000000-0000-4000-8000-000000000000", "nope", ""} {
		_, err = s.RevokeToken(ctx(t), "p", id)
		wantErr(t, err, switchboard.ErrNotFound, "RevokeToken "+id)
	}
}

func testCloseTwice(t *testing.T, s switchboard.Store) {
	createProject(t, s, "p")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, err := s.GetProject(ctx(t), "p")
	if err == nil {
		t.Error("GetProject on a closed store succeeded")
	}
}

// testLeases: a lease is taken, renewed only by its holder, refused to
// others until it expires or is released, and listed while unexpired.
func testLeases(t *testing.T, s switchboard.Store) {
	const ttl = time.Minute
	a := must(s.AcquireLease(ctx(t), "gateway/a", "a", ttl))(t)
	if a.Holder != "a" || a.Name != "gateway/a" || time.Until(a.ExpiresAt) <= ttl/2 || time.Until(a.ExpiresAt) > 2*ttl {
		t.Fatalf("AcquireLease = %+v, want holder a expiring in about %s", a, ttl)
	}
	renewed := must(s.AcquireLease(ctx(t), "gateway/a", "a", 2*ttl))(t)
	if !renewed.ExpiresAt.After(a.ExpiresAt) {
		t.Errorf("renewal kept expiry %s, want later than %s", renewed.ExpiresAt, a.ExpiresAt)
	}
	if _, err := s.AcquireLease(ctx(t), "gateway/a", "b", ttl); !errors.Is(err, switchboard.ErrConflict) {
		t.Fatalf("another holder's AcquireLease: err = %v, want ErrConflict", err)
	} else if !strings.Contains(switchboard.Message(err), "a") {
		t.Errorf("conflict message %q does not name the holder", switchboard.Message(err))
	}
	for _, bad := range []struct {
		name, holder string
		ttl          time.Duration
	}{{"", "a", ttl}, {"x", "", ttl}, {"x", "a", 0}, {"x\x00", "a", ttl}} {
		if _, err := s.AcquireLease(ctx(t), bad.name, bad.holder, bad.ttl); !errors.Is(err, switchboard.ErrInvalid) {
			t.Errorf("AcquireLease(%q, %q, %s): err = %v, want ErrInvalid", bad.name, bad.holder, bad.ttl, err)
		}
	}
	// An expired lease is listed no more and goes to whoever asks.
	must(s.AcquireLease(ctx(t), "gateway/c", "c", time.Millisecond))(t)
	must(s.AcquireLease(ctx(t), "other/x", "a", ttl))(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		list := must(s.ListLeases(ctx(t), "gateway/"))(t)
		names := []string{}
		for _, l := range list {
			names = append(names, l.Name)
		}
		if cmp.Equal([]string{"gateway/a"}, names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ListLeases(gateway/) = %v, want only gateway/a once gateway/c expired", names)
		}
		time.Sleep(time.Millisecond) // the 1 ms lease's own expiry, not a state
	}
	if l := must(s.AcquireLease(ctx(t), "gateway/c", "d", ttl))(t); l.Holder != "d" {
		t.Errorf("taking an expired lease: holder %q, want d", l.Holder)
	}
	// Release: only by the holder.
	must(0, s.ReleaseLease(ctx(t), "gateway/a", "b"))(t)
	if _, err := s.AcquireLease(ctx(t), "gateway/a", "b", ttl); !errors.Is(err, switchboard.ErrConflict) {
		t.Fatalf("a release by a non-holder freed the lease: err = %v", err)
	}
	must(0, s.ReleaseLease(ctx(t), "gateway/a", "a"))(t)
	if l := must(s.AcquireLease(ctx(t), "gateway/a", "b", ttl))(t); l.Holder != "b" {
		t.Errorf("after release: holder %q, want b", l.Holder)
	}
	if list := must(s.ListLeases(ctx(t), ""))(t); len(list) != 3 {
		t.Errorf("ListLeases(\"\") = %+v, want 3 leases", list)
	}
}

func testServerStates(t *testing.T, s switchboard.Store) {
	p := createProject(t, s, "states").ID
	at := time.Now().UTC().Truncate(time.Microsecond)
	put := func(st switchboard.ServerLastState) {
		t.Helper()
		if err := s.PutServerState(ctx(t), st); err != nil {
			t.Fatalf("PutServerState(%+v): %v", st, err)
		}
	}
	put(switchboard.ServerLastState{ProjectID: p, Server: "gh", State: switchboard.StateFailed, Error: "cannot connect: refused", At: at})
	put(switchboard.ServerLastState{ProjectID: p, Server: "fs", State: switchboard.StateReady, At: at})
	put(switchboard.ServerLastState{ProjectID: p, Server: "gh", State: switchboard.StateUnavailable, Error: "breaker open", At: at.Add(time.Second)})
	got := must(s.ServerStates(ctx(t), p))(t)
	want := []switchboard.ServerLastState{
		{ProjectID: p, Server: "fs", State: switchboard.StateReady, At: at},
		{ProjectID: p, Server: "gh", State: switchboard.StateUnavailable, Error: "breaker open", At: at.Add(time.Second)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServerStates (-want +got):\n%s", diff)
	}
	if err := s.PutServerState(ctx(t), switchboard.ServerLastState{ProjectID: "no-such-project", Server: "x", State: switchboard.StateFailed, At: at}); !errors.Is(err, switchboard.ErrNotFound) {
		t.Errorf("PutServerState for an unknown project: %v, want ErrNotFound", err)
	}
	if err := s.PutServerState(ctx(t), switchboard.ServerLastState{ProjectID: p, Server: "", State: switchboard.StateFailed, At: at}); !errors.Is(err, switchboard.ErrInvalid) {
		t.Errorf("PutServerState without a server: %v, want ErrInvalid", err)
	}
	if got := must(s.ServerStates(ctx(t), "no-such-project"))(t); len(got) != 0 {
		t.Errorf("ServerStates of an unknown project: %+v, want none", got)
	}
	if err := s.DeleteProject(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ServerStates(ctx(t), p))(t); len(got) != 0 {
		t.Errorf("ServerStates after the project was deleted: %+v, want none", got)
	}
}
