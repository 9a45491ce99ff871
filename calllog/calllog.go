// Package calllog records every tool call in the store off the hot path:
// calls are queued without blocking, redacted and written in batches by
// one goroutine, and flushed on Close. When the store is down or the queue
// is full, records are dropped and counted with a warning; a call never
// waits for, or fails because of, its log record.
package calllog

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Inserter is the one store method the writer needs.
type Inserter interface {
	InsertToolCalls(ctx context.Context, batch []switchboard.ToolCallRecord) error
}

// Options tune a Writer; zero values take the defaults.
type Options struct {
	QueueSize    int           // records waiting to be written; default 8192
	BatchSize    int           // records per insert; default 256
	FlushEvery   time.Duration // longest a record waits; default 200ms
	WriteTimeout time.Duration // one insert; default 5s
	Logger       *slog.Logger
}

// Writer batches tool-call records into the store.
type Writer struct {
	store   Inserter
	opts    Options
	queue   chan switchboard.ToolCallRecord
	dropped atomic.Int64
	written atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// New starts a Writer; Close stops it.
func New(store Inserter, opts Options) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 8192
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 200 * time.Millisecond
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{store: store, opts: opts, queue: make(chan switchboard.ToolCallRecord, opts.QueueSize),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// ObserveCall queues rec without blocking; a full queue drops it
// (counted). It is the server.Observer method.
func (w *Writer) ObserveCall(rec switchboard.ToolCallRecord) {
	if len(rec.Arguments) > MaxArgumentBytes {
		// The queue must not pin huge client payloads.
		rec.Arguments = json.RawMessage(`{"_truncated":true}`)
	}
	select {
	case <-w.stop:
		w.dropped.Add(1)
		return
	default:
	}
	select {
	case w.queue <- rec:
	default:
		if w.dropped.Add(1)%1000 == 1 {
			w.opts.Logger.Warn("tool-call log queue full; dropping records", "dropped_total", w.dropped.Load())
		}
	}
}

// Dropped is the number of records lost so far (full queue, store outage,
// invalid record).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Written is the number of records stored so far.
func (w *Writer) Written() int64 { return w.written.Load() }

func (w *Writer) loop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushEvery)
	defer t.Stop()
	batch := make([]switchboard.ToolCallRecord, 0, w.opts.BatchSize)
	for {
		select {
		case rec := <-w.queue:
			batch = w.add(batch, rec)
		case <-t.C:
			batch = w.flush(batch)
		case <-w.stop:
			// Drain what was queued before Close, then write it.
			for {
				select {
				case rec := <-w.queue:
					batch = w.add(batch, rec)
				default:
					w.flush(batch)
					return
				}
			}
		}
	}
}

// add redacts and validates rec into batch, writing the batch once full.
func (w *Writer) add(batch []switchboard.ToolCallRecord, rec switchboard.ToolCallRecord) []switchboard.ToolCallRecord {
	rec.Arguments = Redact(rec.Arguments)
	rec.Tool = switchboard.Clip(rec.Tool)
	if err := rec.Validate(); err != nil {
		// One bad record must not sink a batch.
		w.dropped.Add(1)
		w.opts.Logger.Warn("tool-call record dropped", "err", err)
		return batch
	}
	batch = append(batch, rec)
	if len(batch) >= w.opts.BatchSize {
		batch = w.flush(batch)
	}
	return batch
}

func (w *Writer) flush(batch []switchboard.ToolCallRecord) []switchboard.ToolCallRecord {
	if len(batch) == 0 {
		return batch
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.WriteTimeout)
	err := w.store.InsertToolCalls(ctx, batch)
	cancel()
	if err != nil {
		total := w.dropped.Add(int64(len(batch)))
		w.opts.Logger.Warn("tool-call log write failed; records dropped", "records", len(batch), "dropped_total", total, "err", err)
	} else {
		w.written.Add(int64(len(batch)))
	}
	return batch[:0]
}

// Close writes everything queued so far and stops, or gives up when ctx
// ends (what was not written is counted as dropped).
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		if n := w.dropped.Load(); n > 0 {
			w.opts.Logger.Warn("tool-call log closed with dropped records", "dropped_total", n)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// secretKey matches argument names whose values are credentials.
var secretKey = regexp.MustCompile(`(?i)(passw(or)?d|passphrase|secret|token|api[-_]?key|apikey|authorization|auth[-_]?header|credential|private[-_]?key|cookie|session[-_]?key)`)

// MaxArgumentBytes is the largest argument document kept in the log;
// larger ones are stored as {"_truncated":true}.
const MaxArgumentBytes = 64 << 10

// Redacted replaces the value of every secret-looking member.
const Redacted = `"[REDACTED]"`

// Redact returns args with the values of members whose names look like
// credentials (password, token, api_key, authorization, ...) replaced by
// "[REDACTED]", at any depth. Arguments that are not JSON come back as
// null: the store must never hold what it cannot inspect.
func Redact(args json.RawMessage) json.RawMessage {
	if len(args) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage("null")
	}
	if !redactValue(v) {
		return args // nothing secret: keep the client's bytes
	}
	out, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return out
}

func redactValue(v any) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			if secretKey.MatchString(k) {
				t[k] = json.RawMessage(Redacted)
				changed = true
				continue
			}
			if redactValue(val) {
				changed = true
			}
		}
	case []any:
		for _, val := range t {
			if redactValue(val) {
				changed = true
			}
		}
	}
	return changed
}
