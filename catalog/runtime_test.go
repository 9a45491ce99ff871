package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestCatalogEntryRuntime: an entry's runtime: overrides the gateway's
// setting (here a runtime the engine does not list, which refuses the
// entries without one, naming it), and the status says what each
// entry's containers run under, as the engine reports them.
func TestCatalogEntryRuntime(t *testing.T) {
	const unlisted = enginetest.UnlistedRuntime
	eng, def := enginetest.NewUnlisted(t)
	ctx := context.Background()
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  setfix: {title: Setting, description: Takes the gateway's runtime, image: %[1]q, longLived: true, disableNetwork: true}
  namedfix: {title: Named, description: Names its runtime, image: %[1]q, longLived: true, disableNetwork: true, runtime: %[2]q}
  autofix: {title: Auto, description: Lets the engine choose, image: %[1]q, disableNetwork: true, runtime: auto}
`, image, def)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat, Version: "test"})
	t.Cleanup(func() {
		if err := o.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})

	if _, err := o.Add(ctx, "p", "s0", "setfix", nil); !errors.Is(err, switchboard.ErrConfig) || !strings.Contains(switchboard.Message(err), unlisted) {
		t.Fatalf("an entry under an unlisted runtime: %v; want ErrConfig naming %s", err, unlisted)
	}
	if _, err := o.Add(ctx, "p", "s1", "namedfix", nil); err != nil {
		t.Fatalf("an entry naming %s: %v", def, err)
	}
	cs, err := eng.List(ctx, map[string]string{engine.LabelKind: catalog.KindCatalog})
	if err != nil || len(cs) != 1 || cs[0].Runtime != def {
		t.Fatalf("catalog containers %+v, %v; want one under %s", cs, err, def)
	}
	if _, err := o.Add(ctx, "p", "s2", "autofix", nil); err != nil {
		t.Fatalf("an entry with runtime auto: %v", err)
	}
	if got := callText(t, o.SessionTools("p"), "s2", "echo", `{"text":"auto"}`); got != "auto" {
		t.Fatalf("echo on the auto entry = %q", got)
	}
	o.WaitRetired()
	want := map[string]catalog.EntryRuntime{
		"namedfix": {Containers: map[string]int{def: 1}, Last: def},
		"autofix":  {Containers: map[string]int{}, Last: def},
	}
	if got := o.Status().Runtimes; !maps.EqualFunc(want, got, equalRuntime) {
		t.Fatalf("status runtimes %+v, want %+v", got, want)
	}
	if err := o.Remove(ctx, "p", "s1", "", "namedfix"); err != nil {
		t.Fatal(err)
	}
	o.WaitRetired()
	if got := o.Status().Runtimes["namedfix"]; len(got.Containers) != 0 || got.Last != def {
		t.Fatalf("status after the container went: %+v; want none running, last %s", got, def)
	}
}

func equalRuntime(a, b catalog.EntryRuntime) bool {
	return maps.Equal(a.Containers, b.Containers) && a.Last == b.Last && a.Warning == b.Warning
}
