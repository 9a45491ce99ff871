package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchboard-mcp/switchboard"
)

// denyAccess refuses every request that needs a token, so a route that is
// served answers 401 and one that is not answers 404 or 405.
type denyAccess struct{}

func (denyAccess) Authenticate(r *http.Request) (*http.Request, error) {
	return r, switchboard.Errorf(switchboard.ErrUnauthorized, "no token")
}
func (denyAccess) AllowAdmin(*http.Request, string) error  { return switchboard.ErrForbidden }
func (denyAccess) AllowCommands(*http.Request) error       { return switchboard.ErrForbidden }
func (denyAccess) AllowTokens(*http.Request, string) error { return switchboard.ErrForbidden }
func (denyAccess) AllowProject(*http.Request, string) error {
	return switchboard.ErrForbidden
}

// TestRoutesMatchDocument holds the API's route table to documentedRoutes
// (and so, through TestOpenAPIRoutesMatchDesign, to openapi.json), both ways.
func TestRoutesMatchDocument(t *testing.T) {
	a := New(Options{Access: denyAccess{}})
	type route struct{ Method, Path string }
	var served, documented []route
	for _, r := range a.Routes() {
		served = append(served, route{r[0], r[1]})
	}
	for _, r := range documentedRoutes {
		documented = append(documented, route(r))
	}
	less := func(a, b route) int { return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method) }
	slices.SortFunc(served, less)
	slices.SortFunc(documented, less)
	if len(slices.Compact(slices.Clone(served))) != len(served) {
		t.Errorf("Routes lists a route twice: %v", served)
	}
	if diff := cmp.Diff(documented, served); diff != "" {
		t.Errorf("Routes() and documentedRoutes differ (-documented +served):\n%s", diff)
	}
}

// TestRoutesServed checks the mux, not just the table: every documented
// route reaches its handler (401 from denyAccess, 200 for public ones), and
// any other method on its path is 405 with an Allow header that lists
// exactly the documented methods.
func TestRoutesServed(t *testing.T) {
	a := New(Options{Access: denyAccess{}})
	fill := strings.NewReplacer("{project}", "default", "{name}", "x", "{product}", "p", "{id}", "i")
	public := map[string]bool{}
	for _, r := range publicRoutes {
		public[r.Method+" "+r.Path] = true
	}
	allowed := map[string][]string{}
	for _, r := range documentedRoutes {
		allowed[r.Path] = append(allowed[r.Path], r.Method)
	}
	for _, r := range documentedRoutes {
		t.Run(r.Method+" "+r.Path, func(t *testing.T) {
			req := httptest.NewRequest(r.Method, fill.Replace(r.Path), nil)
			w := httptest.NewRecorder()
			a.ServeHTTP(w, req)
			want, wantCode := http.StatusUnauthorized, "unauthorized"
			if public[r.Method+" "+r.Path] {
				want, wantCode = http.StatusOK, ""
			}
			if w.Code != want {
				t.Fatalf("HTTP %d, want %d: %s", w.Code, want, w.Body)
			}
			if code := errorCode(t, w); code != wantCode {
				t.Errorf("error code %q, want %q", code, wantCode)
			}
		})
	}
	for path, methods := range allowed {
		t.Run("TRACE "+path, func(t *testing.T) {
			w := httptest.NewRecorder()
			a.ServeHTTP(w, httptest.NewRequest(http.MethodTrace, fill.Replace(path), nil))
			if w.Code != http.StatusMethodNotAllowed || errorCode(t, w) != "method_not_allowed" {
				t.Fatalf("HTTP %d, want 405 method_not_allowed: %s", w.Code, w.Body)
			}
			got := strings.Split(w.Header().Get("Allow"), ", ")
			slices.Sort(got)
			slices.Sort(methods)
			if diff := cmp.Diff(methods, got); diff != "" {
				t.Errorf("Allow (-documented +got):\n%s", diff)
			}
		})
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/projects/default/nothing", nil))
	if w.Code != http.StatusNotFound || errorCode(t, w) != "not_found" {
		t.Errorf("undocumented path: HTTP %d %s, want 404 not_found", w.Code, w.Body)
	}
}

// errorCode returns the code of an error body, "" for a success body, and
// fails t when an error status lacks the API's error shape.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if w.Code < 400 {
		return ""
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("error with Content-Type %q", ct)
	}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error == nil || body.Error.Code == "" || body.Error.Message == "" {
		t.Errorf("HTTP %d without the {\"error\": {\"code\", \"message\"}} body: %.300s", w.Code, w.Body)
		return ""
	}
	if status, ok := statusOfCode[body.Error.Code]; !ok || status != w.Code {
		t.Errorf("error code %q with HTTP %d; the code means HTTP %d", body.Error.Code, w.Code, status)
	}
	return body.Error.Code
}

// statusOfCode is the design's one status per error code.
var statusOfCode = map[string]int{
	"invalid": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"conflict": 409, "limit_reached": 409, "too_large": 413, "unsupported_media_type": 415, "internal": 500, "unavailable": 503, "timeout": 504,
}
