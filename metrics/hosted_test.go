package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

func TestHostedSeries(t *testing.T) {
	m := New()
	m.Hosted(func() []switchboard.HostedStatus {
		return []switchboard.HostedStatus{{Project: "default", Name: "notes", Status: switchboard.HostedBackoff, RestartCount: 5, CrashCount: 4}}
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`switchboard_hosted_state{project="default",server="notes",state="backoff"} 1`,
		`switchboard_hosted_state{project="default",server="notes",state="running"} 0`,
		`switchboard_hosted_restarts{project="default",server="notes"} 5`,
		`switchboard_hosted_crashes{project="default",server="notes"} 4`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
