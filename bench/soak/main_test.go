// Package soak is a long-running chaos test of the switchboard gateway: an
// in-process gateway in front of stdio, legacy SSE and streamable-HTTP
// fixture servers, driven by concurrent go-sdk client sessions while its
// upstreams are killed, dropped, fail with 5xx and stall. It runs only when
// asked:
//
//	go test -run TestSoak -count=1 ./bench/soak -soak=60s -v
//
// (or with SOAK_DURATION=60s); otherwise TestSoak is skipped. SOAK_SEED
// replays a run's random choices (chaos timing is still wall-clock), and
// SOAK_STALL_CANCEL=1 also stalls the notifications/cancelled that follow a
// stalled call on the streamable upstream.
package soak

import (
	"flag"
	"os"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

var soakFlag = flag.Duration("soak", 0, "run TestSoak for this long (also SOAK_DURATION); 0 skips it")

func TestMain(m *testing.M) {
	// The stdio upstreams are this very binary, re-executed as the fixture.
	mcptest.RunIfChild()
	os.Exit(m.Run())
}

// soakDuration is how long TestSoak runs, or 0 when it should be skipped.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if *soakFlag > 0 {
		return *soakFlag
	}
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			t.Fatalf("invalid SOAK_DURATION=%q: want a Go duration such as 60s", v)
		}
		return d
	}
	return 0
}
