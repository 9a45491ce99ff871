package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

const fixturePkg = "github.com/switchboard-mcp/switchboard/internal/mcptest/mcpfixture"

// BenchmarkHostedEcho compares, in one run, the echo tool of the
// mcpfixture binary served through the gateway two ways: as a hosted
// server (the binary in a FROM-scratch container, MCP over the attach
// stream, calls serialized) and as a plain stdio upstream (the same
// binary as a child process). BENCH_HOSTED_SESSIONS (default 1) client
// sessions call concurrently; with more, the hosted line shows the cost of
// serializing calls on one stdio stream. Needs the Docker engine (skips
// without one). Target: hosted >= 0.8x stdio calls/s.
func BenchmarkHostedEcho(b *testing.B) {
	sessions := envInt("BENCH_HOSTED_SESSIONS", 1)
	eng := enginetest.New(b)
	image := enginetest.GoImage(b, eng, fixturePkg)

	dir := b.TempDir() // the hosted rows' store, for the whole benchmark
	bin := filepath.Join(dir, "mcpfixture")
	cmd := exec.Command("go", "build", "-o", bin, fixturePkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build fixture: %v\n%s", err, out)
	}

	var stdioGW, hostedGW *gateway
	var svc *hosted.Service
	var st *sqlite.Store
	defer func() {
		if stdioGW != nil {
			stdioGW.Close()
		}
		if hostedGW != nil {
			hostedGW.Close()
		}
		if svc != nil {
			_ = svc.Close(context.Background())
		}
		if st != nil {
			_ = st.Close()
		}
	}()
	b.Run("stdio-fixture", func(b *testing.B) {
		if stdioGW == nil {
			var err error
			stdioGW, err = startGateway([]switchboard.ServerSpec{{Name: "fixture", Transport: switchboard.TransportStdio, Command: bin}})
			if err != nil {
				b.Fatal(err)
			}
		}
		benchEcho(b, "stdio-fixture", stdioGW.URL, sessions, 0)
	})
	b.Run("hosted-fixture", func(b *testing.B) {
		if hostedGW == nil {
			ctx := context.Background()
			var err error
			if st, err = sqlite.Open(ctx, dir); err != nil {
				b.Fatal(err)
			}
			if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
				b.Fatal(err)
			}
			var gw *gateway
			svc = hosted.New(hosted.Options{Engine: eng, Store: st,
				Upstreams: func(string) (hosted.Upstreams, error) { return gw.mgr, nil },
				Changed:   func(ctx context.Context, _ string) { gw.mgr.Apply(ctx, svc.Specs("default")) },
				Timing:    hosted.Timing{Heartbeat: -1}})
			gw, err = startGatewayWith(nil, svc.Opener("default"))
			if err != nil {
				b.Fatal(err)
			}
			hostedGW = gw
			if err := svc.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Register(ctx, "default", switchboard.HostedRegistration{Name: "fixture", Image: image}); err != nil {
				b.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if _, err := svc.WaitStatus(wctx, "default", "fixture", func(s switchboard.HostedStatus) bool { return s.Status == switchboard.HostedRunning }); err != nil {
				b.Fatal(err)
			}
		}
		benchEcho(b, "hosted-fixture", hostedGW.URL, sessions, 0)
		if s, ok := summary.getEcho("stdio-fixture"); ok && s.rate > 0 {
			h, _ := summary.getEcho("hosted-fixture")
			summary.set("echo/hosted-ratio", fmt.Sprintf("echo ratio hosted/stdio calls/s: %.0f / %.0f = %.3f  p50 %.0f µs vs %.0f µs  (target >= 0.8: %s)",
				h.rate, s.rate, h.rate/s.rate, us(h.lat.p50), us(s.lat.p50), verdict(h.rate/s.rate >= 0.8)))
		}
	})
}
