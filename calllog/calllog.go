// Package calllog records every tool call in the store off the hot path:
// calls are redacted and queued without blocking, and written in batches
// by one goroutine, flushed on Close. With a spool directory, each record
// is also appended to a file before the call is answered, so it survives
// kill -9 and is replayed on the next start (see Recover). When the store
// is down or the queue is full, records are dropped and counted with a
// warning; a call never waits for, or fails because of, its log record
// beyond the copy into the spool.
package calllog

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/safetext"
)

// Inserter is the one store method the writer needs. InsertToolCalls
// must not keep batch after it returns: the writer reuses it.
type Inserter interface {
	InsertToolCalls(ctx context.Context, batch []switchboard.ToolCallRecord) error
}

// Options tune a Writer; zero values take the defaults.
type Options struct {
	QueueSize int // records waiting to be written; default 8192
	// BatchSize is the most records per insert (one transaction); default
	// 1024. Larger transactions cost the embedded store less per record
	// (about 15% from 256 to 1024); at a few thousand calls a second, the
	// FlushEvery tick takes a batch of about that size anyway.
	BatchSize    int
	FlushEvery   time.Duration // longest a record waits; default 200ms
	WriteTimeout time.Duration // one insert; default 5s
	// SpoolDir, when set, is where the Writer keeps its crash spool
	// (created if missing). If it cannot, the Writer warns and runs
	// without one.
	SpoolDir string
	// SpoolMaxBytes is the size of a spool file (mapped, sparse: disk
	// blocks are taken only as records reach them); when records not yet
	// stored fill it, the spool moves to another file (two take turns
	// while the store keeps up). Default 1 MiB, about 4000 records.
	SpoolMaxBytes int64
	Logger        *slog.Logger
}

// Writer batches tool-call records into the store.
type Writer struct {
	store Inserter
	opts  Options
	// qmu guards queue, the records waiting for the loop. They are handed
	// over in batches, not one by one: the loop wakes when a batch is
	// full (full has a token) or at FlushEvery, never once per call.
	qmu       sync.Mutex
	queue     []queued
	full      chan struct{}
	spool     *spool // nil: no crash safety
	dropped   atomic.Int64
	written   atomic.Int64
	unspooled atomic.Int64
	mu        sync.RWMutex // ObserveCall's spool write and enqueue (shared) against Close
	closed    bool
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
	startOnce sync.Once                    // the loop starts with the first record
	recs      []switchboard.ToolCallRecord // the loop's insert buffer, reused
}

// queued is a record on its way to the store, with the spool file that
// holds it (nil if none does).
type queued struct {
	rec switchboard.ToolCallRecord
	seg *segment
}

