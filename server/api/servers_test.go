package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// plainSealer "seals" a secret as itself: these tests look at who may
// set a secret, not at encryption.
type plainSealer struct{}

func (plainSealer) Seal(_, _ string, b []byte) ([]byte, error) { return b, nil }

// adminAndTenant serves the API twice over one real SQLite store with the
// project "default": as the admin and as a project token.
func adminAndTenant(t *testing.T) (st *sqlite.Store, admin, tenant *API) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	mk := func(isAdmin bool) *API {
		return New(Options{Store: st, Projects: noProjects{}, Access: access{admin: isAdmin}, Secrets: plainSealer{}, MaxBodyBytes: 1 << 20})
	}
	return st, mk(true), mk(false)
}

func mustStatus(t *testing.T, a *API, method, path, body string, want int) []byte {
	t.Helper()
	w := send(a, method, path, body)
	if w.Code != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, w.Code, want, w.Body)
	}
	return w.Body.Bytes()
}

// headersOf reads a server's config headers as the API returns them.
func headersOf(t *testing.T, body []byte) map[string]string {
	t.Helper()
	var s struct {
		Config struct {
			Headers map[string]string `json:"headers"`
		} `json:"config"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s.Config.Headers
}

// TestMaskedCredentialKept: a project token reads an admin's literal
// credential as "[redacted]"; sending that entry back with another change
// (as the console's Edit form does) keeps the admin's value, while a value
// the token really changes is stored.
func TestMaskedCredentialKept(t *testing.T) {
	_, admin, tenant := adminAndTenant(t)
	const path = "/api/v1/projects/default/servers/r"
	mustStatus(t, admin, "POST", "/api/v1/projects/default/servers",
		`{"name":"r","config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer admin-literal-1","X-Api-Key":"k-literal-2","X-Trace":"on"}}}`, http.StatusCreated)

	seen := mustStatus(t, tenant, "GET", path, "", http.StatusOK)
	if diff := cmp.Diff(map[string]string{"Authorization": "[redacted]", "X-Api-Key": "[redacted]", "X-Trace": "on"}, headersOf(t, seen)); diff != "" {
		t.Fatalf("headers a project token reads (-want +got):\n%s", diff)
	}
	mustStatus(t, tenant, "PATCH", path,
		`{"config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"[redacted]","X-Api-Key":"[redacted]","X-Trace":"off"}}}`, http.StatusOK)
	got := headersOf(t, mustStatus(t, admin, "GET", path, "", http.StatusOK))
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer admin-literal-1", "X-Api-Key": "k-literal-2", "X-Trace": "off"}, got); diff != "" {
		t.Errorf("stored headers after a project token's edit (-want +got):\n%s", diff)
	}

	// A value the token does change is its to change.
	mustStatus(t, tenant, "PATCH", path,
		`{"config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${MINE}","X-Api-Key":"[redacted]"}}}`, http.StatusOK)
	got = headersOf(t, mustStatus(t, admin, "GET", path, "", http.StatusOK))
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer ${MINE}", "X-Api-Key": "k-literal-2"}, got); diff != "" {
		t.Errorf("stored headers after a real change (-want +got):\n%s", diff)
	}
}

// TestMaskedCredentialKeptByManifest: a project token that re-imports a
// product's manifest with the values it read masked keeps the admin's
// credentials, as its PATCH does.
func TestMaskedCredentialKeptByManifest(t *testing.T) {
	_, admin, tenant := adminAndTenant(t)
	const path = "/api/v1/projects/default/products/prod"
	mustStatus(t, admin, "PUT", path,
		`{"mcp":{"servers":{"r":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer admin-literal-3","X-Trace":"on"}}}}}`, http.StatusOK)
	seen := headersOf(t, mustStatus(t, tenant, "GET", "/api/v1/projects/default/servers/r", "", http.StatusOK))
	if seen["Authorization"] != "[redacted]" {
		t.Fatalf("a project token reads %q", seen["Authorization"])
	}
	mustStatus(t, tenant, "PUT", path,
		`{"mcp":{"servers":{"r":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"[redacted]","X-Trace":"off"}}}}}`, http.StatusOK)
	got := headersOf(t, mustStatus(t, admin, "GET", "/api/v1/projects/default/servers/r", "", http.StatusOK))
	if diff := cmp.Diff(map[string]string{"Authorization": "Bearer admin-literal-3", "X-Trace": "off"}, got); diff != "" {
		t.Errorf("stored headers after a project token's re-import (-want +got):\n%s", diff)
	}
}

