// Package testenv decides whether a test's outside dependency is present:
// a missing dependency skips the test on a laptop and fails it where
// SWITCHBOARD_TEST_REQUIRE names it (CI sets it for everything).
package testenv

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
)

// Required reports whether SWITCHBOARD_TEST_REQUIRE names dep (or "all").
func Required(dep string) bool {
	for _, d := range strings.Split(os.Getenv("SWITCHBOARD_TEST_REQUIRE"), ",") {
		d = strings.TrimSpace(d)
		if d == dep || d == "all" {
			return true
		}
	}
	return false
}

// Need skips t when ok is false, or fails it when dep is required.
func Need(t testing.TB, dep string, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if Required(dep) {
		t.Fatalf("%s is required (SWITCHBOARD_TEST_REQUIRE) but unavailable: %s", dep, why)
	}
	t.Skipf("%s unavailable: %s", dep, why)
}

// Buffer collects what several goroutines write (a logger's output) and
// reads it back whole; the zero value is ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
