package bench

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

func TestMain(m *testing.M) {
	// The benchmarks run this very binary as their fixture server: on stdio
	// as a gateway upstream, or over HTTP as a separate "direct" process.
	mcptest.RunIfChild()
	runIfHTTPChild()
	runIfFloorChild()
	runIfMCPGoChild()
	code := m.Run()
	summary.print(os.Stdout)
	os.Exit(code)
}

// envInt reads a positive integer from the environment, or returns def.
func envInt(name string, def int) int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		fmt.Fprintf(os.Stderr, "bench: ignoring invalid %s=%q (want a positive integer); using %d\n", name, v, def)
		return def
	}
	return n
}

// summary collects one human-readable block per benchmark, keeping only
// the latest run of each (a benchmark function runs several times while
// the framework ramps b.N up; the last run is the one reported).
var summary = &report{blocks: map[string]string{}}

type report struct {
	mu     sync.Mutex
	order  []string
	blocks map[string]string
	echo   map[string]echoStats // by mode, for the gateway/direct ratio
}

func (r *report) set(key, block string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.blocks[key]; !ok {
		r.order = append(r.order, key)
	}
	r.blocks[key] = block
}

func (r *report) setEcho(mode string, s echoStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.echo == nil {
		r.echo = map[string]echoStats{}
	}
	r.echo[mode] = s
}

func (r *report) getEcho(mode string) (echoStats, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.echo[mode]
	return s, ok
}

func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.order) == 0 {
		return
	}
	fmt.Fprintln(w, "\n==== switchboard benchmark summary (last run of each benchmark) ====")
	for _, k := range r.order {
		fmt.Fprintln(w, r.blocks[k])
	}
	if g, ok := r.echo[modeGateway]; ok {
		for _, mode := range []string{modeDirect, modeDirectProc} {
			if d, ok := r.echo[mode]; ok && d.rate > 0 {
				ratio := g.rate / d.rate
				fmt.Fprintf(w, "echo ratio gateway-stdio/%s calls/s: %.0f / %.0f = %.3f  (target >= 0.75: %s)\n",
					mode, g.rate, d.rate, ratio, verdict(ratio >= 0.75))
			}
		}
	}
	fmt.Fprintln(w, "====================================================================")
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
