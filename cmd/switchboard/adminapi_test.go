package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// Helpers for the end-to-end tests of projects, the admin API and
// persistence: a plain net/http client for /api/v1 that keeps every
// response body (so a test can prove a secret never left the gateway
// through it), and the official go-sdk client with a bearer token.

// adminToken is MCP_SERVER_ADMIN_TOKEN in these tests.
const adminToken = "e2e-admin-token-0123456789abcdef"

// opTimeout bounds every single request a test makes.
const opTimeout = 20 * time.Second

// apiClient calls the admin API with one token (none when empty).
type apiClient struct {
	t     testing.TB
	base  string
	token string
	seen  *testenv.Buffer // every response body, shared by copies
}

func newAPI(t testing.TB, gatewayURL, token string) *apiClient {
	return &apiClient{t: t, base: gatewayURL, token: token, seen: &testenv.Buffer{}}
}

// as is the same client with another token; bodies are still recorded
// in the same place.
func (a *apiClient) as(token string) *apiClient {
	c := *a
	c.token = token
	return &c
}

// on is the same client failing t, for use inside a subtest.
func (a *apiClient) on(t testing.TB) *apiClient {
	c := *a
	c.t = t
	return &c
}

// do sends body (a string as is, anything else as JSON) and returns the
// status and the response body.
func (a *apiClient) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			a.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	_, _ = a.seen.Write(append(out, '\n'))
	return resp.StatusCode, out
}

// must sends a request, fails the test unless the status is want, and
// decodes the body into out when out is not nil.
func (a *apiClient) must(want int, method, path string, body, out any) []byte {
	a.t.Helper()
	status, raw := a.do(method, path, body)
	if status != want {
		a.t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: decoding %s: %v", method, path, raw, err)
		}
	}
	return raw
}

// apiErrorBody is the API's error body.
type apiErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// fails sends a request that must fail with status and API error code,
// and returns the error message.
func (a *apiClient) fails(status int, code, method, path string, body any) string {
	a.t.Helper()
	var e apiErrorBody
	a.must(status, method, path, body, &e)
	if e.Error.Code != code || e.Error.Message == "" {
		a.t.Fatalf("%s %s: error %+v, want code %q and a message", method, path, e.Error, code)
	}
	return e.Error.Message
}

