package upstreams

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// A remote upstream whose spec lists DeadlineHeader sends, on each
// request, the milliseconds its context has left; without a deadline it
// sends none, and other upstreams never send it.
func TestDeadlineHeader(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(switchboard.DeadlineHeader)
	}))
	defer srv.Close()
	send := func(ctx context.Context, deadline bool) string {
		t.Helper()
		tr := limitTransport{deadline: deadline, limit: 1 << 20, onExceed: func(error) {}, base: http.DefaultTransport}
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
		req.Header.Set(switchboard.DeadlineHeader, "0") // the spec's placeholder
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return <-got
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	ms, err := strconv.Atoi(send(ctx, true))
	if err != nil || ms <= 3000 || ms > 4000 {
		t.Errorf("with 4s left: %s = %d (%v), want a little under 4000", switchboard.DeadlineHeader, ms, err)
	}
	if h := send(context.Background(), true); h != "" {
		t.Errorf("without a deadline: %s = %q, want none", switchboard.DeadlineHeader, h)
	}
	if h := send(ctx, false); h != "0" {
		t.Errorf("an upstream that did not ask: %s = %q, want its own header untouched", switchboard.DeadlineHeader, h)
	}
}
