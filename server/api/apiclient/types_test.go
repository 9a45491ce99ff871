package apiclient_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestWireNamesAreSnakeCase: every field the admin API writes, in its own
// types and the root package's it returns, is named in snake_case.
func TestWireNamesAreSnakeCase(t *testing.T) {
	types := []any{
		apiclient.Project{}, apiclient.NewProject{}, apiclient.ProjectChange{}, apiclient.SecretValue{}, apiclient.NewToken{},
		apiclient.WorkspaceAttach{}, apiclient.HostedCall{}, apiclient.Server{}, apiclient.ServerChange{}, apiclient.Tool{},
		apiclient.Secret{}, apiclient.Token{}, apiclient.CallPage{}, apiclient.Reloaded{}, apiclient.SandboxSwitch{},
		apiclient.HostedLogs{}, apiclient.ErrorBody{}, apiclient.Projects{}, apiclient.Servers{}, apiclient.Tools{},
		apiclient.Secrets{}, apiclient.Tokens{}, apiclient.Statuses{}, apiclient.HostedList{}, apiclient.Workspaces{},
		switchboard.HostedRegistration{}, switchboard.HostedStatus{}, switchboard.WorkspaceInfo{}, switchboard.SandboxSession{},
	}
	seen := map[reflect.Type]bool{}
	var walk func(path string, typ reflect.Type)
	walk = func(path string, typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() == "time" {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				walk(path, f.Type)
				continue
			}
			if name == "" {
				t.Errorf("%s.%s has no json name (Go would write %q)", path, f.Name, f.Name)
			} else if !snake.MatchString(name) {
				t.Errorf("%s.%s is written as %q: the admin API names fields in snake_case", path, f.Name, name)
			}
			walk(path+"."+name, f.Type)
		}
	}
	for _, v := range types {
		walk(reflect.TypeOf(v).String(), reflect.TypeOf(v))
	}
}

// TestServerStatusOldName: a server's status carries last_error and, for
// one more release, its old name lastError; a client reads either.
func TestServerStatusOldName(t *testing.T) {
	b, err := json.Marshal(switchboard.ServerStatus{Name: "s", State: switchboard.StateFailed, LastError: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["last_error"] != "boom" || m["lastError"] != "boom" {
		t.Errorf("status JSON %s: want last_error and lastError both \"boom\"", b)
	}
	b, _ = json.Marshal(switchboard.ServerStatus{Name: "s"})
	if strings.Contains(string(b), "rror") {
		t.Errorf("status without an error %s: want neither name", b)
	}
	for _, in := range []string{`{"name":"s","last_error":"new"}`, `{"name":"s","lastError":"new"}`, `{"name":"s","last_error":"new","lastError":"old"}`} {
		var s switchboard.ServerStatus
		if err := json.Unmarshal([]byte(in), &s); err != nil || s.LastError != "new" || s.Name != "s" {
			t.Errorf("decoding %s: %+v, %v; want last error \"new\"", in, s, err)
		}
	}
}
