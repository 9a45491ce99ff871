package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/engine/enginetest"
	"github.com/switchboard-mcp/switchboard/sandbox/sandboxtest"
)

// BenchmarkSandboxStart measures what an agent waits for when it starts
// a sandbox session: a tools/call execute_command `true` without
// session_id, through a separately built and started gateway over HTTP
// (the light benchmark's raw client: plain POSTs, keep-alive), from the
// request to the answer of that first command. Two gateways run side by
// side, "warm" (MCP_SERVER_SANDBOX_WARM_POOL=1) and "cold" (0), with
// rounds alternating between them; each session is stopped (untimed)
// before the next, and every call waits, untimed, until the warm
// gateway's pool has a container ready again (so its refill never runs
// beside a measured start). BENCH_SANDBOX_STARTS (default 20) sessions
// per gateway; p50/p90/p99 and warm/cold p50. BENCH_SANDBOX_BASELINE=
// path/to/switchboard adds that build as "before" (a build without the
// pool starts every session cold), so cold starts compare with it in
// the same run.
func BenchmarkSandboxStart(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once per benchmark call; use -benchtime 1x")
	}
	n := envInt("BENCH_SANDBOX_STARTS", 20)
	e := enginetest.New(b)
	img := sandboxtest.Image(b, e)
	dir := b.TempDir()
	bin, err := buildGateway(dir)
	if err != nil {
		b.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	type target struct {
		name string
		gw   *gatewayProc
		c    *rawClient
		sid  string
		durs []time.Duration
	}
	hc := &http.Client{Transport: newTransport(2)}
	var targets []*target
	names := []string{"warm", "cold"}
	baseline := os.Getenv("BENCH_SANDBOX_BASELINE")
	if baseline != "" {
		names = append(names, "before")
	}
	for _, name := range names {
		pool, gwBin := "1", bin
		switch name {
		case "cold":
			pool = "0"
		case "before":
			pool, gwBin = "0", baseline
		}
		inst := "bench-sbx-" + name + "-" + strings.TrimPrefix(e.Instance(), "test-")
		ge, err := engine.New(engine.Options{Instance: inst})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { enginetest.Cleanup(b, ge); _ = ge.Close() })
		gw, err := startGatewayProc(gwBin, filepath.Join(dir, name), "MCP_SERVER_SANDBOX=true", "MCP_SERVER_INSTANCE="+inst,
			"MCP_SERVER_SANDBOX_IMAGE_PYTHON="+img, "MCP_SERVER_SANDBOX_IMAGE_NODE="+img, "MCP_SERVER_SANDBOX_MAX_SESSIONS=10",
			"MCP_SERVER_SANDBOX_WORKSPACE_RETENTION=0", "MCP_SERVER_SANDBOX_WARM_POOL="+pool)
		if err != nil {
			b.Fatal(err)
		}
		defer gw.stop()
		t := &target{name: name, gw: gw, c: &rawClient{hc: hc, url: gw.URL}}
		var buf bytes.Buffer
		if t.sid, err = t.c.openSession(ctx, &buf); err != nil {
			b.Fatal(err)
		}
		targets = append(targets, t)
	}
	// One session each first (untimed): the warm gateway's pool exists
	// once the project started a session.
	for _, t := range targets {
		sb, _, err := sandboxCall(ctx, t.c, t.sid, startBody)
		if err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
		if _, _, err := sandboxCall(ctx, t.c, t.sid, stopBody(sb)); err != nil {
			b.Fatalf("%s: stop: %v", t.name, err)
		}
	}
	for i := range n {
		for _, t := range targets {
			// Before either gateway's call: the warm one's refill after
			// its last take must not run beside the cold one's start.
			if err := waitWarm(ctx, hc, targets[0].gw); err != nil {
				b.Fatalf("round %d: %v", i, err)
			}
			start := time.Now()
			sb, body, err := sandboxCall(ctx, t.c, t.sid, startBody)
			d := time.Since(start)
			if err != nil {
				b.Fatalf("%s, round %d: %v", t.name, i, err)
			}
			if !bytes.Contains(body, []byte(`\"success\":true`)) && !bytes.Contains(body, []byte(`"success":true`)) {
				b.Fatalf("%s, round %d: the command failed: %.400s", t.name, i, body)
			}
			t.durs = append(t.durs, d)
			if _, _, err := sandboxCall(ctx, t.c, t.sid, stopBody(sb)); err != nil {
				b.Fatalf("%s, round %d: stop: %v", t.name, i, err)
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "sandbox session start through the gateway over HTTP: tools/call execute_command `true` without session_id, %d sessions per gateway, rounds alternating\n", n)
	fmt.Fprintf(&out, "%-6s %10s %10s %10s %10s\n", "", "p50 ms", "p90 ms", "p99 ms", "max ms")
	p50 := map[string]float64{}
	for _, t := range targets {
		l := summarize(t.durs)
		p90 := t.durs[int(0.9*float64(len(t.durs)-1)+0.5)]
		p50[t.name] = us(l.p50) / 1000
		fmt.Fprintf(&out, "%-6s %10.1f %10.1f %10.1f %10.1f\n", t.name, us(l.p50)/1000, us(p90)/1000, us(l.p99)/1000, us(l.max)/1000)
		b.ReportMetric(us(l.p50)/1000, t.name+"-p50-ms")
		b.ReportMetric(us(p90)/1000, t.name+"-p90-ms")
		b.ReportMetric(us(l.p99)/1000, t.name+"-p99-ms")
	}
	fmt.Fprintf(&out, "warm/cold p50: %.3f\n", p50["warm"]/p50["cold"])
	if baseline != "" {
		fmt.Fprintf(&out, "cold/before p50: %.3f\n", p50["cold"]/p50["before"])
		b.ReportMetric(p50["cold"]/p50["before"], "cold/before-p50")
	}
	b.ReportMetric(p50["warm"]/p50["cold"], "warm/cold-p50")
	summary.set("sandbox-start", out.String())
}

var (
	startBody = []byte(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"execute_command","arguments":{"command":"true"}}}`)
	sessionRE = regexp.MustCompile(`session_id\\?":\s*\\?"(sbx-[0-9a-f]+)`)
)

func stopBody(sid string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"stop_session","arguments":{"session_id":"` + sid + `"}}}`)
}

// sandboxCall posts one tools/call and returns the sandbox session id its
// answer names, and the answer.
func sandboxCall(ctx context.Context, c *rawClient, sid string, body []byte) (string, []byte, error) {
	var buf bytes.Buffer
	_, status, err := c.post(ctx, sid, body, &buf)
	if err != nil {
		return "", nil, err
	}
	if status != http.StatusOK || bytes.Contains(buf.Bytes(), []byte(`"error"`)) || bytes.Contains(buf.Bytes(), []byte(`"isError":true`)) {
		return "", nil, fmt.Errorf("status %d: %.400s", status, buf.String())
	}
	m := sessionRE.FindSubmatch(buf.Bytes())
	if m == nil {
		return "", nil, fmt.Errorf("no session id in %.400s", buf.String())
	}
	return string(m[1]), buf.Bytes(), nil
}

// waitWarm polls the gateway's status until its sandbox has a warm
// container ready.
func waitWarm(ctx context.Context, hc *http.Client, p *gatewayProc) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Base+"/", nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		var st struct {
			Sandbox struct {
				Warm int `json:"warm"`
			} `json:"sandbox"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if st.Sandbox.Warm > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no warm container within 60s\n%s", p.stderr)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}
