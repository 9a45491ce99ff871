package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMaskConfig: a project token reads no literal credential of an entry,
// wherever it is written: URL user-info, query and fragment parameters,
// flags in args, URLs in env and header values (issue 20, item 20), as
// well as under credential-like header and env names. References and
// everything else read as written.
func TestMaskConfig(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"url user-info password",
			`{"url":"https://u:pw-1@api.example/mcp"}`, `{"url":"https://u:[redacted]@api.example/mcp"}`},
		{"url user-info token alone",
			`{"url":"https://ghp_2@api.example/mcp"}`, `{"url":"https://[redacted]@api.example/mcp"}`},
		{"url user-info of references",
			`{"url":"https://${USER}:${PASS}@api.example/mcp"}`, `{"url":"https://${USER}:${PASS}@api.example/mcp"}`},
		{"url query and fragment",
			`{"url":"https://api.example/mcp?api_key=k-3&v=1&token=${T}&key=k-4&password=p-5&secret=s-6&sig=x#access_token=t-7"}`,
			`{"url":"https://api.example/mcp?api_key=[redacted]&v=1&token=${T}&key=[redacted]&password=[redacted]&secret=[redacted]&sig=[redacted]#access_token=[redacted]"}`},
		{"url percent-encoded name",
			`{"url":"https://api.example/?api%5Fkey=k-8"}`, `{"url":"https://api.example/?api%5Fkey=[redacted]"}`},
		{"args",
			`{"command":"srv","args":["--token=t-9","--password","p-10","--url","postgres://u:p-11@db/x?sslmode=disable","-H","Authorization: Bearer b-12","api_key=k-13","--verbose","--key","${K}","--auth","--port","80"]}`,
			`{"args":["--token=[redacted]","--password","[redacted]","--url","postgres://u:[redacted]@db/x?sslmode=disable","-H","Authorization: [redacted]","api_key=[redacted]","--verbose","--key","${K}","--auth","--port","80"],"command":"srv"}`},
		{"env values",
			`{"command":"srv","env":{"DATABASE_URL":"postgres://u:p-14@db:5432/x","DB_PASS":"p-15","KEY":"k-16","REGION":"eu","MONKEY":"banana","TOKEN":"${T}"}}`,
			`{"command":"srv","env":{"DATABASE_URL":"postgres://u:[redacted]@db:5432/x","DB_PASS":"[redacted]","KEY":"[redacted]","MONKEY":"banana","REGION":"eu","TOKEN":"${T}"}}`},
		{"header values",
			`{"url":"https://api.example/","headers":{"Authorization":"Bearer b-17","X-Upstream":"https://x:p-18@up.example/","X-Trace":"on"}}`,
			`{"headers":{"Authorization":"[redacted]","X-Trace":"on","X-Upstream":"https://x:[redacted]@up.example/"},"url":"https://api.example/"}`},
		{"nothing to mask", `{"url": "https://api.example/mcp?v=1&a=b"}`, `{"url": "https://api.example/mcp?v=1&a=b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, string(maskConfig(json.RawMessage(tt.in)))); diff != "" {
				t.Errorf("maskConfig(%s) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestMaskedURLAndArgsThroughTheAPI: a project token's reads of a server
// (one, and the list) hold none of the literal credentials an admin wrote
// into a URL, args or env, the admin's read holds them all, and a project
// token's edit that sends the URL back as it read it keeps the stored one.
func TestMaskedURLAndArgsThroughTheAPI(t *testing.T) {
	_, admin, tenant := adminAndTenant(t)
	literals := []string{"pw-literal-1", "k-literal-2", "t-literal-3", "t-literal-4", "p-literal-5", "p-literal-6", "p-literal-7"}
	mustStatus(t, admin, "POST", "/api/v1/projects/default/servers",
		`{"name":"r","config":{"url":"https://u:pw-literal-1@127.0.0.1:9/mcp?api_key=k-literal-2&v=1#access_token=t-literal-3"}}`, http.StatusCreated)
	mustStatus(t, admin, "POST", "/api/v1/projects/default/servers",
		`{"name":"s","config":{"command":"srv","args":["--token=t-literal-4","--password","p-literal-5"],"env":{"DATABASE_URL":"postgres://u:p-literal-6@db/x","X":"postgres://p-literal-7@db"}}}`, http.StatusCreated)
	for _, path := range []string{"/api/v1/projects/default/servers", "/api/v1/projects/default/servers/r", "/api/v1/projects/default/servers/s"} {
		seen := string(mustStatus(t, tenant, "GET", path, "", http.StatusOK))
		for _, l := range literals {
			if strings.Contains(seen, l) {
				t.Errorf("a project token's GET %s shows %q: %s", path, l, seen)
			}
		}
	}
	all := string(mustStatus(t, admin, "GET", "/api/v1/projects/default/servers", "", http.StatusOK))
	for _, l := range literals {
		if !strings.Contains(all, l) {
			t.Errorf("the admin's GET does not show %q", l)
		}
	}

	// The token edits the description and sends the entry back as read.
	var read struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(mustStatus(t, tenant, "GET", "/api/v1/projects/default/servers/r", "", http.StatusOK), &read); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, tenant, "PATCH", "/api/v1/projects/default/servers/r", `{"description":"mine","config":`+string(read.Config)+`}`, http.StatusOK)
	var stored struct {
		Config struct{ URL string } `json:"config"`
	}
	if err := json.Unmarshal(mustStatus(t, admin, "GET", "/api/v1/projects/default/servers/r", "", http.StatusOK), &stored); err != nil {
		t.Fatal(err)
	}
	if want := "https://u:pw-literal-1@127.0.0.1:9/mcp?api_key=k-literal-2&v=1#access_token=t-literal-3"; stored.Config.URL != want {
		t.Errorf("stored URL after a project token's edit %q, want %q", stored.Config.URL, want)
	}

	// It changes the path and a plain parameter, keeping the masked
	// credentials as read: they stay the admin's. A credential it sets
	// itself is its own.
	mustStatus(t, tenant, "PATCH", "/api/v1/projects/default/servers/r",
		`{"config":{"url":"https://u:[redacted]@127.0.0.1:9/v2/mcp?api_key=[redacted]&v=2&token=mine#access_token=[redacted]"}}`, http.StatusOK)
	if err := json.Unmarshal(mustStatus(t, admin, "GET", "/api/v1/projects/default/servers/r", "", http.StatusOK), &stored); err != nil {
		t.Fatal(err)
	}
	if want := "https://u:pw-literal-1@127.0.0.1:9/v2/mcp?api_key=k-literal-2&v=2&token=mine#access_token=t-literal-3"; stored.Config.URL != want {
		t.Errorf("stored URL after a project token changed its path %q, want %q", stored.Config.URL, want)
	}
}
