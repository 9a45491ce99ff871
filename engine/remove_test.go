package engine_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
)

// TestRemoveRacesRemove: of two removals of one running container at
// once (a sweep and a take-over on replicas sharing the engine), each
// returns only once the container is gone, so its name is free for the
// container that replaces it: the one that finds a removal in progress
// waits for it.
func TestRemoveRacesRemove(t *testing.T) {
	e := enginetest.New(t)
	img := enginetest.GoImage(t, e, fixture)
	ctx := ctxT(t)
	for i := range 8 {
		name := fmt.Sprintf("%s-race-%d", e.Instance(), i)
		id, err := e.Create(ctx, engine.Spec{Name: name, Image: img, Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k := range errs {
			wg.Go(func() {
				if errs[k] = e.Remove(ctx, id); errs[k] != nil {
					return
				}
				if _, err := e.Inspect(ctx, id); !errors.Is(err, switchboard.ErrNotFound) {
					errs[k] = fmt.Errorf("the container is still there once Remove returned (inspect: %v)", err)
				}
			})
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("round %d, remover %d: %v", i, k, err)
			}
		}
	}
}
