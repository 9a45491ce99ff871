package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
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

// BenchmarkAttachRelay takes the hosted path apart from the gateway: the
// same mcpfixture binary answers tools/call echo over raw JSON-RPC lines
// (no gateway, no HTTP), one call at a time, two ways in one run:
//
//   - pipe: the binary as a child process, its stdin and stdout pipes;
//   - attach: the binary in a container, through engine.Stream (Docker's
//     attach: the hijacked connection to dockerd, stdout demultiplexed
//     from stderr by stdcopy in a goroutine feeding an io.Pipe).
//
// Per mode it prints the round trip's p50/p99 and the CPU per round trip
// of this process (the relay's own share: stdcopy, the pipe, the
// goroutine hops) and of dockerd, containerd and the containerd shims
// (from /proc; what Docker's side of attach costs). BENCH_ATTACH_SECONDS
// (default 3) per mode. Needs the Docker engine (skips without one).
func BenchmarkAttachRelay(b *testing.B) {
	secs := envInt("BENCH_ATTACH_SECONDS", 3)
	eng := enginetest.New(b)
	image := enginetest.GoImage(b, eng, fixturePkg)
	bin := filepath.Join(b.TempDir(), "mcpfixture")
	cmd := exec.Command("go", "build", "-o", bin, fixturePkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build fixture: %v\n%s", err, out)
	}
	relay := filepath.Join(b.TempDir(), "sockrelay")
	cmd = exec.Command("go", "build", "-o", relay, "github.com/switchboard-mcp/switchboard/internal/mcptest/sockrelay")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build sockrelay: %v\n%s", err, out)
	}
	ctx := context.Background()
	rounds := envInt("BENCH_ATTACH_ROUNDS", 1)
	for range b.N {
		for r := range rounds {
			for _, mode := range []string{"pipe", "attach", "socket"} {
				var w io.Writer
				var rd io.Reader
				var closeFn func()
				switch mode {
				case "pipe":
					c := exec.Command(bin)
					in, _ := c.StdinPipe()
					out, _ := c.StdoutPipe()
					if err := c.Start(); err != nil {
						b.Fatal(err)
					}
					w, rd = in, out
					closeFn = func() { _ = in.Close(); _ = c.Wait() }
				case "attach":
					run, err := eng.Launch(ctx, engine.Spec{Image: image, Stdin: true, Network: "none",
						Labels: map[string]string{engine.LabelKind: "bench"}}, nil)
					if err != nil {
						b.Fatal(err)
					}
					w, rd = run.Stream, run.Stream
					closeFn = func() { _ = eng.Remove(ctx, run.ID); run.Stream.Close() }
				case "socket":
					dir, err := os.MkdirTemp("", "sockrelay")
					if err != nil {
						b.Fatal(err)
					}
					_ = os.Chmod(dir, 0o777)
					if out, err := exec.Command("cp", relay, dir+"/sockrelay").CombinedOutput(); err != nil {
						b.Fatalf("cp: %v %s", err, out)
					}
					id, err := eng.Create(ctx, engine.Spec{Image: image, Network: "none", Entrypoint: []string{"/relay/sockrelay"}, Cmd: []string{"/relay/s.sock", "/server"},
						Binds: []engine.Bind{{HostPath: dir, Target: "/relay"}}, Labels: map[string]string{engine.LabelKind: "bench"}})
					if err != nil {
						b.Fatal(err)
					}
					if err := eng.Start(ctx, id); err != nil {
						b.Fatal(err)
					}
					var c net.Conn
					for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
						if c, err = net.Dial("unix", dir+"/s.sock"); err == nil || time.Now().After(deadline) {
							break
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					w, rd = c, c
					closeFn = func() { _ = c.Close(); _ = eng.Remove(ctx, id); _ = os.RemoveAll(dir) }
				}
				lat, cpu := relayLoop(b, w, bufio.NewReaderSize(rd, 64<<10), time.Duration(secs)*time.Second)
				closeFn()
				l := summarize(lat)
				n := float64(len(lat))
				fmt.Printf("attach relay round %d %-6s %6d calls  p50 %5.0f µs  p99 %5.0f µs  CPU µs/call: this process %5.1f, dockerd %5.1f, containerd %5.1f, shims %5.1f\n",
					r+1, mode, len(lat), us(l.p50), us(l.p99), us(cpu["self"])/n, us(cpu["dockerd"])/n, us(cpu["containerd"])/n, us(cpu["containerd-shim"])/n)
			}
		}
	}
}

// relayLoop initializes the fixture over w/r and calls echo for d,
// returning each call's round trip and the CPU used meanwhile by this
// process and by Docker's processes, by name.
func relayLoop(b *testing.B, w io.Writer, r *bufio.Reader, d time.Duration) ([]time.Duration, map[string]time.Duration) {
	b.Helper()
	send := func(s string) {
		if _, err := io.WriteString(w, s+"\n"); err != nil {
			b.Fatal(err)
		}
	}
	recv := func() string {
		line, err := r.ReadString('\n')
		if err != nil {
			b.Fatalf("read: %v (%q)", err, line)
		}
		return line
	}
	send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	cpu0 := dockerCPU()
	cpu0["self"] = selfCPU()
	var lat []time.Duration
	for i, end := 1, time.Now().Add(d); time.Now().Before(end); i++ {
		t0 := time.Now()
		send(`{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		if line := recv(); !strings.Contains(line, `"hi"`) {
			b.Fatalf("answer %q", line)
		}
		lat = append(lat, time.Since(t0))
	}
	cpu := dockerCPU()
	cpu["self"] = selfCPU()
	for k := range cpu {
		cpu[k] -= cpu0[k]
	}
	return lat, cpu
}

// dockerCPU is the CPU time used so far by dockerd, containerd and all
// containerd shims together, from /proc.
func dockerCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if strings.HasPrefix(name, "containerd-shim") {
			name = "containerd-shim"
		}
		switch name {
		case "dockerd", "containerd", "containerd-shim":
			if c, err := procCPU(pid); err == nil {
				out[name] += c
			}
		}
	}
	return out
}
