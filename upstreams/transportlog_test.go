package upstreams

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestTransportLog: mcp-go's "server does not support listening" (a 405
// on the GET stream, which servers may answer) is logged at info, with
// the logger's attributes; its other errors stay errors.
func TestTransportLog(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(transportLog{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})}).With("server", "s")
	log.Error("server does not support listening")
	log.Error("failed to listen to server. retry in 1 second")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "server=s") ||
		!strings.Contains(lines[1], "level=ERROR") {
		t.Fatalf("logged:\n%s", buf.String())
	}
	buf.Reset()
	quiet := slog.New(transportLog{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})})
	quiet.Error("server does not support listening")
	if buf.Len() != 0 {
		t.Fatalf("logged below the handler's level: %s", buf.String())
	}
}
