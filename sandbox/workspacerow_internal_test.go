package sandbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// TestAttachHistoryBounded: the row keeps the last maxAttaches attaches,
// oldest first, and they survive the row's JSON.
func TestAttachHistoryBounded(t *testing.T) {
	var cfg workspaceConfig
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range maxAttaches + 5 {
		cfg.recordAttach(switchboard.AttachEvent{Previous: fmt.Sprint("a", i-1), Holder: fmt.Sprint("a", i), At: t0.Add(time.Duration(i) * time.Second)})
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

// TestMissingImage: with the default name, building the image is the
// whole fix; with another, the variable must then name the build's tag.
func TestMissingImage(t *testing.T) {
	def := switchboard.Message(missingImage(ImageRepository+":latest", "template python", "MCP_SERVER_SANDBOX_IMAGE_PYTHON"))
	if !strings.Contains(def, "sandbox build-image") || strings.Contains(def, "MCP_SERVER_SANDBOX_IMAGE_PYTHON") {
		t.Errorf("default image: %q; want build-image alone", def)
	}
	other := switchboard.Message(missingImage("mine:1", "template node", "MCP_SERVER_SANDBOX_IMAGE_NODE"))
	if !strings.Contains(other, "sandbox build-image") || !strings.Contains(other, "MCP_SERVER_SANDBOX_IMAGE_NODE") {
		t.Errorf("another image: %q; want the build and the variable", other)
	}
}
