package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/catalog"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// volumesEnv is a catalog of two entries whose volumes, in projects x
// and x-memory, got one Docker volume under the old naming: cva with
// memory-data:/data and cvb with data:/data.
func volumesEnv(t *testing.T) (*catalog.OnDemand, *engine.Engine) {
	t.Helper()
	eng := enginetest.New(t)
	image := enginetest.GoImage(t, eng, fixturePkg)
	cat, err := catalog.ParseCatalog(strings.NewReader(fmt.Sprintf(`
registry:
  cva: {image: %q, longLived: true, disableNetwork: true, volumes: ["memory-data:/data"]}
  cvb: {image: %q, longLived: true, disableNetwork: true, volumes: ["data:/data"]}
`, image, image)))
	if err != nil {
		t.Fatal(err)
	}
	o := catalog.NewOnDemand(catalog.OnDemandOptions{Engine: eng, Catalog: cat})
	t.Cleanup(func() { _ = o.Close(context.Background()) })
	return o, eng
}

// callIn calls tool of project's session and returns its first text.
func callIn(t *testing.T, o *catalog.OnDemand, project, session, tool, args string) string {
	t.Helper()
	res, err := o.SessionTools(project).CallSessionTool(context.Background(), switchboard.CallRequest{Project: project, Session: session, Tool: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s in %s: %v", tool, project, err)
	}
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("%s result %s", tool, res)
	}
	return r.Content[0].Text
}

// catalogVolumes lists the names of eng's catalog volumes, sorted.
func catalogVolumes(t *testing.T, eng *engine.Engine) []string {
	t.Helper()
	vs, err := eng.ListVolumes(context.Background(), map[string]string{engine.LabelKind: catalog.KindCatalog})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

// TestCatalogVolumeNamesDoNotCollide: project x's memory-data and
// project x-memory's data are two volumes; x-memory does not read the
// file x wrote.
func TestCatalogVolumeNamesDoNotCollide(t *testing.T) {
	o, eng := volumesEnv(t)
	ctx := context.Background()
	for _, a := range [][3]string{{"x", "s1", "cva"}, {"x-memory", "s1", "cvb"}} {
		if _, err := o.Add(ctx, a[0], a[1], a[2], nil); err != nil {
			t.Fatal(err)
		}
	}
	callIn(t, o, "x", "s1", "write_file", `{"path":"/data/n","text":"x's note"}`)
	if got := callIn(t, o, "x-memory", "s1", "read_file", `{"path":"/data/n"}`); strings.Contains(got, "x's note") {
		t.Fatal("project x-memory reads the file project x wrote in its catalog volume")
	}
	if vs := catalogVolumes(t, eng); len(vs) != 2 {
		t.Errorf("catalog volumes %q, want one per project", vs)
	}
}

// TestCatalogVolumeLegacyAdopted: after an upgrade, the volume the old
// naming made for project x is x's again (its labels are x's), and
// project x-memory, whose old name was the same, gets a volume of its
// own instead of x's.
func TestCatalogVolumeLegacyAdopted(t *testing.T) {
	o, eng := volumesEnv(t)
	ctx := context.Background()
	// What the earlier version made for project x: its labels, its name.
	legacy := engine.LegacyCatalogVolumes(eng.Instance(), "x", "memory-data")[1]
	old := map[string]string{engine.LabelKind: catalog.KindCatalog, engine.LabelProject: "x", "io.switchboard.server": "cva", "io.switchboard.path": "/data"}
	if err := eng.CreateVolume(ctx, legacy, old); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(ctx, "x", "s1", "cva", nil); err != nil {
		t.Fatal(err)
	}
	callIn(t, o, "x", "s1", "write_file", `{"path":"/data/n","text":"x's note"}`)
	if vs := catalogVolumes(t, eng); !slices.Equal(vs, []string{legacy}) {
		t.Fatalf("catalog volumes %q, want only x's legacy volume %q, adopted", vs, legacy)
	}
	if _, err := o.Add(ctx, "x-memory", "s1", "cvb", nil); err != nil {
		t.Fatal(err)
	}
	if got := callIn(t, o, "x-memory", "s1", "read_file", `{"path":"/data/n"}`); strings.Contains(got, "x's note") {
		t.Fatal("project x-memory adopted project x's legacy volume")
	}
	if vs := catalogVolumes(t, eng); len(vs) != 2 {
		t.Errorf("catalog volumes %q, want x's legacy one and x-memory's own", vs)
	}
}
