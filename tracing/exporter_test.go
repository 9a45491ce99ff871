package tracing

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// secret is in the exporter's headers and URL; no error may repeat it.
const secret = "s3cret"

// collector answers export requests with answer(n, w) for the n-th
// request (from 1) and keeps what it received.
type collector struct {
	t      *testing.T
	URL    string
	answer func(n int, w http.ResponseWriter, r *http.Request)

	mu       sync.Mutex
	requests []*http.Request
	bodies   []*coltracepb.ExportTraceServiceRequest
}

func newCollector(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *collector {
	c := &collector{t: t, answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(srv.Close)
	c.URL = srv.URL + "/v1/traces?token=" + secret
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	body := new(coltracepb.ExportTraceServiceRequest)
	if err := proto.Unmarshal(raw, body); err != nil {
		c.t.Errorf("collector: the body is not an ExportTraceServiceRequest: %v", err)
	}
	c.mu.Lock()
	c.requests = append(c.requests, r)
	c.bodies = append(c.bodies, body)
	n := len(c.requests)
	c.mu.Unlock()
	c.answer(n, w, r)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// statuses answers the n-th request with codes[n-1] (the last one
// repeating), with a Retry-After header where after[n-1] is set.
func statuses(codes []int, after ...string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= len(after) && after[n-1] != "" {
			w.Header().Set("Retry-After", after[n-1])
		}
		w.WriteHeader(codes[min(n, len(codes))-1])
	}
}

// testExporter is an exporter with timings short enough for tests.
func testExporter(t *testing.T, url string) *exporter {
	e := newExporter(t.Context(), url, map[string]string{"Authorization": "Bearer " + secret}, "test")
	e.backoff, e.maxWait = time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func testSpans(names ...string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, n := range names {
		out = append(out, tracetest.SpanStub{Name: n, SpanContext: sc(traceID, spanA, 1, "", false)}.Snapshot())
	}
	return out
}

func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("error %q repeats a credential", err)
	}
}

func TestExportRequest(t *testing.T) {
	col := newCollector(t, statuses([]int{http.StatusOK}))
	e := testExporter(t, col.URL)
	if err := e.ExportSpans(t.Context(), nil); err != nil {
		t.Fatalf("ExportSpans(no spans): %v", err)
	}
	if n := col.count(); n != 0 {
		t.Fatalf("%d requests for no spans, want none", n)
	}
	if err := e.ExportSpans(t.Context(), testSpans("a", "b")); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	if n := col.count(); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	r := col.requests[0]
	got := map[string]string{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.RawQuery,
		"Content-Type": r.Header.Get("Content-Type"), "User-Agent": r.Header.Get("User-Agent"),
		"Authorization": r.Header.Get("Authorization"), "Content-Encoding": r.Header.Get("Content-Encoding"),
	}
	want := map[string]string{
		"method": "POST", "path": "/v1/traces", "query": "token=" + secret,
		"Content-Type": "application/x-protobuf", "User-Agent": "switchboard/test",
		"Authorization": "Bearer " + secret, "Content-Encoding": "",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	var names []string
	for _, s := range col.bodies[0].GetResourceSpans()[0].GetScopeSpans()[0].GetSpans() {
		names = append(names, s.GetName())
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("exported spans (-want +got):\n%s", diff)
	}
}

func TestExportStatus(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	tests := []struct {
		name     string
		codes    []int
		after    []string
		wantCode int // of the error; 0 is success
		wantReqs int
	}{
		{"ok", []int{200}, nil, 0, 1},
		{"accepted", []int{202}, nil, 0, 1},
		{"503 then ok", []int{503, 200}, nil, 0, 2},
		{"each retryable status then ok", []int{429, 502, 503, 504, 200}, nil, 0, 5},
		{"Retry-After within the cap", []int{429, 200}, []string{"0"}, 0, 2},
		{"Retry-After date in the past", []int{503, 200}, []string{past}, 0, 2},
		{"Retry-After unreadable", []int{503, 200}, []string{"soon"}, 0, 2},
		{"Retry-After beyond the cap", []int{429, 200}, []string{"3600"}, 429, 1},
		{"Retry-After date beyond the cap", []int{503, 200}, []string{future}, 503, 1},
		{"400 is final", []int{400, 200}, nil, 400, 1},
		{"401 is final", []int{401, 200}, nil, 401, 1},
		{"404 is final", []int{404, 200}, nil, 404, 1},
		{"500 is final", []int{500, 200}, nil, 500, 1},
		{"redirect followed", []int{307, 200}, nil, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := newCollector(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if tt.codes[min(n, len(tt.codes))-1] == 307 {
					w.Header().Set("Location", r.URL.String())
				}
				statuses(tt.codes, tt.after...)(n, w, r)
			})
			err := testExporter(t, col.URL).ExportSpans(t.Context(), testSpans("x"))
			var se *statusError
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Errorf("ExportSpans: %v, want success", err)
			case tt.wantCode != 0 && !errors.As(err, &se):
				t.Errorf("ExportSpans: %v, want the collector's status %d", err, tt.wantCode)
			case tt.wantCode != 0 && se.code != tt.wantCode:
				t.Errorf("ExportSpans: status %d (%v), want %d", se.code, err, tt.wantCode)
			case tt.wantCode != 0 && !strings.Contains(err.Error(), strconv.Itoa(tt.wantCode)):
				t.Errorf("error %q does not name the status %d", err, tt.wantCode)
			}
			noSecret(t, err)
			if n := col.count(); n != tt.wantReqs {
				t.Errorf("%d requests, want %d", n, tt.wantReqs)
			}
		})
	}
}

