package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/protobuf/encoding/protowire"
)

// exporter is an sdktrace.SpanExporter that POSTs spans to an OTLP/HTTP
// collector as protobuf. It replaces the SDK's otlptracehttp, whose
// shared configuration code links gRPC and grpc-gateway into the binary
// (opentelemetry-go#2579): 8 MB of binary (5.5 MB stripped) and 4.5 MiB
// of idle memory, paid even with tracing off.
//
// It keeps no buffer (the batch span processor does), so there is
// nothing for ForceFlush to do beyond the processor's own export.
type exporter struct {
	url     string
	headers map[string]string
	agent   string // User-Agent
	client  *http.Client

	// timeout bounds one ExportSpans call, retries included.
	timeout time.Duration
	// backoff is the first wait before a retry; it doubles up to maxWait.
	// A collector asking (Retry-After) for longer than maxWait gets no
	// retry.
	backoff, maxWait time.Duration

	// onWait, when set (by tests), is called as a wait for a retry starts.
	onWait func(time.Duration)

	// life is cancelled by Shutdown; it aborts exports in flight.
	life context.Context
	stop context.CancelFunc
}

// errShutdown is what ExportSpans returns once the exporter is shut down.
var errShutdown = errors.New("tracing: the OTLP exporter is shut down")

// newExporter returns an exporter to the traces URL endpoint. ctx carries
// values only: its cancellation does not stop the exporter, Shutdown does.
func newExporter(ctx context.Context, endpoint string, headers map[string]string, version string) *exporter {
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	// A transport of its own, so Shutdown can close its connections; it
	// keeps the default's proxy from the environment and TLS settings.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2
	return &exporter{
		url:     endpoint,
		headers: headers,
		agent:   "switchboard/" + version,
		client:  &http.Client{Transport: tr},
		timeout: 10 * time.Second,
		backoff: 250 * time.Millisecond,
		maxWait: 5 * time.Second,
		life:    life,
		stop:    stop,
	}
}

// ExportSpans sends spans in one request, retrying while the collector
// answers 429, 502, 503 or 504, the wait it asks for is at most maxWait
// and the wait (that or the backoff) still fits in ctx and the per-export
// timeout. It returns errShutdown after Shutdown, the context's error
// when ctx ends first, and otherwise an error naming the collector's last
// HTTP status or the transport failure; never the request's headers or
// URL, which may hold credentials.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.life.Err() != nil {
		return errShutdown
	}
	if len(spans) == 0 {
		return nil
	}
	body, err := encodeRequest(resourceSpans(spans))
	if err != nil {
		return fmt.Errorf("tracing: encoding spans: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	defer context.AfterFunc(e.life, cancel)()

	backoff := e.backoff
	var last error // the previous attempt's failure
	for attempt := 1; ; attempt++ {
		wait, err := e.post(ctx, body)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil && last != nil {
			// The deadline ended a retry: the collector's own answer
			// says more than "deadline exceeded".
			return e.ctxErr(ctx, last)
		}
		last = err
		if wait < 0 { // not worth retrying
			return err
		}
		if wait == 0 {
			// Jittered, so replicas that failed together spread out.
			wait = backoff/2 + rand.N(backoff/2+1)
			backoff = min(2*backoff, e.maxWait)
		}
		if wait > e.maxWait {
			// Retrying sooner than asked would only add to the load.
			return fmt.Errorf("%w (attempt %d; it asks to wait %s)", err, attempt, wait.Round(time.Second))
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < wait {
			return fmt.Errorf("%w (attempt %d; no time left to retry)", err, attempt)
		}
		if e.onWait != nil {
			e.onWait(wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return e.ctxErr(ctx, err)
		}
	}
}

// post makes one attempt. On failure, retry says whether and when to try
// again: -1 never, 0 after the backoff, more after that long (the
// collector's Retry-After).
func (e *exporter) post(ctx context.Context, body []byte) (retry time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return -1, errors.New("tracing: building the export request failed")
	}
	req.Header.Set("User-Agent", e.agent) // the configured headers may replace it
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return -1, e.ctxErr(ctx, nil)
		}
		// The *url.Error would repeat the URL, which may hold a token in
		// its query; the cause alone names the host.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return -1, fmt.Errorf("tracing: posting spans to the collector: %w", err)
	}
	defer resp.Body.Close()
	// At most 64 KiB read: a response is a few bytes, and reading it to
	// the end lets the connection be reused.
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if rejected, msg := partialSuccess(raw); rejected != 0 || msg != "" {
			// The export succeeded: nothing to retry, but worth a log line.
			otel.Handle(fmt.Errorf("tracing: the collector rejected %d spans: %q", rejected, msg))
		}
		return 0, nil
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusBadGateway,
		resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return retryAfter(resp.Header.Get("Retry-After")), &statusError{resp.StatusCode, resp.Status}
	}
	return -1, &statusError{resp.StatusCode, resp.Status}
}