// New returns a Writer, opening its spool in opts.SpoolDir if set; its
// loop starts with the first record, and Close stops it.
func New(store Inserter, opts Options) *Writer {
	if opts.QueueSize <= 0 {
		opts.QueueSize = 8192
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1024
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 200 * time.Millisecond
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 5 * time.Second
	}
	if opts.SpoolMaxBytes <= 0 {
		opts.SpoolMaxBytes = 1 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{store: store, opts: opts, full: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	if opts.SpoolDir != "" {
		sp, err := openSpool(opts.SpoolDir, opts.SpoolMaxBytes)
		if err != nil {
			opts.Logger.Warn("tool-call spool unavailable; records not yet stored are lost if the process dies", "err", err)
		} else {
			w.spool = sp
		}
	}
	return w
}

// start starts the writer's loop with the first record queued (the
// constructor starts nothing); Close takes it too, so none starts after.
func (w *Writer) start() { w.startOnce.Do(func() { go w.loop() }) }

// ObserveFeature records a prompts/get (kind "prompt") or a
// resources/read (kind "resource") as a call of that kind: the prompt's
// name or the URI stands in Tool (server.FeatureObserver).
func (w *Writer) ObserveFeature(rec switchboard.ToolCallRecord, kind string) {
	rec.Kind = kind
	w.ObserveCall(rec)
}

// ObserveCall redacts rec, gives it a RecordID unless it has one, copies
// it into the spool and queues it, with no system call and no waiting
// but for two short locks; a full queue drops it (counted). It is the
// server.Observer method, called before the response is written: once it
// returns, the record survives the death of the process.
func (w *Writer) ObserveCall(rec switchboard.ToolCallRecord) {
	rec, err := prepare(rec)
	if err != nil {
		// One bad record must not sink a batch.
		w.dropped.Add(1)
		w.opts.Logger.Warn("tool-call record dropped", "err", err)
		return
	}
	var line *[]byte
	if w.spool != nil {
		line = linePool.Get().(*[]byte)
		defer linePool.Put(line)
		if *line, err = appendLine((*line)[:0], rec); err != nil {
			w.spoolFailed(err)
			line = nil
		}
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return
	}
	var seg *segment
	if line != nil {
		if seg, err = w.spool.append(*line); err != nil {
			w.spoolFailed(err)
		}
	}
	if !w.enqueue(queued{rec, seg}) {
		w.settle([]queued{{rec, seg}})
		if w.dropped.Add(1)%1000 == 1 {
			w.opts.Logger.Warn("tool-call log queue full; dropping records", "dropped_total", w.dropped.Load())
		}
	}
}

// linePool holds the buffers spool lines are encoded into (append
// copies the line into its group's buffer).
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// enqueue adds q to the records waiting for the loop, waking it when a
// batch is ready; false when QueueSize records already wait.
func (w *Writer) enqueue(q queued) bool {
	w.qmu.Lock()
	if len(w.queue) >= w.opts.QueueSize {
		w.qmu.Unlock()
		return false
	}
	w.queue = append(w.queue, q)
	ready := len(w.queue)%w.opts.BatchSize == 0
	w.qmu.Unlock()
	w.start()
	if ready {
		select {
		case w.full <- struct{}{}:
		default: // already signalled
		}
	}
	return true
}

// take hands the loop the waiting records, leaving spare (emptied) to
// collect the next ones, so two buffers take turns without allocating.
// Unless all, only whole batches are taken: the rest waits to fill up,
// or for the ticker.
func (w *Writer) take(spare []queued, all bool) []queued {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	if all {
		out := w.queue
		w.queue = spare[:0]
		return out
	}
	n := len(w.queue) - len(w.queue)%w.opts.BatchSize
	out := append(spare[:0], w.queue[:n]...)
	rest := copy(w.queue, w.queue[n:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	return out
}

// newRecordID is a record's unique id: 32 hex digits, the first 16 the
// time in nanoseconds and the rest random. Time-ordered, so the store's
// unique index on it grows at its end like the table does, instead of
// taking every insert at a random place (which touched and rewrote many
// more index pages per batch). The random half needs to be unique, not
// secret: math/rand/v2's generator (seeded by the runtime from the
// system's randomness) gives it without a system call, where crypto/rand
// made one per call here.
func newRecordID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	binary.BigEndian.PutUint64(b[8:], rand.Uint64())
	return hex.EncodeToString(b[:])
}

// prepare makes rec what the store and the spool may hold: secrets
// redacted (they must never reach the disk), bounded, valid, named.
func prepare(rec switchboard.ToolCallRecord) (switchboard.ToolCallRecord, error) {
	if len(rec.Arguments) > MaxArgumentBytes {
		// The queue must not pin huge client payloads.
		rec.Arguments = json.RawMessage(`{"_truncated":true}`)
	}
	rec.Arguments = Redact(rec.Arguments)
	// A tool name is the upstream's choice and may hold what no store
	// keeps as text (NUL): such a name is stored escaped, never dropped.
	rec.Tool = safetext.Of(switchboard.Clip(rec.Tool))
	rec.Server = safetext.Of(rec.Server)
	if rec.RecordID == "" {
		rec.RecordID = newRecordID()
	}
	return rec, rec.Validate()
}

// spoolFailed counts a record the spool could not take (disk full): it is
// still queued for the store, only not crash-safe.
func (w *Writer) spoolFailed(err error) {
	if n := w.unspooled.Add(1); n%1000 == 1 {
		w.opts.Logger.Warn("tool-call spool write failed; records are stored but lost if the process dies first", "unspooled_total", n, "err", err)
	}
}

// Dropped is the number of records lost so far (full queue, store outage,
// invalid record).
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Written is the number of records stored so far.
func (w *Writer) Written() int64 { return w.written.Load() }

// Unspooled is the number of records the spool could not take so far;
// they were queued for the store all the same.
func (w *Writer) Unspooled() int64 { return w.unspooled.Load() }

func (w *Writer) loop() {
	defer close(w.done)
	t := time.NewTicker(w.opts.FlushEvery)
	defer t.Stop()
	var spare []queued
	for {
		all := false
		select {
		case <-w.full:
		case <-t.C:
			all = true
		case <-w.stop:
			// ObserveCall queues nothing once closed: write the rest.
			w.flush(w.take(nil, true))
			return
		}
		spare = w.flush(w.take(spare, all))
	}
}

// flush writes the records of batch, BatchSize per insert, and returns
// batch emptied for reuse.
func (w *Writer) flush(batch []queued) []queued {
	for chunk := range slices.Chunk(batch, w.opts.BatchSize) {
		w.write(chunk)
	}
	clear(batch)
	return batch[:0]
}

// write stores one batch of at most BatchSize records.
func (w *Writer) write(batch []queued) {
	recs := w.recs[:0]
	for _, q := range batch {
		recs = append(recs, q.rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.WriteTimeout)
	err := w.store.InsertToolCalls(ctx, recs)
	cancel()
	clear(recs) // no record pinned until the next batch
	w.recs = recs[:0]
	if err != nil {
		total := w.dropped.Add(int64(len(batch)))
		w.opts.Logger.Warn("tool-call log write failed; records dropped", "records", len(batch), "dropped_total", total, "err", err)
	} else {
		w.written.Add(int64(len(batch)))
	}
	// Dropped records are settled too: the spool keeps only what may
	// still be stored, not what was given up with a count.
	w.settle(batch)
}

func (w *Writer) settle(batch []queued) {
	if w.spool == nil {
		return
	}
	if err := w.spool.settle(batch); err != nil {
		w.opts.Logger.Warn("tool-call spool cleanup failed", "err", err)
	}
}

// Close writes everything queued so far and stops, then deletes the
// spool file; or gives up when ctx ends, keeping the spool file for the
// next start's Recover.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.once.Do(func() { close(w.stop) })
	// Nothing was ever queued: there is no loop to stop.
	w.startOnce.Do(func() { close(w.done) })
	select {
	case <-w.done:
		if w.spool != nil {
			if err := w.spool.close(); err != nil {
				w.opts.Logger.Warn("tool-call spool not removed", "err", err)
			}
		}
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

// secretStems are the strings secretKey matches, spelled out (its
// optional separators expanded), for mayHoldSecretKey.
var secretStems = [][]byte{
	[]byte("password"), []byte("passwd"), []byte("passphrase"), []byte("secret"), []byte("token"),
	[]byte("api_key"), []byte("api-key"), []byte("apikey"), []byte("authorization"),
	[]byte("auth_header"), []byte("auth-header"), []byte("authheader"), []byte("credential"),
	[]byte("private_key"), []byte("private-key"), []byte("privatekey"), []byte("cookie"),
	[]byte("session_key"), []byte("session-key"), []byte("sessionkey"),
}

// lowerPool holds the buffers mayHoldSecretKey lower-cases into.
var lowerPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// mayHoldSecretKey reports whether b contains a match of secretKey, as
// secretKey.Match(b) does, without the regexp engine on the common path:
// ASCII bytes are lower-cased and searched for each stem; anything
// non-ASCII (which case folding could turn into a stem) asks the regexp.
func mayHoldSecretKey(b []byte) bool {
	bp := lowerPool.Get().(*[]byte)
	defer lowerPool.Put(bp)
	low := (*bp)[:0]
	for _, c := range b {
		if c >= 0x80 {
			*bp = low
			return secretKey.Match(b)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		low = append(low, c)
	}
	*bp = low
	for _, stem := range secretStems {
		if bytes.Contains(low, stem) {
			return true
		}
	}
	return false
}

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
	// Fast path: no secret-looking name anywhere in the bytes and no
	// escapes that could spell one means nothing to redact.
	if bytes.IndexByte(args, '\\') < 0 && !mayHoldSecretKey(args) {
		if !json.Valid(args) {
			return json.RawMessage("null")
		}
		return args
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
