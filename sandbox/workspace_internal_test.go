package sandbox

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestAttachHistoryBounded: the row keeps the last maxAttaches attaches,
// oldest first, and they survive the row's JSON.
func TestAttachHistoryBounded(t *testing.T) {
	var cfg workspaceConfig
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxAttaches + 5 {
		cfg.recordAttach(AttachEvent{Previous: fmt.Sprint("a", i-1), Holder: fmt.Sprint("a", i), At: t0.Add(time.Duration(i) * time.Second)})
	}
	raw, _ := json.Marshal(cfg)
	var back workspaceConfig
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if n := len(back.Attaches); n != maxAttaches {
		t.Fatalf("history of %d, want %d", n, maxAttaches)
	}
	first, last := back.Attaches[0], back.Attaches[maxAttaches-1]
	if first.Holder != "a5" || first.Previous != "a4" || last.Holder != fmt.Sprint("a", maxAttaches+4) || !last.At.Equal(t0.Add(time.Duration(maxAttaches+4)*time.Second)) {
		t.Fatalf("history kept %+v ... %+v", first, last)
	}
}