// TestExportGivesUp: a collector that stays unavailable costs one export
// its timeout at most, not more.
func TestExportGivesUp(t *testing.T) {
	col := newCollector(t, statuses([]int{http.StatusServiceUnavailable}))
	e := testExporter(t, col.URL)
	e.timeout, e.maxWait = 200*time.Millisecond, 20*time.Millisecond
	err := e.ExportSpans(t.Context(), testSpans("x"))
	var se *statusError
	if !errors.As(err, &se) || se.code != http.StatusServiceUnavailable {
		t.Fatalf("ExportSpans: %v, want the collector's 503", err)
	}
	noSecret(t, err)
	if n := col.count(); n < 2 {
		t.Errorf("%d requests, want retries", n)
	}
}

// blocking is a collector that holds every request until its client
// goes away, and reports each arrival on the returned channel.
func blocking(t *testing.T) (*collector, <-chan struct{}) {
	arrived := make(chan struct{}, 16)
	col := newCollector(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	return col, arrived
}

func TestExportCanceled(t *testing.T) {
	col, arrived := blocking(t)
	e := testExporter(t, col.URL)
	ctx, cancel := context.WithCancel(t.Context())
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { err = e.ExportSpans(ctx, testSpans("x")) })
	<-arrived
	cancel()
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ExportSpans: %v, want context.Canceled", err)
	}
	noSecret(t, err)
}

