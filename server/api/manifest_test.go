package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// noProjects is the live side of a gateway with nothing running.
type noProjects struct{}

func (noProjects) Reconcile(context.Context, string) error { return nil }
func (noProjects) FileServer(string, string) bool          { return false }
func (noProjects) HostedServer(string, string) bool        { return false }
func (noProjects) Status(context.Context, string) ([]switchboard.ServerStatus, error) {
	return nil, nil
}
func (noProjects) Tools(context.Context, string) (*switchboard.Catalog, error) {
	return switchboard.NewCatalog(0, nil), nil
}

// ParseServer is the gateway's rule, as projects.Hub applies it.
func (noProjects) ParseServer(name string, entry json.RawMessage, getenv func(string) string) (*switchboard.ServerSpec, error) {
	return config.ParseServer(name, entry, getenv)
}

// access lets every request reach every project; admin says whether it
// may take admin actions (a project token may not).
type access struct{ admin bool }

func (access) Authenticate(r *http.Request) (*http.Request, error) { return r, nil }
func (a access) AllowAdmin(*http.Request, string) error {
	if !a.admin {
		return switchboard.Errorf(switchboard.ErrForbidden, "needs the admin token")
	}
	return nil
}
func (access) AllowProject(*http.Request, string) error      { return nil }
func (a access) AllowCommands(r *http.Request) error         { return a.AllowAdmin(r, "") }
func (a access) AllowTokens(r *http.Request, _ string) error { return a.AllowAdmin(r, "") }

// newTestAPI serves the API over a real SQLite store in dir that has the
// project "default".
func newTestAPI(t testing.TB, dir string, admin bool) *API {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil && !errors.Is(err, switchboard.ErrConflict) {
		t.Fatal(err)
	}
	return New(Options{Store: st, Projects: noProjects{}, Access: access{admin: admin}, MaxBodyBytes: 1 << 20})
}

func send(a *API, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.ServeHTTP(w, req)
	return w
}

const manifestPath = "/api/v1/projects/default/products/fuzz"

type importedServer struct {
	Name        string          `json:"name"`
	ProjectID   string          `json:"project_id"`
	ProductID   string          `json:"product_id"`
	Description string          `json:"description"`
	Transport   string          `json:"transport"`
	Config      json.RawMessage `json:"config"`
	Enabled     bool            `json:"enabled"`
	UpdatedAt   string          `json:"updated_at"`
}