// Shapes of API responses the tests read.
type (
	projectOut struct {
		ID          string    `json:"id"`
		Description string    `json:"description"`
		MCPURL      string    `json:"mcp_url"`
		CreatedAt   time.Time `json:"created_at"`
		UpdatedAt   time.Time `json:"updated_at"`
	}
	serverOut struct {
		ID          string          `json:"id"`
		ProjectID   string          `json:"project_id"`
		ProductID   string          `json:"product_id"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Transport   string          `json:"transport"`
		Config      json.RawMessage `json:"config"`
		Enabled     bool            `json:"enabled"`
		CreatedAt   string          `json:"created_at"` // compared as sent
		UpdatedAt   string          `json:"updated_at"`
		Status      *struct {
			State     string `json:"state"`
			Tools     int    `json:"tools"`
			LastError string `json:"lastError"`
		} `json:"status"`
	}
	tokenOut struct {
		ID        string     `json:"id"`
		Name      string     `json:"name"`
		Token     string     `json:"token"`
		RevokedAt *time.Time `json:"revoked_at"`
	}
	callOut struct {
		ID        int64           `json:"id"`
		Session   string          `json:"session"`
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		Outcome   string          `json:"outcome"`
		Code      int             `json:"code"`
		StartedAt time.Time       `json:"started_at"`
		Principal *struct {
			Issuer  string `json:"issuer"`
			Subject string `json:"subject"`
			Name    string `json:"name"`
		} `json:"principal"`
	}
	callPage struct {
		Calls []callOut `json:"calls"`
		Next  string    `json:"next"`
	}
)

func (a *apiClient) createProject(id string) {
	a.t.Helper()
	var p projectOut
	a.must(http.StatusCreated, "POST", "/api/v1/projects", map[string]any{"id": id, "description": "e2e " + id}, &p)
	if p.ID != id || p.MCPURL != "/projects/"+id+"/mcp" {
		a.t.Fatalf("created project %+v", p)
	}
}

func (a *apiClient) createServer(project, name string, config map[string]any) serverOut {
	a.t.Helper()
	var s serverOut
	a.must(http.StatusCreated, "POST", "/api/v1/projects/"+project+"/servers", map[string]any{"name": name, "config": config}, &s)
	return s
}

func (a *apiClient) getServer(project, name string) serverOut {
	a.t.Helper()
	var s serverOut
	a.must(http.StatusOK, "GET", "/api/v1/projects/"+project+"/servers/"+name, nil, &s)
	return s
}

func (a *apiClient) listServers(project string) []serverOut {
	a.t.Helper()
	var out struct {
		Servers []serverOut `json:"servers"`
	}
	a.must(http.StatusOK, "GET", "/api/v1/projects/"+project+"/servers", nil, &out)
	return out.Servers
}

func (a *apiClient) putSecret(project, name, value string) {
	a.t.Helper()
	raw := a.must(http.StatusOK, "PUT", "/api/v1/projects/"+project+"/secrets/"+name, map[string]any{"value": value}, nil)
	if bytes.Contains(raw, []byte(value)) {
		a.t.Fatalf("PUT secret echoed the value")
	}
}

func (a *apiClient) createToken(project, name string) tokenOut {
	a.t.Helper()
	var tok tokenOut
	a.must(http.StatusCreated, "POST", "/api/v1/projects/"+project+"/tokens", map[string]any{"name": name}, &tok)
	if !strings.HasPrefix(tok.Token, "sbt_") || tok.ID == "" {
		a.t.Fatalf("created token %+v", tok)
	}
	return tok
}

// toolCalls reads one page of a project's history; query starts with "?"
// or is empty.
func (a *apiClient) toolCalls(project, query string) callPage {
	a.t.Helper()
	var page callPage
	a.must(http.StatusOK, "GET", "/api/v1/projects/"+project+"/tool-calls"+query, nil, &page)
	return page
}

// waitCalls polls a project's history until it holds at least n records
// matching query; the call log writes in batches.
func (a *apiClient) waitCalls(project, query string, n int) []callOut {
	a.t.Helper()
	var page callPage
	eventually(a.t, opTimeout, func() (bool, string) {
		page = a.toolCalls(project, query)
		return len(page.Calls) >= n, "history of " + project + query + " has " + itoa(len(page.Calls)) + " records, want " + itoa(n)
	})
	return page.Calls
}

// eventually polls cond until it holds, failing the test with cond's
// last description after timeout. For state that another goroutine or
// process reaches on its own schedule (the batched call log, another
// replica's sync), where no event can be waited for.
func eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fixture is a server entry running the go-sdk fixture as a stdio child,
// named name, with one extra tool "<name>_t0000" so that tool lists of
// different fixtures differ. extra are more entry fields.
func fixture(name string, env map[string]string, extra ...any) map[string]any {
	e := map[string]string{"SWITCHBOARD_FIXTURE": "stdio", "SWITCHBOARD_FIXTURE_NAME": name, "SWITCHBOARD_FIXTURE_TOOLS": "1"}
	for k, v := range env {
		e[k] = v
	}
	s := map[string]any{"command": os.Args[0], "env": e}
	for i := 0; i+1 < len(extra); i += 2 {
		s[extra[i].(string)] = extra[i+1]
	}
	return s
}

// bearer is the go-sdk client's RoundTripper: it adds the current token
// and records the status of every POST, so a test can tell a 401 from a
// 403 behind the SDK's error.
type bearer struct {
	token    atomic.Pointer[string]
	mu       sync.Mutex
	statuses []int
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if tok := b.token.Load(); tok != nil && *tok != "" {
		r.Header.Set("Authorization", "Bearer "+*tok)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		b.mu.Lock()
		b.statuses = append(b.statuses, resp.StatusCode)
		b.mu.Unlock()
	}
	return resp, err
}

func (b *bearer) set(token string) { b.token.Store(&token) }

// lastStatus is the status of the last POST.
func (b *bearer) lastStatus() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.statuses) == 0 {
		return 0
	}
	return b.statuses[len(b.statuses)-1]
}

// dialMCP opens a go-sdk session on endpoint with token.
func dialMCP(endpoint, token string) (*mcp.ClientSession, *bearer, error) {
	b := &bearer{}
	b.set(token)
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: b},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	return cs, b, err
}

// openMCP is dialMCP that must succeed; the session is closed when the
// test ends.
func openMCP(t testing.TB, endpoint, token string) (*mcp.ClientSession, *bearer) {
	t.Helper()
	cs, b, err := dialMCP(endpoint, token)
	if err != nil {
		t.Fatalf("connect %s: %v (HTTP %d)", endpoint, err, b.lastStatus())
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, b
}

// refused asserts that connecting to endpoint with token fails with HTTP
// status want.
func refused(t testing.TB, endpoint, token string, want int) {
	t.Helper()
	cs, b, err := dialMCP(endpoint, token)
	if err == nil {
		_ = cs.Close()
		t.Fatalf("connect %s with token %.8q succeeded, want HTTP %d", endpoint, token, want)
	}
	if got := b.lastStatus(); got != want {
		t.Fatalf("connect %s with token %.8q: HTTP %d (%v), want %d", endpoint, token, got, err, want)
	}
}

// toolNames lists a session's tools, sorted.
func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// callText calls a tool that must succeed and returns its first text.
func callText(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("tools/call %s: error result %+v", name, res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("tools/call %s: content %T", name, res.Content[0])
	}
	return tc.Text
}

// has reports whether sorted list holds s.
func has(list []string, s string) bool {
	_, ok := slices.BinarySearch(list, s)
	return ok
}
