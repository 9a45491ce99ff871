package api

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// documentedRoutes is every route of the admin API (/work/spec/api.md),
// method and path as openapi.json spells them. The tests below check that
// openapi.json documents exactly these, and routes_test.go that the API
// serves exactly these, so the document and the server cannot drift apart.
var documentedRoutes = []struct{ Method, Path string }{
	{"GET", "/api/v1/projects"},
	{"POST", "/api/v1/projects"},
	{"GET", "/api/v1/projects/{project}"},
	{"PATCH", "/api/v1/projects/{project}"},
	{"DELETE", "/api/v1/projects/{project}"},

	{"GET", "/api/v1/projects/{project}/servers"},
	{"POST", "/api/v1/projects/{project}/servers"},
	{"GET", "/api/v1/projects/{project}/servers/{name}"},
	{"PATCH", "/api/v1/projects/{project}/servers/{name}"},
	{"DELETE", "/api/v1/projects/{project}/servers/{name}"},

	{"PUT", "/api/v1/projects/{project}/products/{product}"},
	{"DELETE", "/api/v1/projects/{project}/products/{product}"},

	{"GET", "/api/v1/projects/{project}/secrets"},
	{"PUT", "/api/v1/projects/{project}/secrets/{name}"},
	{"DELETE", "/api/v1/projects/{project}/secrets/{name}"},

	{"GET", "/api/v1/projects/{project}/tokens"},
	{"POST", "/api/v1/projects/{project}/tokens"},
	{"DELETE", "/api/v1/projects/{project}/tokens/{id}"},

	{"GET", "/api/v1/projects/{project}/tools"},
	{"GET", "/api/v1/projects/{project}/status"},
	{"GET", "/api/v1/projects/{project}/tool-calls"},

	{"GET", "/api/v1/projects/{project}/sandbox"},
	{"PUT", "/api/v1/projects/{project}/sandbox"},
	{"GET", "/api/v1/projects/{project}/workspaces"},
	{"GET", "/api/v1/projects/{project}/workspaces/{id}"},
	{"DELETE", "/api/v1/projects/{project}/workspaces/{id}"},
	{"POST", "/api/v1/projects/{project}/workspaces/{id}/attach"},
	{"POST", "/api/v1/projects/{project}/workspaces/{id}/detach"},
	{"POST", "/api/v1/projects/{project}/workspaces/{id}/snapshot"},
	{"POST", "/api/v1/projects/{project}/snapshots/{id}/restore"},

	{"POST", "/api/v1/reload"},
	{"GET", "/api/v1/openapi.json"},

	{"GET", "/api/v1/mcp/servers"},
	{"POST", "/api/v1/mcp/servers"},
	{"GET", "/api/v1/mcp/servers/{id}"},
	{"DELETE", "/api/v1/mcp/servers/{id}"},
	{"POST", "/api/v1/mcp/servers/{id}/restart"},
	{"GET", "/api/v1/mcp/servers/{id}/logs"},
	{"POST", "/api/v1/mcp/servers/{id}/call"},
	{"GET", "/api/v1/projects/{project}/mcp/servers"},
	{"POST", "/api/v1/projects/{project}/mcp/servers"},
	{"GET", "/api/v1/projects/{project}/mcp/servers/{id}"},
	{"DELETE", "/api/v1/projects/{project}/mcp/servers/{id}"},
	{"POST", "/api/v1/projects/{project}/mcp/servers/{id}/restart"},
	{"GET", "/api/v1/projects/{project}/mcp/servers/{id}/logs"},
	{"POST", "/api/v1/projects/{project}/mcp/servers/{id}/call"},
}

// publicRoutes are the routes that need no token (security: [] in the
// document); every other operation uses the global bearerAuth.
var publicRoutes = []struct{ Method, Path string }{
	{"GET", "/api/v1/openapi.json"},
}

// httpMethods are the keys of an OpenAPI path item that are operations.
var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

const docFile = "openapi.json"

type operation struct {
	method, path string
	item, op     map[string]any
}

func loadDoc(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("%s is not valid JSON: %v", docFile, err)
	}
	if dec.More() {
		t.Fatalf("%s has data after the top-level object", docFile)
	}
	return doc
}