// TestExportCanceledWhileWaiting: the caller's ctx ends during the
// hour-long wait before a retry, and the export returns at once (a hang
// fails the test by its timeout).
func TestExportCanceledWhileWaiting(t *testing.T) {
	col := newCollector(t, statuses([]int{http.StatusServiceUnavailable}))
	e := testExporter(t, col.URL)
	e.timeout, e.backoff, e.maxWait = 2*time.Hour, time.Hour, time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	e.onWait = func(time.Duration) { cancel() }
	err := e.ExportSpans(ctx, testSpans("x"))
	var se *statusError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.code != http.StatusServiceUnavailable {
		t.Errorf("ExportSpans: %v, want the 503 and context.Canceled", err)
	}
	if n := col.count(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

// TestShutdownWhileWaiting: Shutdown ends the wait before a retry too.
func TestShutdownWhileWaiting(t *testing.T) {
	col := newCollector(t, statuses([]int{http.StatusServiceUnavailable}))
	e := testExporter(t, col.URL)
	e.timeout, e.backoff, e.maxWait = 2*time.Hour, time.Hour, time.Hour
	e.onWait = func(time.Duration) { _ = e.Shutdown(t.Context()) }
	err := e.ExportSpans(t.Context(), testSpans("x"))
	var se *statusError
	if !errors.Is(err, errShutdown) || !errors.As(err, &se) {
		t.Errorf("ExportSpans: %v, want the 503 and errShutdown", err)
	}
}

// TestExportBackoff: waits double from backoff up to maxWait, each
// jittered down by at most half.
func TestExportBackoff(t *testing.T) {
	col := newCollector(t, statuses([]int{503, 502, 504, 429, 200}))
	e := testExporter(t, col.URL)
	e.backoff, e.maxWait = time.Millisecond, 4*time.Millisecond
	var waits []time.Duration
	e.onWait = func(d time.Duration) { waits = append(waits, d) }
	if err := e.ExportSpans(t.Context(), testSpans("x")); err != nil {
		t.Fatalf("ExportSpans: %v", err)
	}
	ms := time.Millisecond
	want := [][2]time.Duration{{ms / 2, ms}, {ms, 2 * ms}, {2 * ms, 4 * ms}, {2 * ms, 4 * ms}}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %d", waits, len(want))
	}
	for i, w := range want {
		if waits[i] < w[0] || waits[i] > w[1] {
			t.Errorf("wait %d = %s, want %s to %s", i+1, waits[i], w[0], w[1])
		}
	}
}

// TestExportRetryAfter: a Retry-After within maxWait is the wait.
func TestExportRetryAfter(t *testing.T) {
	col := newCollector(t, statuses([]int{429}, "3"))
	e := testExporter(t, col.URL)
	e.maxWait = 5 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	var wait time.Duration
	e.onWait = func(d time.Duration) { wait = d; cancel() } // no need to sit it out
	if err := e.ExportSpans(ctx, testSpans("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("ExportSpans: %v, want context.Canceled", err)
	}
	if wait != 3*time.Second {
		t.Errorf("waited %s, want the collector's 3s", wait)
	}
}

func TestShutdown(t *testing.T) {
	col, arrived := blocking(t)
	e := testExporter(t, col.URL)

	// An export in flight is abandoned.
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { err = e.ExportSpans(t.Context(), testSpans("x")) })
	<-arrived
	if err := e.Shutdown(t.Context()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	wg.Wait()
	if !errors.Is(err, errShutdown) {
		t.Errorf("export in flight at Shutdown: %v, want errShutdown", err)
	}

	// Later exports fail without a request.
	if err := e.ExportSpans(t.Context(), testSpans("y")); !errors.Is(err, errShutdown) {
		t.Errorf("ExportSpans after Shutdown: %v, want errShutdown", err)
	}
	if err := e.ExportSpans(t.Context(), nil); !errors.Is(err, errShutdown) {
		t.Errorf("ExportSpans(no spans) after Shutdown: %v, want errShutdown", err)
	}
	if n := col.count(); n != 1 {
		t.Errorf("%d requests, want only the one before Shutdown", n)
	}

	// Idempotent.
	if err := e.Shutdown(t.Context()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestShutdownEndedContext(t *testing.T) {
	e := testExporter(t, "http://127.0.0.1:1/v1/traces")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown(ended ctx): %v, want context.Canceled", err)
	}
	if err := e.ExportSpans(t.Context(), testSpans("x")); !errors.Is(err, errShutdown) {
		t.Errorf("ExportSpans after Shutdown: %v, want errShutdown", err)
	}
}

func TestExportUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/v1/traces?token=" + secret
	srv.Close() // nothing listens there any more
	err := testExporter(t, url).ExportSpans(t.Context(), testSpans("x"))
	var se *statusError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("ExportSpans to a closed port: %v, want a transport error", err)
	}
	noSecret(t, err)
}

func TestPartialSuccessLogged(t *testing.T) {
	resp, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{
		PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 2, ErrorMessage: "too old"}})
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(resp)
	})
	var log bytes.Buffer
	setErrorLogger(slog.New(slog.NewTextHandler(&log, nil)))
	t.Cleanup(func() { setErrorLogger(nil) })
	if err := testExporter(t, col.URL).ExportSpans(t.Context(), testSpans("x", "y")); err != nil {
		t.Fatalf("ExportSpans: %v, want success (partial success is not retried)", err)
	}
	if !strings.Contains(log.String(), "rejected 2 spans") || !strings.Contains(log.String(), "too old") {
		t.Errorf("log %q does not report the rejected spans", log.String())
	}
}

func TestPartialSuccess(t *testing.T) {
	marshal := func(r *coltracepb.ExportTraceServiceResponse) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	type result struct {
		Rejected int64
		Msg      string
	}
	tests := []struct {
		name string
		body []byte
		want result
	}{
		{"empty body", nil, result{}},
		{"empty response", marshal(&coltracepb.ExportTraceServiceResponse{}), result{}},
		{"empty partial success", marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{}}), result{}},
		{"rejected", marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 7, ErrorMessage: "quota"}}), result{7, "quota"}},
		{"message only", marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{ErrorMessage: "warning"}}), result{0, "warning"}},
		{"unknown fields skipped", append([]byte{0x15, 1, 2, 3, 4, 0x18, 0x05}, // fixed32 field 2, varint field 3
			marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 1}})...), result{1, ""}},
		{"JSON", []byte(`{"partialSuccess":{"rejectedSpans":"3"}}`), result{}},
		{"truncated", marshal(&coltracepb.ExportTraceServiceResponse{PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: 7, ErrorMessage: "quota"}})[:4], result{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got result
			got.Rejected, got.Msg = partialSuccess(tt.body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("partialSuccess (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		header   string
		min, max time.Duration
	}{
		{"", 0, 0},
		{"0", 0, 0},
		{"3", 3 * time.Second, 3 * time.Second},
		{"-5", 0, 0},
		{"1.5", 0, 0},
		{"soon", 0, 0},
		{time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat), 0, 0},
		{time.Now().Add(time.Minute).UTC().Format(http.TimeFormat), 58 * time.Second, time.Minute},
		{"18446744074", time.Hour, time.Hour}, // would wrap to 0.29s uncapped
		{"7200", time.Hour, time.Hour},
		{time.Now().Add(48 * time.Hour).UTC().Format(http.TimeFormat), time.Hour, time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header); got < tt.min || got > tt.max {
			t.Errorf("retryAfter(%q) = %s, want %s to %s", tt.header, got, tt.min, tt.max)
		}
	}
}
