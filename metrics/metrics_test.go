package metrics

import (
	"bytes"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// TestToolLabelEscaped (issue 20, item 18): a tool name with a NUL from
// an upstream is counted under its escaped spelling; no raw NUL reaches
// the exposition.
func TestToolLabelEscaped(t *testing.T) {
	m := New()
	m.ObserveCall(switchboard.ToolCallRecord{ProjectID: "default", Server: "up", Tool: "nul\x00name", Outcome: switchboard.OutcomeOK})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if bytes.IndexByte(body, 0) >= 0 {
		t.Error("the exposition carries a raw NUL")
	}
	want := `switchboard_tool_calls_total{outcome="ok",project="default",server="up",tool="\"nul\\x00name\""} 1`
	if !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %s", want)
	}
}
