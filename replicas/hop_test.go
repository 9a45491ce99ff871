package replicas

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// A hop is bounded by the time left it carries, and by 30 s when it
// carries none or nonsense.
func TestHopContext(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{{"1500", 1500 * time.Millisecond}, {"", DefaultHop}, {"-5", DefaultHop}, {"soon", DefaultHop}} {
		r := httptest.NewRequest("POST", "/internal/x", nil)
		if tc.header != "" {
			r.Header.Set(switchboard.DeadlineHeader, tc.header)
		}
		ctx, cancel := HopContext(r)
		d, ok := ctx.Deadline()
		cancel()
		if left := time.Until(d); !ok || left > tc.want || left < tc.want-time.Second {
			t.Errorf("%s %q: deadline in %s, want about %s", switchboard.DeadlineHeader, tc.header, left, tc.want)
		}
	}
}

// The internal endpoint answers only the replicas' token.
func TestReplicaOnly(t *testing.T) {
	h := ReplicaOnly("tok-0123456789", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for _, tc := range []struct {
		token string
		want  int
	}{{"tok-0123456789", http.StatusTeapot}, {"", http.StatusUnauthorized}, {"tok-012345678", http.StatusUnauthorized}, {"tok-0123456789x", http.StatusUnauthorized}} {
		r := httptest.NewRequest("POST", "/internal/x", nil)
		r.Header.Set(switchboard.ReplicaTokenHeader, tc.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("token %q: HTTP %d, want %d", tc.token, w.Code, tc.want)
		}
	}
	w := httptest.NewRecorder()
	ReplicaOnly("", h).ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("an empty token let a request through: HTTP %d", w.Code)
	}
}
