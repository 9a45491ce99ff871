package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeConfigTable: every variable Config reads has a row in the
// configuration table of docs/configuration.md, and the row's default is the one the
// code applies, so the table cannot drift from the code. Not checked:
// defaults the code computes (the row says how).
func TestReadmeConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // variable -> its default column
	row := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)` \\| ([^|]*) \\|")
	for _, m := range row.FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = m[2]
	}
	var walk func(reflect.Type)
	seen := 0
	walk = func(typ reflect.Type) {
		for f := range typ.Fields() {
			if f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == "" {
				walk(f.Type)
				continue
			}
			name := f.Tag.Get("env")
			if name == "" {
				continue
			}
			seen++
			def, ok := rows[name]
			if !ok && strings.Contains(string(readme), "`"+name+"` is accepted") {
				continue // an alias, named in its variable's row
			}
			if !ok {
				t.Errorf("%s (Config.%s) has no row in the configuration table of docs/configuration.md", name, f.Name)
				continue
			}
			if want := f.Tag.Get("envDefault"); want != "" && !strings.Contains(def, "`"+want+"`") {
				t.Errorf("docs/configuration.md gives %s the default %s; the code's is `%s`", name, strings.TrimSpace(def), want)
			}
		}
	}
	walk(reflect.TypeFor[Config]())
	if seen < 40 {
		t.Fatalf("found only %d variables in Config: the walk is broken", seen)
	}
}
