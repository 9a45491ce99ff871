package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestCreateVolumeComparesLabels: an existing volume is reused only with
// every label CreateVolume would set; a volume of another project (or
// kind, ref, instance) under the right name is ErrConflict naming the
// label, and its contents are not handed over.
func TestCreateVolumeComparesLabels(t *testing.T) {
	e := enginetest.New(t)
	ctx := ctxT(t)
	name := engine.Name("catalog", e.Instance(), "x-memory", "data")
	mine := map[string]string{engine.LabelKind: "catalog", engine.LabelProject: "x-memory"}
	if err := e.CreateVolume(ctx, name, map[string]string{engine.LabelKind: "catalog", engine.LabelProject: "x"}); err != nil {
		t.Fatal(err)
	}
	err := e.CreateVolume(ctx, name, mine)
	if !errors.Is(err, switchboard.ErrConflict) || !strings.Contains(err.Error(), engine.LabelProject) {
		t.Fatalf("CreateVolume over another project's volume: %v; want ErrConflict naming %s", err, engine.LabelProject)
	}
	if strings.Contains(switchboard.Message(err), `"x"`) {
		t.Errorf("the message %q shows the other project's name", switchboard.Message(err))
	}
	cases := map[string]struct {
		existing map[string]string
		label    string // "" when reuse is right
	}{
		"same owner":   {mine, ""},
		"other kind":   {map[string]string{engine.LabelKind: "workspace", engine.LabelProject: "x-memory"}, engine.LabelKind},
		"no project":   {map[string]string{engine.LabelKind: "catalog"}, engine.LabelProject},
		"empty ref":    {map[string]string{engine.LabelKind: "catalog", engine.LabelProject: "x-memory", engine.LabelRef: ""}, ""},
		"extra labels": {map[string]string{engine.LabelKind: "catalog", engine.LabelProject: "x-memory", "io.switchboard.path": "/data"}, ""},
	}
	for n, c := range cases {
		t.Run(n, func(t *testing.T) {
			v := engine.Name("t", n)
			if err := e.CreateVolume(ctx, v, c.existing); err != nil {
				t.Fatal(err)
			}
			err := e.CreateVolume(ctx, v, mine)
			if c.label == "" {
				if err != nil {
					t.Fatalf("reuse: %v", err)
				}
				return
			}
			if !errors.Is(err, switchboard.ErrConflict) || !strings.Contains(err.Error(), c.label) {
				t.Fatalf("CreateVolume = %v; want ErrConflict naming %s", err, c.label)
			}
		})
	}
	// A label the caller adds that the volume lacks, and another
	// instance's volume of the same labels.
	withRef := map[string]string{engine.LabelKind: "catalog", engine.LabelProject: "x-memory", engine.LabelRef: "row"}
	if err := e.CreateVolume(ctx, engine.Name("t", "same owner"), withRef); !errors.Is(err, switchboard.ErrConflict) || !strings.Contains(err.Error(), engine.LabelRef) {
		t.Errorf("CreateVolume with a ref the volume lacks = %v; want ErrConflict naming %s", err, engine.LabelRef)
	}
	other := enginetest.New(t)
	if err := other.CreateVolume(ctx, name, mine); !errors.Is(err, switchboard.ErrConflict) || !strings.Contains(err.Error(), engine.LabelInstance) {
		t.Errorf("another instance's CreateVolume = %v; want ErrConflict naming %s", err, engine.LabelInstance)
	}
}

// TestFindVolumeAdoptsLegacy: a volume an earlier version named is
// adopted only when it carries exactly the owner labels; otherwise, or
// when the new name exists, the new name is used.
func TestFindVolumeAdoptsLegacy(t *testing.T) {
	e := enginetest.New(t)
	ctx := ctxT(t)
	inst := e.Instance()
	labelsOf := func(project string) map[string]string {
		return map[string]string{engine.LabelKind: "catalog", engine.LabelProject: project}
	}
	// The old scheme gave project x's "memory-data" and project
	// x-memory's "data" one name; project x made it.
	legacy := engine.LegacyCatalogVolumes(inst, "x-memory", "data")
	if old := engine.LegacyCatalogVolumes(inst, "x", "memory-data"); !slices.Equal(old, legacy) {
		t.Fatalf("the legacy names %q and %q differ: the test no longer reproduces the collision", old, legacy)
	}
	if err := e.CreateVolume(ctx, legacy[1], labelsOf("x")); err != nil {
		t.Fatal(err)
	}
	find := func(project, volume string) string {
		t.Helper()
		got, err := e.FindVolume(ctx, engine.Name("catalog", inst, project, volume), labelsOf(project), engine.LegacyCatalogVolumes(inst, project, volume)...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := find("x", "memory-data"); got != legacy[1] {
		t.Errorf("project x's volume is %q, want its legacy volume %q adopted", got, legacy[1])
	}
	if got, want := find("x-memory", "data"), engine.Name("catalog", inst, "x-memory", "data"); got != want {
		t.Errorf("project x-memory's volume is %q, want the new name %q, not project x's legacy volume", got, want)
	}
	// Once the new name exists it is the volume, legacy or not.
	if err := e.CreateVolume(ctx, engine.Name("catalog", inst, "x", "memory-data"), labelsOf("x")); err != nil {
		t.Fatal(err)
	}
	if got, want := find("x", "memory-data"), engine.Name("catalog", inst, "x", "memory-data"); got != want {
		t.Errorf("with the new name made, the volume is %q, want %q", got, want)
	}
	// Another instance's legacy volume (the old scheme's first form had
	// no instance) is not adopted.
	other := enginetest.New(t)
	first := engine.LegacyCatalogVolumes(inst, "y", "v")[0]
	if err := other.CreateVolume(ctx, first, labelsOf("y")); err != nil {
		t.Fatal(err)
	}
	if got, want := find("y", "v"), engine.Name("catalog", inst, "y", "v"); got != want {
		t.Errorf("project y's volume is %q, want %q, not another instance's legacy %q", got, want, first)
	}
}
