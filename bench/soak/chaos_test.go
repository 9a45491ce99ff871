package soak

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// flaky wraps a streamable-HTTP fixture: each tools/call POST is, at
// random, answered 5xx, stalled for longer than the gateway's call timeout
// (until the gateway gives up on it or stall passes), or answered 404
// after the fixture forgot the session (like a restarted server). Every
// other request (initialize, notifications, the GET stream, DELETE)
// passes, except that stallCancels stalls every notifications/cancelled.
type flaky struct {
	h       http.Handler
	p5xx    float64
	pStall  float64
	pForget float64
	stall   time.Duration
	// stallCancels also stalls notifications/cancelled (SOAK_STALL_CANCEL=1).
	stallCancels bool
	quit         chan struct{} // closed at teardown: releases stalls
	fivexx       atomic.Int64
	stalls       atomic.Int64
	outlasted    atomic.Int64 // stalls the gateway did not abandon within stall
	forgotten    atomic.Int64

	mu  sync.Mutex
	rng *rand.Rand
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.h.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	if msg.Method == "notifications/cancelled" && f.stallCancels {
		// An upstream stuck hard enough to stall the call stalls the
		// cancellation notification that follows it too.
		f.stalls.Add(1)
		t := time.NewTimer(f.stall)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-f.quit:
		case <-t.C:
		}
		http.Error(w, "injected stall", http.StatusGatewayTimeout)
		return
	}
	if msg.Method != "tools/call" {
		f.h.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	x := f.rng.Float64()
	f.mu.Unlock()
	switch {
	case x < f.p5xx:
		f.fivexx.Add(1)
		codes := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}
		http.Error(w, "injected failure", codes[int(x*1e6)%len(codes)])
	case x < f.p5xx+f.pStall:
		f.stalls.Add(1)
		t := time.NewTimer(f.stall)
		defer t.Stop()
		select {
		case <-r.Context().Done():
		case <-f.quit:
		case <-t.C:
			f.outlasted.Add(1)
		}
		http.Error(w, "injected stall", http.StatusGatewayTimeout)
	case x < f.p5xx+f.pStall+f.pForget && r.Header.Get("Mcp-Session-Id") != "":
		f.forgotten.Add(1)
		del := httptest.NewRequest(http.MethodDelete, "/", nil)
		del.Header = r.Header.Clone()
		f.h.ServeHTTP(httptest.NewRecorder(), del)
		http.Error(w, "session not found", http.StatusNotFound)
	default:
		f.h.ServeHTTP(w, r)
	}
}

// outage answers 503 to every request while down is set: an SSE upstream
// that cannot be reached, so reconnects fail and its breaker opens.
type outage struct {
	h    http.Handler
	down atomic.Bool
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.down.Load() {
		http.Error(w, "injected outage", http.StatusServiceUnavailable)
		return
	}
	o.h.ServeHTTP(w, r)
}

// fixtureChildren returns the pids of this process's children that are
// stdio fixtures (SWITCHBOARD_FIXTURE=stdio in their environment).
func fixtureChildren() []int {
	var out []int
	for _, pid := range children() {
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err != nil {
			continue // gone meanwhile, or a zombie
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if string(kv) == mcptest.EnvFixture+"=stdio" {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// children returns the pids of every child of this process, zombies
// included (a child that was never reaped is a leak too).
func children() []int {
	self := os.Getpid()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// counters are the resources that must return to their baseline.
type counters struct {
	goroutines, fds, children int
}

func measure() counters {
	fds := -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents)
	}
	return counters{goroutines: runtime.NumGoroutine(), fds: fds, children: len(children())}
}

func (c counters) within(base counters) bool {
	return c.goroutines <= base.goroutines && c.fds <= base.fds && c.children <= base.children
}

// tail keeps the last max bytes written to it (the gateway's log).
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.max {
		return string(t.buf[len(t.buf)-t.max:])
	}
	return string(t.buf)
}
