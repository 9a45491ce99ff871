package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// BenchmarkStartSteps takes a cold session start apart (issue 26), on a
// plain and on a sized workspace (an ext4 image on a loop device): the
// steps of create (timed where they run), the first command, then
// stopping the session and removing its workspace; p50, min and max of
// BENCH_START_STEPS (default 12) starts each, printed. It lives here,
// not in bench/, because the steps are the package's own.
//
//	go test -run '^$' -bench StartSteps -benchtime 1x ./sandbox
func BenchmarkStartSteps(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once per benchmark call; use -benchtime 1x")
	}
	n, err := strconv.Atoi(os.Getenv("BENCH_START_STEPS"))
	if err != nil || n < 1 {
		n = 12
	}
	base := enginetest.New(b)
	built, err := (&Builder{Engine: base}).Build(context.Background())
	if err != nil {
		testenv.Need(b, "docker", false, "building the sandbox image: "+err.Error())
		return
	}
	sizedEngine, _ := enginetest.Disks(b, base)
	ctx := context.Background()
	var out strings.Builder
	for _, sized := range []bool{false, true} {
		opts := Options{Engine: base, ImagePython: built.Ref, ImageNode: built.Ref, MaxSessions: 1000, WorkspaceBytes: -1}
		if sized {
			opts.Engine, opts.WorkspaceBytes = sizedEngine, 1<<30
		}
		svc := New(opts)
		var mu sync.Mutex
		steps := map[string][]time.Duration{}
		var order []string
		add := func(name string, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := steps[name]; !ok {
				order = append(order, name)
			}
			steps[name] = append(steps[name], d)
		}
		svc.step = add
		for range n {
			t0 := time.Now()
			x, err := svc.create(ctx, "p", "", "python", "small")
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			res, err := svc.run(ctx, x, "", request{tool: ToolExecuteCommand, argv: []string{"true"}, workingDir: ".", timeout: 10 * time.Second}, true, nil, false)
			if err != nil || !res.Success {
				b.Fatalf("first command: %+v %v", res, err)
			}
			add("first command", time.Since(t1))
			add("new session to first answer", time.Since(t0))
			t2 := time.Now()
			if err := svc.stop(ctx, x, "bench"); err != nil {
				b.Fatal(err)
			}
			add("stop (container removed)", time.Since(t2))
			t3 := time.Now()
			if err := svc.removeWorkspace(ctx, x.workspaceID, x.volume); err != nil {
				b.Fatal(err)
			}
			add("workspace removed", time.Since(t3))
		}
		_ = svc.Close(ctx)
		kind := "plain"
		if sized {
			kind = "sized"
		}
		fmt.Fprintf(&out, "%s workspace, %d starts:\n", kind, n)
		for _, name := range order {
			d := steps[name]
			slices.Sort(d)
			fmt.Fprintf(&out, "  %-38s p50 %7.1f ms  min %7.1f  max %7.1f\n", name, ms(d[len(d)/2]), ms(d[0]), ms(d[len(d)-1]))
		}
	}
	fmt.Print(out.String())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
