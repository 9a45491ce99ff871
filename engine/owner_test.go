package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
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

// TestStoreIdentity: two gateways given one instance name on two stores
// (issue 33). Everything each makes carries its store's identity; each
// lists, sweeps, adopts and counts only its own, whatever alive says of
// the other's owner, and warns once that the other is there. An object
// from before the store label (none on it) counts as this store's, and a
// container of it goes only when its owner is dead.
func TestStoreIdentity(t *testing.T) {
	base := enginetest.New(t)
	img := enginetest.GoImage(t, base, fixture)
	ctx := ctxT(t)
	logs := &testenv.Buffer{}
	as := func(store, owner string, log *slog.Logger) *engine.Engine {
		e, err := engine.New(engine.Options{Instance: base.Instance(), Store: store, Owner: owner, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a := as("store-a", "a", slog.New(slog.NewTextHandler(logs, nil)))
	b := as("store-b", "b", nil)
	oldLive, oldDead := as("", "old-live", nil), as("", "old-dead", nil)
	create := func(e *engine.Engine) string {
		id, err := e.Create(ctx, engine.Spec{Image: img, Stdin: true, Labels: map[string]string{engine.LabelKind: "k", engine.LabelProject: "p", engine.LabelStore: "forged"}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	mine, theirs, legacyLive, legacyDead := create(a), create(b), create(oldLive), create(oldDead)
	if st, err := a.Inspect(ctx, mine); err != nil || st.Labels[engine.LabelStore] != "store-a" {
		t.Fatalf("store label %q, %v; want the engine's store, not the caller's", st.Labels[engine.LabelStore], err)
	}
	if st, err := a.Inspect(ctx, legacyLive); err != nil || st.Labels[engine.LabelStore] != "" {
		t.Fatalf("a storeless engine's container carries store %q, %v", st.Labels[engine.LabelStore], err)
	}
	ids := func(e *engine.Engine) []string {
		list, err := e.List(ctx, nil)
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
	if got, want := ids(a), sorted(mine, legacyLive, legacyDead); !slices.Equal(got, want) {
		t.Errorf("A lists %v, want its own and the storeless %v", got, want)
	}

	// Every owner but the legacy live one is dead to A, B's included.
	alive := func(_ context.Context, owner string) (bool, error) { return owner == "old-live", nil }
	for range 3 {
		if _, err := a.Sweep(ctx, alive); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := ids(base), sorted(mine, theirs, legacyLive); !slices.Equal(got, want) {
		t.Errorf("after A's sweeps the instance holds %v, want %v (B's and the live storeless one kept)", got, want)
	}
	if _, err := a.TakeOver(ctx, map[string]string{engine.LabelKind: "k"}); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(base), sorted(theirs); !slices.Equal(got, want) {
		t.Errorf("after A's take-over the instance holds %v, want B's %v", got, want)
	}
	if n := strings.Count(logs.String(), "another gateway uses this instance name"); n != 1 {
		t.Errorf("A warned %d times of B's store, want once:\n%s", n, logs.String())
	}

	// Volumes: B's is neither listed nor reused by A.
	vol := base.Instance() + "-v"
	if err := b.CreateVolume(ctx, vol, map[string]string{engine.LabelProject: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := a.CreateVolume(ctx, vol, nil); !errors.Is(err, switchboard.ErrConflict) {
		t.Errorf("A creating B's volume: %v, want ErrConflict", err)
	}
	if vs, err := a.ListVolumes(ctx, nil); err != nil || len(vs) != 0 {
		t.Errorf("A lists volumes %v, %v; want none", vs, err)
	}
	if vs, err := b.ListVolumes(ctx, nil); err != nil || len(vs) != 1 || vs[0].Labels[engine.LabelStore] != "store-b" {
		t.Errorf("B lists volumes %v, %v; want its one, labelled with its store", vs, err)
	}
	if c, v, err := a.ProjectObjects(ctx, "p"); err != nil || c != 0 || v != 0 {
		t.Errorf("A counts %d containers, %d volumes, %v of B's; want none", c, v, err)
	}
	if c, v, err := b.ProjectObjects(ctx, "p"); err != nil || c != 1 || v != 1 {
		t.Errorf("B counts %d containers, %d volumes, %v; want its 1 and 1", c, v, err)
	}
}