// operations lists every operation of doc in a stable order.
func operations(t *testing.T, doc map[string]any) []operation {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatal(`"paths" is missing or not an object`)
	}
	var ops []operation
	for path, v := range paths {
		item, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("path %s: not an object", path)
		}
		for _, m := range httpMethods {
			o, ok := item[m]
			if !ok {
				continue
			}
			op, ok := o.(map[string]any)
			if !ok {
				t.Fatalf("%s %s: not an object", strings.ToUpper(m), path)
			}
			ops = append(ops, operation{strings.ToUpper(m), path, item, op})
		}
	}
	slices.SortFunc(ops, func(a, b operation) int {
		if c := strings.Compare(a.path, b.path); c != 0 {
			return c
		}
		return strings.Compare(a.method, b.method)
	})
	return ops
}

// resolve follows a local reference ("#/components/..."), reporting
// whether it names something in doc.
func resolve(doc map[string]any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	var cur any = doc
	for tok := range strings.SplitSeq(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = obj[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// deref returns v, or what it refers to when it is a {"$ref": ...} object.
func deref(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	obj, _ := v.(map[string]any)
	for obj != nil {
		ref, ok := obj["$ref"].(string)
		if !ok {
			break
		}
		target, ok := resolve(doc, ref)
		if !ok {
			t.Fatalf("$ref %q does not resolve", ref)
		}
		obj, _ = target.(map[string]any)
	}
	return obj
}

func TestOpenAPIVersionAndInfo(t *testing.T) {
	doc := loadDoc(t)
	if v := doc["openapi"]; v != "3.1.0" {
		t.Errorf(`openapi = %v, want "3.1.0"`, v)
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] != "Switchboard admin API" || info["version"] != "1" {
		t.Errorf("info = title %v, version %v; want \"Switchboard admin API\", \"1\"", info["title"], info["version"])
	}
	servers, _ := doc["servers"].([]any)
	if len(servers) != 1 || deref(t, doc, servers[0])["url"] != "/" {
		t.Errorf(`servers = %v, want [{"url": "/"}]`, doc["servers"])
	}
}

// TestOpenAPIFormatted keeps the file valid, 2-space indented JSON that
// ends in a newline, so diffs stay readable.
func TestOpenAPIFormatted(t *testing.T) {
	b, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	var compact, want bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatalf("%s is not valid JSON: %v", docFile, err)
	}
	if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(b, want.Bytes()) {
		t.Errorf("%s is not formatted as json.Indent with two spaces and a final newline", docFile)
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	doc := loadDoc(t)
	n := 0
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"]; ok {
				n++
				s, _ := ref.(string)
				if !strings.HasPrefix(s, "#/components/") {
					t.Errorf("%s: $ref %v does not point into #/components/", at, ref)
				} else if _, ok := resolve(doc, s); !ok {
					t.Errorf("%s: $ref %q does not resolve", at, s)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", doc)
	if n == 0 {
		t.Error("no $ref at all; the walk is broken")
	}
}

func TestOpenAPIRoutesMatchDesign(t *testing.T) {
	doc := loadDoc(t)
	type route struct{ Method, Path string }
	want := map[route]bool{}
	for _, r := range documentedRoutes {
		if want[route(r)] {
			t.Errorf("documentedRoutes lists %s %s twice", r.Method, r.Path)
		}
		want[route(r)] = true
	}
	got := map[route]bool{}
	for _, o := range operations(t, doc) {
		r := route{o.method, o.path}
		got[r] = true
		if !want[r] {
			t.Errorf("%s %s is documented but not in documentedRoutes (the design)", o.method, o.path)
		}
	}
	for _, r := range documentedRoutes {
		if !got[route(r)] {
			t.Errorf("%s %s is in the design but not documented", r.Method, r.Path)
		}
	}
}

var lowerCamel = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

func TestOpenAPIOperations(t *testing.T) {
	doc := loadDoc(t)
	ids := map[string]string{}
	for _, o := range operations(t, doc) {
		where := o.method + " " + o.path
		id, _ := o.op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s: no operationId", where)
		case !lowerCamel.MatchString(id):
			t.Errorf("%s: operationId %q is not lowerCamel", where, id)
		case ids[id] != "":
			t.Errorf("%s: operationId %q is also used by %s", where, id, ids[id])
		default:
			ids[id] = where
		}
		if s, _ := o.op["summary"].(string); strings.TrimSpace(s) == "" {
			t.Errorf("%s: no summary", where)
		}
		resps, _ := o.op["responses"].(map[string]any)
		ok2xx := false
		for code, r := range resps {
			if len(code) == 3 && code[0] == '2' {
				ok2xx = true
			}
			if deref(t, doc, r) == nil {
				t.Errorf("%s: response %s is not an object", where, code)
			} else if d, _ := deref(t, doc, r)["description"].(string); d == "" {
				t.Errorf("%s: response %s has no description", where, code)
			}
		}
		if !ok2xx {
			t.Errorf("%s: no 2xx response", where)
		}
	}
}

var templateParam = regexp.MustCompile(`\{([^{}]+)\}`)

// TestOpenAPIPathParameters checks that the parameters declared "in: path"
// for each operation (on the path item or the operation) are exactly the
// {names} of its path template, each required.
func TestOpenAPIPathParameters(t *testing.T) {
	doc := loadDoc(t)
	for _, o := range operations(t, doc) {
		where := o.method + " " + o.path
		declared := map[string]bool{}
		for _, src := range []map[string]any{o.item, o.op} {
			params, _ := src["parameters"].([]any)
			for _, p := range params {
				param := deref(t, doc, p)
				if param == nil || param["in"] != "path" {
					continue
				}
				name, _ := param["name"].(string)
				if param["required"] != true {
					t.Errorf("%s: path parameter %q is not required: true", where, name)
				}
				if _, ok := param["schema"].(map[string]any); !ok {
					t.Errorf("%s: path parameter %q has no schema", where, name)
				}
				declared[name] = true
			}
		}
		inTemplate := map[string]bool{}
		for _, m := range templateParam.FindAllStringSubmatch(o.path, -1) {
			inTemplate[m[1]] = true
			if !declared[m[1]] {
				t.Errorf("%s: path parameter {%s} is not declared", where, m[1])
			}
		}
		for name := range declared {
			if !inTemplate[name] {
				t.Errorf("%s: declares path parameter %q that the path does not have", where, name)
			}
		}
	}
}

// TestOpenAPISecurity checks that bearerAuth applies to everything but
// publicRoutes, and that every protected operation documents 401 and 403.
func TestOpenAPISecurity(t *testing.T) {
	doc := loadDoc(t)
	scheme, ok := resolve(doc, "#/components/securitySchemes/bearerAuth")
	if s, _ := scheme.(map[string]any); !ok || s["type"] != "http" || s["scheme"] != "bearer" {
		t.Fatalf("components.securitySchemes.bearerAuth = %v, want an http bearer scheme", scheme)
	}
	global, _ := json.Marshal(doc["security"])
	if string(global) != `[{"bearerAuth":[]}]` {
		t.Errorf("global security = %s, want [{\"bearerAuth\":[]}]", global)
	}
	public := map[string]bool{}
	for _, r := range publicRoutes {
		public[r.Method+" "+r.Path] = true
	}
	for _, o := range operations(t, doc) {
		where := o.method + " " + o.path
		sec, has := o.op["security"]
		resps, _ := o.op["responses"].(map[string]any)
		if public[where] {
			if s, ok := sec.([]any); !has || !ok || len(s) != 0 {
				t.Errorf("%s: public, so it needs security: [] (got %v)", where, sec)
			}
			continue
		}
		if has {
			t.Errorf("%s: overrides the global security (%v)", where, sec)
		}
		for _, code := range []string{"401", "403"} {
			if _, ok := resps[code]; !ok {
				t.Errorf("%s: needs a token but documents no %s", where, code)
			}
		}
	}
}

// TestOpenAPIErrorResponses checks that error responses are the shared
// components, whose body is the Error schema, and that the Error code enum
// is the design's list.
func TestOpenAPIErrorResponses(t *testing.T) {
	doc := loadDoc(t)
	for _, o := range operations(t, doc) {
		resps, _ := o.op["responses"].(map[string]any)
		for code, r := range resps {
			if code[0] != '4' && code[0] != '5' {
				continue
			}
			ref, _ := r.(map[string]any)["$ref"].(string)
			if !strings.HasPrefix(ref, "#/components/responses/") {
				t.Errorf("%s %s: response %s is not a shared #/components/responses entry", o.method, o.path, code)
			}
		}
	}
	responses, _ := resolve(doc, "#/components/responses")
	shared, _ := responses.(map[string]any)
	if len(shared) == 0 {
		t.Error("no components.responses")
	}
	for name := range shared {
		schema, _ := resolve(doc, "#/components/responses/"+name+"/content/application~1json/schema/$ref")
		if schema != "#/components/schemas/Error" {
			t.Errorf("components.responses.%s: body schema is %v, want the Error schema", name, schema)
		}
	}
	enum, _ := resolve(doc, "#/components/schemas/Error/properties/error/properties/code/enum")
	got, _ := json.Marshal(enum)
	want := `["invalid","unauthorized","forbidden","not_found","method_not_allowed","conflict","limit_reached","too_large","unsupported_media_type","internal","upstream_error","unavailable","timeout"]`
	if string(got) != want {
		t.Errorf("Error code enum = %s, want %s", got, want)
	}
}
