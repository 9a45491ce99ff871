package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestOwnership: containers carry the owner id of the process that made
// them; RemoveOwned removes only the caller's, Sweep only those whose
// owner is not alive (and ownerless ones), never a live owner's or its
// own, and volumes carry no owner.
func TestOwnership(t *testing.T) {
	base := enginetest.New(t)
	img := enginetest.GoImage(t, base, fixture)
	ctx := ctxT(t)
	as := func(owner string) *engine.Engine {
		e, err := engine.New(engine.Options{Instance: base.Instance(), Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	me, live, dead, none := as("me"), as("live"), as("dead"), as("")
	create := func(e *engine.Engine, kind string) string {
		id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, Labels: map[string]string{engine.LabelKind: kind, engine.LabelOwner: "forged"}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mineA, mineB, theirs, gone, ownerless := create(me, "a"), create(me, "b"), create(live, "a"), create(dead, "a"), create(none, "a")
	if st, err := me.Inspect(ctx, mineA); err != nil || st.Labels[engine.LabelOwner] != "me" {
		t.Fatalf("owner label %q, %v; want the engine's owner, not the caller's", st.Labels[engine.LabelOwner], err)
	}
	if err := me.CreateVolume(ctx, base.Instance()+"-v", map[string]string{engine.LabelOwner: "me"}); err != nil {
		t.Fatal(err)
	}
	if v, err := me.InspectVolume(ctx, base.Instance()+"-v"); err != nil || v.Labels[engine.LabelOwner] != "" {
		t.Errorf("a volume carries owner %q, %v; want none", v.Labels[engine.LabelOwner], err)
	}

	ids := func() []string {
		list, err := base.List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range list {
			out = append(out, st.ID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s ...string) []string { slices.Sort(s); return s }

	removed, err := me.RemoveOwned(ctx, map[string]string{engine.LabelKind: "a"})
	if err != nil || !slices.Equal(removed, []string{mineA}) {
		t.Fatalf("RemoveOwned(kind a) = %v, %v; want only %s", removed, err, mineA)
	}
	alive := func(_ context.Context, owner string) (bool, error) { return owner == "live", nil }
	swept, err := me.Sweep(ctx, alive)
	if err != nil {
		t.Fatal(err)
	}
	var sweptIDs []string
	for _, st := range swept {
		sweptIDs = append(sweptIDs, st.ID)
	}
	if got, want := sorted(sweptIDs...), sorted(gone, ownerless); !slices.Equal(got, want) {
		t.Errorf("Sweep removed %v, want the dead owner's and the ownerless %v", got, want)
	}
	if got, want := ids(), sorted(mineB, theirs); !slices.Equal(got, want) {
		t.Errorf("left %v, want %v (this process's and the live owner's)", got, want)
	}
	// When aliveness cannot be told, the owner is taken to be alive.
	if swept, err := me.Sweep(ctx, func(context.Context, string) (bool, error) { return false, context.DeadlineExceeded }); err != nil || len(swept) != 0 {
		t.Errorf("Sweep with an unknown verdict removed %d, %v; want none", len(swept), err)
	}
}