// TestMaskUnlessOnlyReferences: a credential value is shown to a project
// token only when it is made of ${REF}s and an auth scheme; any literal
// beside a reference, or a reference's default, is masked.
func TestMaskUnlessOnlyReferences(t *testing.T) {
	_, admin, tenant := adminAndTenant(t)
	values := []struct {
		v     string
		shown bool // as written; else masked
	}{
		{"Bearer ${API_KEY}", true},
		{"${API_KEY}", true},
		{"${USER}:${PASS}", true},
		{"Basic ${B64}", true},
		{"${API_KEY:-}", true},
		{"Bearer sk-literal-7 ${X}", false},
		{"${X}sk-literal-8", false},
		{"${API_KEY:-sk-literal-9}", false},
		{"sk-literal-10", false},
		{"token=${T}&sig=literal-sig-11", false},
	}
	headers := map[string]string{}
	want := map[string]string{}
	for i, c := range values {
		k := "X-Auth-" + string(rune('a'+i))
		headers[k] = c.v
		want[k] = c.v
		if !c.shown {
			want[k] = "[redacted]"
		}
	}
	cfg, _ := json.Marshal(map[string]any{"url": "http://127.0.0.1:9/mcp", "headers": headers})
	mustStatus(t, admin, "POST", "/api/v1/projects/default/servers", `{"name":"m","config":`+string(cfg)+`}`, http.StatusCreated)
	got := headersOf(t, mustStatus(t, tenant, "GET", "/api/v1/projects/default/servers/m", "", http.StatusOK))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("headers a project token reads (-want +got):\n%s", diff)
	}
}

// TestSecretOfHostedServerAdminOnly: a secret that an admin-registered
// hosted server's environment references is the admin's to set or delete;
// other secrets stay the project token's.
func TestSecretOfHostedServerAdminOnly(t *testing.T) {
	st, admin, tenant := adminAndTenant(t)
	cfg, _ := json.Marshal(switchboard.HostedRegistration{Name: "gh", Image: "example/gh:1", Environment: map[string]string{"GITHUB_TOKEN": "${GH_TOKEN}"}})
	if _, err := st.CreateWorkspace(context.Background(), switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: "example/gh:1", Config: cfg, Status: switchboard.HostedStarting, Provider: "docker"}); err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/projects/default/secrets/"
	mustStatus(t, admin, "PUT", path+"GH_TOKEN", `{"value":"admin-value"}`, http.StatusOK)
	for _, c := range []struct{ method, body string }{{"PUT", `{"value":"tenant-value"}`}, {"DELETE", ""}} {
		w := send(tenant, c.method, path+"GH_TOKEN", c.body)
		if w.Code != http.StatusForbidden || errorCode(t, w) != "forbidden" {
			t.Errorf("project token %s of a hosted server's secret: HTTP %d %s, want 403 forbidden", c.method, w.Code, w.Body)
		}
	}
	sec, err := st.GetSecret(context.Background(), "default", "GH_TOKEN")
	if err != nil || string(sec.Ciphertext) != "admin-value" {
		t.Errorf("stored secret = %q, %v; want the admin's value", sec.Ciphertext, err)
	}
	mustStatus(t, tenant, "PUT", path+"OTHER", `{"value":"tenant-value"}`, http.StatusOK)
	mustStatus(t, tenant, "DELETE", path+"OTHER", "", http.StatusNoContent)
	mustStatus(t, admin, "DELETE", path+"GH_TOKEN", "", http.StatusNoContent)

	// A value the row stores sealed ("Bearer ${DB_PASS}") no longer shows
	// its reference; the row's secret_refs does, and counts the same.
	sealed := `{"name":"db","image":"example/db:1","sealed_environment":{"AUTH":"AQID"},"secret_refs":["DB_PASS"]}`
	if _, err := st.CreateWorkspace(context.Background(), switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: "example/db:1", Config: json.RawMessage(sealed), Status: switchboard.HostedStarting, Provider: "docker"}); err != nil {
		t.Fatal(err)
	}
	if w := send(tenant, "PUT", path+"DB_PASS", `{"value":"tenant-value"}`); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `hosted server \"db\"`) {
		t.Errorf("project token PUT of a secret a sealed value references: HTTP %d %s, want 403 naming the server", w.Code, w.Body)
	}
	mustStatus(t, admin, "PUT", path+"DB_PASS", `{"value":"admin-value"}`, http.StatusOK)
}