// statusError is a collector's answer other than 2xx.
type statusError struct {
	code   int
	status string // "503 Service Unavailable"
}

func (e *statusError) Error() string { return "tracing: the collector answered " + e.status }

// ctxErr explains why an export stopped early: Shutdown, or ctx (its
// deadline or the caller's cancellation), with the last failure if any.
func (e *exporter) ctxErr(ctx context.Context, last error) error {
	cause := ctx.Err()
	if e.life.Err() != nil {
		cause = errShutdown
	}
	if last != nil {
		return fmt.Errorf("%w; gave up: %w", last, cause)
	}
	return fmt.Errorf("tracing: export stopped: %w", cause)
}

// maxRetryAfter caps a collector's Retry-After: beyond it the export's own
// deadline decides anyway, and seconds * time.Second must not overflow.
const maxRetryAfter = time.Hour

// retryAfter reads a Retry-After header (seconds or an HTTP date), at most
// maxRetryAfter; 0 is none or unreadable, so the backoff applies.
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(h); err == nil {
		return time.Duration(min(max(s, 0), int(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return min(max(time.Until(t), 0), maxRetryAfter)
	}
	return 0
}

// partialSuccess reads ExportTraceServiceResponse.partial_success
// (field 1: rejected_spans = 1, error_message = 2) from a protobuf
// response; an empty or unreadable body is full success.
func partialSuccess(b []byte) (rejected int64, msg string) {
	ps := field(b, 1, protowire.BytesType)
	if ps == nil {
		return 0, ""
	}
	if v := field(ps, 1, protowire.VarintType); v != nil {
		n, _ := protowire.ConsumeVarint(v)
		rejected = int64(n)
	}
	if v := field(ps, 2, protowire.BytesType); v != nil {
		msg = text(string(v))
	}
	return rejected, msg
}

// field returns the last occurrence of field num of type typ in the
// message b: the payload of a length-delimited field, the raw varint of
// a varint field. Nil means absent or b is malformed.
func field(b []byte, num protowire.Number, typ protowire.Type) []byte {
	var found []byte
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil
		}
		b = b[l:]
		var v []byte
		switch t {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			_, l = protowire.ConsumeVarint(b)
			if l >= 0 {
				v = b[:l]
			}
		default:
			l = protowire.ConsumeFieldValue(n, t, b)
		}
		if l < 0 {
			return nil
		}
		if n == num && t == typ {
			found = v
			if found == nil {
				found = []byte{} // present but empty
			}
		}
		b = b[l:]
	}
	return found
}

// Shutdown stops the exporter: exports in flight are abandoned and later
// ones return errShutdown. Calls after the first do nothing. It returns
// ctx's error if ctx has already ended.
func (e *exporter) Shutdown(ctx context.Context) error {
	if e.life.Err() == nil {
		e.stop()
		e.client.CloseIdleConnections()
	}
	return ctx.Err()
}