// checkImport checks one manifest import's reply: 200 with the product's
// servers, exactly the manifest's, and the same again when the manifest is
// imported a second time (idempotent, updated_at included); or a 4xx with
// the API's error shape. It returns the error code, "" on success.
func checkImport(t *testing.T, a *API, path string, body []byte) string {
	t.Helper()
	w := send(a, http.MethodPut, path, string(body))
	if w.Code != http.StatusOK {
		if w.Code < 400 || w.Code >= 500 {
			t.Fatalf("HTTP %d, want 200 or 4xx: %.500s", w.Code, w.Body)
		}
		return errorCode(t, w)
	}
	var got struct {
		Servers []importedServer `json:"servers"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Servers == nil {
		t.Fatalf("200 without {\"servers\": [...]}: %v: %.500s", err, w.Body)
	}
	// Decoded as the handler does (a repeated key merges into the "mcp"
	// object but replaces "servers"), then into a map.
	var sent struct {
		MCP *struct {
			Servers json.RawMessage `json:"servers"`
		} `json:"mcp"`
	}
	var servers map[string]json.RawMessage
	if err := json.Unmarshal(body, &sent); err != nil || sent.MCP == nil {
		t.Fatalf("200 for a body without a manifest (%v)", err)
	}
	if err := json.Unmarshal(sent.MCP.Servers, &servers); err != nil {
		t.Fatalf("200 for servers that are not an object (%v)", err)
	}
	var names []string
	for _, s := range got.Servers {
		names = append(names, s.Name)
		if s.ProjectID != "default" || s.ProductID != "fuzz" || !s.Enabled {
			t.Errorf("server %q: project %q product %q enabled %v", s.Name, s.ProjectID, s.ProductID, s.Enabled)
		}
		switch switchboard.Transport(s.Transport) {
		case switchboard.TransportStdio, switchboard.TransportSSE, switchboard.TransportStreamableHTTP:
		default:
			t.Errorf("server %q: transport %q", s.Name, s.Transport)
		}
		if !json.Valid(s.Config) || !bytes.HasPrefix(s.Config, []byte("{")) {
			t.Errorf("server %q: config %s is not an object", s.Name, s.Config)
		}
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for k := range servers {
			if !yield(k) {
				return
			}
		}
	})
	if !slices.IsSorted(names) {
		t.Errorf("servers not ordered by name: %q", names)
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("imported servers differ from the manifest's (-manifest +imported):\n%s", diff)
	}
	again := send(a, http.MethodPut, path, string(body))
	if again.Code != http.StatusOK || !bytes.Equal(again.Body.Bytes(), w.Body.Bytes()) {
		t.Errorf("importing again is not idempotent: HTTP %d\nfirst  %.500s\nsecond %.500s", again.Code, w.Body, again.Body)
	}
	return ""
}

// manifestSeeds are the fuzz seeds and the inputs of TestManifest's
// table, with the error code each must get ("" for 200).
var manifestSeeds = []struct {
	name, body, code string
}{
	{"stdio and remote", `{"name":"app","mcp":{"servers":{"gh":{"command":"gh-mcp","args":["stdio"],"env":{"T":"${GH_TOKEN}"},"toolPrefix":"gh_"},"search":{"url":"https://s.example/mcp","headers":{"Authorization":"Bearer ${S}"},"callTimeout":"90s","description":"Web search"}}}}`, ""},
	{"empty servers", `{"mcp":{"servers":{}}}`, ""},
	{"VS Code type and transport aliases", `{"mcp":{"servers":{"a":{"type":"http","url":"http://a.example"},"b":{"transport":"streamableHttp","url":"http://b.example"},"c":{"type":"stdio","command":"c"},"d":{"url":"http://d.example/sse"}}}}`, ""},
	{"unknown keys ignored", `{"version":3,"mcp":{"servers":{"a":{"url":"http://a.example","x-extra":{"k":[1,2]}}},"other":true},"z":null}`, ""},
	{"whole URL from a secret", `{"mcp":{"servers":{"a":{"url":"${MCP_URL}"}}}}`, ""},
	{"scheme and host from a secret", `{"mcp":{"servers":{"a":{"url":"${BASE}/mcp"}}}}`, ""},
	{"port from a secret", `{"mcp":{"servers":{"a":{"url":"http://localhost:${PORT}/mcp"}}}}`, ""},
	{"non-HTTP URL with a reference", `{"mcp":{"servers":{"a":{"url":"ftp://${HOST}/mcp"}}}}`, "invalid"},
	{"non-HTTP URL", `{"mcp":{"servers":{"a":{"url":"file:///etc/passwd"}}}}`, "invalid"},
	{"server twice", `{"mcp":{"servers":{"a":{"url":"http://a.example"},"a":{"command":"rm"}}}}`, "invalid"},
	{"disabled", `{"mcp":{"servers":{"a":{"url":"http://a.example","disabled":true}}}}`, "invalid"},
	{"command and url", `{"mcp":{"servers":{"a":{"url":"http://a.example","command":"x"}}}}`, "invalid"},
	{"neither command nor url", `{"mcp":{"servers":{"a":{"args":["x"]}}}}`, "invalid"},
	{"unknown transport", `{"mcp":{"servers":{"a":{"url":"http://a.example","transport":"websocket"}}}}`, "invalid"},
	{"stdio transport on a url", `{"mcp":{"servers":{"a":{"url":"http://a.example","type":"stdio"}}}}`, "invalid"},
	{"bad callTimeout", `{"mcp":{"servers":{"a":{"url":"http://a.example","callTimeout":"-1s"}}}}`, "invalid"},
	{"bad toolPrefix", `{"mcp":{"servers":{"a":{"url":"http://a.example","toolPrefix":"a b"}}}}`, "invalid"},
	{"args not strings", `{"mcp":{"servers":{"a":{"command":"x","args":[1]}}}}`, "invalid"},
	{"entry not an object", `{"mcp":{"servers":{"a":"npx server"}}}`, "invalid"},
	{"entry null", `{"mcp":{"servers":{"a":null}}}`, "invalid"},
	{"servers null", `{"mcp":{"servers":null}}`, "invalid"},
	{"servers an array", `{"mcp":{"servers":[{"url":"http://a.example"}]}}`, "invalid"},
	{"no mcp", `{"servers":{"a":{"url":"http://a.example"}}}`, "invalid"},
	{"mcp null", `{"mcp":null}`, "invalid"},
	{"bad server name", `{"mcp":{"servers":{"../a":{"url":"http://a.example"}}}}`, "invalid"},
	{"NUL in a name", `{"mcp":{"servers":{"a\u0000":{"url":"http://a.example"}}}}`, "invalid"},
	{"NUL in an arg", `{"mcp":{"servers":{"a":{"command":"x","args":["\u0000"]}}}}`, "invalid"},
	{"NUL in the description", `{"mcp":{"servers":{"a":{"url":"http://a.example","description":"a\u0000"}}}}`, "invalid"},
	{"huge number in an unknown key", `{"mcp":{"servers":{"a":{"url":"http://a.example","n":1e400}}}}`, "invalid"},
	{"not JSON", `{"mcp":`, "invalid"},
	{"trailing data", `{"mcp":{"servers":{}}} {}`, "invalid"},
	{"empty body", ``, "invalid"},
}

// TestManifest runs the seeds as a table against the real handler.
func TestManifest(t *testing.T) {
	a := newTestAPI(t, t.TempDir(), true)
	for _, c := range manifestSeeds {
		t.Run(c.name, func(t *testing.T) {
			if got := checkImport(t, a, manifestPath, []byte(c.body)); got != c.code {
				t.Errorf("code %q, want %q", got, c.code)
			}
		})
	}
}

func TestManifestErrors(t *testing.T) {
	a := newTestAPI(t, t.TempDir(), true)
	if w := send(a, http.MethodPost, "/api/v1/projects/default/servers", `{"name":"byhand","config":{"url":"http://h.example"}}`); w.Code != http.StatusCreated {
		t.Fatalf("creating a server by hand: %d %s", w.Code, w.Body)
	}
	long := strings.Repeat("n", 100000)
	for _, c := range []struct {
		name, method, path, body, code string
	}{
		{"name of a server added by hand", "PUT", manifestPath, `{"mcp":{"servers":{"byhand":{"url":"http://a.example"}}}}`, "conflict"},
		{"no such project", "PUT", "/api/v1/projects/nope/products/fuzz", `{"mcp":{"servers":{}}}`, "not_found"},
		{"bad product", "PUT", "/api/v1/projects/default/products/-x", `{"mcp":{"servers":{}}}`, "invalid"},
		{"long server name is clipped", "PUT", manifestPath, `{"mcp":{"servers":{"` + long + `":{"url":"http://a.example"}}}}`, "invalid"},
		{"long unknown field in a create is clipped", "POST", "/api/v1/projects/default/servers", `{"` + long + `":1}`, "invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := send(a, c.method, c.path, c.body)
			if got := errorCode(t, w); got != c.code {
				t.Errorf("HTTP %d code %q, want %q: %.300s", w.Code, got, c.code, w.Body)
			}
			if w.Body.Len() > 1024 {
				t.Errorf("error body of %d bytes echoes the input", w.Body.Len())
			}
		})
	}
	// Re-importing with one server fewer deletes it; the hand-added one stays.
	checkImport(t, a, manifestPath, []byte(`{"mcp":{"servers":{"a":{"url":"http://a.example"},"b":{"url":"http://b.example"}}}}`))
	checkImport(t, a, manifestPath, []byte(`{"mcp":{"servers":{"b":{"url":"http://b.example"}}}}`))
	w := send(a, http.MethodGet, "/api/v1/projects/default/servers", "")
	var list struct{ Servers []importedServer }
	_ = json.Unmarshal(w.Body.Bytes(), &list)
	var names []string
	for _, s := range list.Servers {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"b", "byhand"}, names); diff != "" {
		t.Errorf("servers after the second import (-want +got):\n%s", diff)
	}
	if w := send(a, http.MethodDelete, "/api/v1/projects/default/products/never-imported", ""); w.Code != http.StatusNoContent {
		t.Errorf("DELETE of a product without servers: %d %s, want 204", w.Code, w.Body)
	}
}

// TestManifestStdioNeedsAdmin: a manifest with a stdio server runs a
// command on the gateway host, so a project token may not import it.
func TestManifestStdioNeedsAdmin(t *testing.T) {
	a := newTestAPI(t, t.TempDir(), false)
	if got := checkImport(t, a, manifestPath, []byte(`{"mcp":{"servers":{"r":{"url":"http://a.example"},"s":{"command":"sh"}}}}`)); got != "forbidden" {
		t.Errorf("stdio manifest with a project token: code %q, want forbidden", got)
	}
	if got := checkImport(t, a, manifestPath, []byte(`{"mcp":{"servers":{"r":{"url":"http://a.example"}}}}`)); got != "" {
		t.Errorf("remote-only manifest with a project token: code %q, want success", got)
	}
}

// FuzzManifest drives the manifest import handler over a real SQLite
// store: any body gets 200 with exactly the manifest's servers (and the
// same again on re-import) or a 4xx in the API's error shape; never a
// panic or a 5xx.
func FuzzManifest(f *testing.F) {
	for _, c := range manifestSeeds {
		f.Add([]byte(c.body))
	}
	a := newTestAPI(f, f.TempDir(), true)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkImport(t, a, manifestPath, body)
	})
}
