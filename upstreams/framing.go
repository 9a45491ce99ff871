package upstreams

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/jsonscan"
)

// DefaultMaxMessageBytes bounds one JSON-RPC message from a server on any
// transport unless Options.MaxMessageBytes says otherwise: a server that
// never sends a newline, or answers with a huge result, must not make the
// gateway grow without limit.
const DefaultMaxMessageBytes = 16 << 20

// tooLargeError reports a server message over the limit; the connection it
// arrived on is reset, and callers are told which limit was hit.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("it sent a message larger than the gateway's limit of %d bytes (MCP_SERVER_MAX_MESSAGE_BYTES)", e.limit)
}

// lineLimits bound the lines a framer reads: max bytes of one, and how
// long one may stay unfinished once it passed stallBytes(max).
type lineLimits struct {
	max   int64
	stall time.Duration
}

// lineLimits are the limits of every stdio and hosted connection.
func (o *Options) lineLimits() lineLimits {
	return lineLimits{max: o.MaxMessageBytes, stall: o.StallTimeout}
}

// stallBytes is how long a partial line may grow before it must finish
// within the stall timeout: 1 MiB, or half the limit if that is smaller.
// An honest server writes a big line at pipe speed, far inside the
// timeout; one that writes without newlines, slowly or not at all any
// more, is declared broken instead of holding its calls until the limit.
func stallBytes(limit int64) int64 {
	return min(1<<20, limit/2)
}

// framer speaks newline-delimited JSON-RPC over any reader/writer pair:
// request ids, the table of calls waiting for their response, server
// notifications, answers to the server's own requests, the 64 MiB line
// cap, a single writer goroutine and cancellation notices. It owns no
// process or stream: stdioConn runs it over a child's pipes, streamConn
// over a hosted container's attach stream. The owner runs readLoop and
// writeLoop in goroutines it waits for, and calls markDone when the
// transport is gone.
type framer struct {
	hop
	w      io.Writer
	log    *slog.Logger
	onNote func(method string, params json.RawMessage)

	writes chan []byte
	nextID atomic.Int64

	mu      sync.Mutex
	pending map[string]chan message

	doneCh   chan struct{}
	doneOnce sync.Once

	// limit bounds one message (a line); broken holds why reading
	// stopped when a message broke it, for status and callers.
	limit  int64
	broken atomic.Pointer[string]
	// stall is how long a line may stay unfinished after passing
	// stallBytes; partial counts the bytes of the line being read.
	stall   time.Duration
	partial atomic.Int64

	// serial is set when the owner writes one request at a time (a hosted
	// server: see upstream.takeTurn). A call that gives up then queues its
	// cancellation notice before returning, so the notice reaches the
	// server ahead of the next caller's request.
	serial bool

	// requests, once set, answers the server's requests other than
	// ping: it is handed a reply func that writes the response.
	requests atomic.Pointer[requestHandler]
}

// requestHandler passes a server's request on and replies later (reply
// takes the whole response message).
type requestHandler func(ctx context.Context, id json.RawMessage, method string, params json.RawMessage, reply func([]byte))

// setRequestHandler sets how the server's requests are answered.
func (f *framer) setRequestHandler(h requestHandler) { f.requests.Store(&h) }

func newFramer(w io.Writer, serial bool, lim lineLimits, onNote func(string, json.RawMessage), log *slog.Logger) *framer {
	if lim.max <= 0 {
		lim.max = DefaultMaxMessageBytes
	}
	if lim.stall <= 0 {
		lim.stall = 5 * time.Second
	}
	return &framer{w: w, log: log, onNote: onNote, writes: make(chan []byte, 64), limit: lim.max, stall: lim.stall,
		pending: map[string]chan message{}, doneCh: make(chan struct{}), serial: serial}
}

// setBroken records why the server's output cannot be read any more; the
// first reason wins.
func (f *framer) setBroken(msg string) {
	f.broken.CompareAndSwap(nil, &msg)
}

// stalled ends a connection whose current line passed stallBytes and did
// not finish within the stall timeout: calls waiting on it fail at once,
// and status says why (the owner resets the connection).
func (f *framer) stalled() {
	f.setBroken(fmt.Sprintf("stream broken: it sent %d bytes without a newline and did not finish the line within %s", f.partial.Load(), f.stall))
	f.log.Warn("upstream output stalled mid-line; dropping connection", "bytes", f.partial.Load(), "after", f.stall)
	f.markDone()
}

// brokenReason says why the server's output could not be read any more
// ("" when it was not broken by what the server sent).
func (f *framer) brokenReason() string {
	if p := f.broken.Load(); p != nil {
		return *p
	}
	return ""
}

// markDone records that the connection is lost for good: calls waiting
// for a response, or for their turn, fail with errConnLost.
func (f *framer) markDone() {
	f.doneOnce.Do(func() {
		close(f.doneCh)
		f.mu.Lock()
		for id, ch := range f.pending {
			close(ch)
			delete(f.pending, id)
		}
		f.mu.Unlock()
	})
}

func (f *framer) done() <-chan struct{} { return f.doneCh }

// readLoop dispatches every line read from r until r ends or sends a line
// longer than maxLine. It does not mark the connection done: the owner
// decides when the transport is gone.
func (f *framer) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	long := stallBytes(f.limit)
	// blank counts the bytes of the blank lines since the last message:
	// they count toward the limit like the bytes of one message, so a
	// server writing only newlines is cut as a message that never ends.
	var blank int64
	for {
		var timer *time.Timer
		line, err := readLine(br, f.limit, func(n int64) {
			f.partial.Store(n)
			if n > long && timer == nil {
				timer = time.AfterFunc(f.stall, f.stalled)
			}
		})
		if timer != nil {
			timer.Stop()
		}
		if len(bytes.TrimSpace(line)) > 0 {
			blank = 0
			f.dispatch(line)
		} else if blank += int64(len(line)); blank > f.limit && err == nil {
			err = &tooLargeError{f.limit}
		}
		var tl *tooLargeError
		if errors.As(err, &tl) {
			f.setBroken(tl.Error())
		}
		if err != nil {
			select {
			case <-f.doneCh: // we closed it
			default:
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
					f.log.Warn("upstream output unreadable; dropping connection", "err", err)
				}
			}
			return
		}
	}
}

// readLine reads one newline-terminated line of at most limit bytes; a
// longer one is a *tooLargeError as soon as it passes the limit, without
// waiting for its end. partial, when set, is told the size of the line
// so far each time it grows without ending.
func readLine(r *bufio.Reader, limit int64, partial func(n int64)) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if int64(len(buf)) > limit {
			return nil, &tooLargeError{limit}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if partial != nil {
				partial(int64(len(buf)))
			}
			continue
		}
		return buf, err
	}
}

func (f *framer) dispatch(line []byte) {
	var m message
	if err := decodeMessage(line, &m); err != nil {
		f.log.Debug("upstream sent a line that is not JSON-RPC; ignored", "err", err)
		return
	}
	switch {
	case m.Method != "" && len(m.ID) > 0 && m.Method != "ping" && f.requests.Load() != nil:
		// A request for the client (sampling, elicitation, roots): the
		// handler answers it later, off the reader goroutine.
		id := append(json.RawMessage{}, m.ID...)
		(*f.requests.Load())(context.Background(), id, m.Method, m.Params, func(b []byte) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = f.writeRaw(ctx, b)
		})
	case m.Method != "" && len(m.ID) > 0:
		// A request from the server before the connection is in use: only
		// ping gets an answer beyond "method not found".
		resp := map[string]any{"jsonrpc": "2.0", "id": m.ID}
		if m.Method == "ping" {
			resp["result"] = struct{}{}
		} else {
			resp["error"] = rpcErrorWire{Code: switchboard.CodeMethodNotFound, Message: "switchboard does not offer " + m.Method}
		}
		// Never block the reader on a full queue.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = f.write(ctx, resp)
		cancel()
	case m.Method != "":
		if f.onNote != nil {
			f.onNote(m.Method, m.Params)
		}
	case len(m.ID) > 0:
		f.mu.Lock()
		ch, ok := f.pending[string(m.ID)]
		delete(f.pending, string(m.ID))
		f.mu.Unlock()
		if ok {
			ch <- m
		}
	}
}

// decodeMessage is json.Unmarshal(line, m), without reflection on the
// common path: the envelope is read by jsonscan and only an error object
// is decoded by encoding/json (as is anything jsonscan cannot tell). The
// raw members share line's bytes, which readLine allocates per line.
func decodeMessage(line []byte, m *message) error {
	if !json.Valid(line) {
		return errors.New("not valid JSON")
	}
	var e jsonscan.Envelope
	ok, err := jsonscan.DecodeEnvelope(line, &e, func(v []byte) error {
		if jsonscan.IsNull(v) {
			m.Error = nil
			return nil
		}
		var ew rpcErrorWire
		if m.Error != nil {
			ew = *m.Error // a repeated member updates, as encoding/json does
		}
		m.Error = &ew
		return json.Unmarshal(v, &ew)
	})
	if !ok {
		*m = message{}
		return json.Unmarshal(line, m)
	}
	m.JSONRPC, m.Method, m.ID, m.Params, m.Result = e.JSONRPC, e.Method, e.ID, e.Params, e.Result
	return err
}

// write queues one message for the writer goroutine, giving up when ctx
// ends: a server that stops reading fills the pipe, and a call must still
// return at its deadline rather than block in write(2).
func (f *framer) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.writeRaw(ctx, b)
}

// writeRaw queues one compact JSON message (it must hold no newline).
func (f *framer) writeRaw(ctx context.Context, b []byte) error {
	b = append(b, '\n')
	select {
	case f.writes <- b:
		return nil
	case <-f.doneCh:
		return errConnLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeLoop is the only writer of w. It ends when a write fails (marking
// the connection lost) or the connection is lost.
//
// Messages already queued behind the one received go out with it: they
// are gathered in a buffered writer flushed once, so a burst of calls
// costs one write(2) rather than one each, and a lone message still goes
// at once.
func (f *framer) writeLoop() {
	bw := bufio.NewWriterSize(f.w, 64<<10)
	for {
		select {
		case b := <-f.writes:
			_, err := bw.Write(b)
		more:
			for n := 1; err == nil && n < 64; n++ {
				select {
				case b := <-f.writes:
					_, err = bw.Write(b)
				default:
					break more
				}
			}
			if err == nil {
				err = bw.Flush()
			}
			if err != nil {
				f.markDone()
				return
			}
		case <-f.doneCh:
			return
		}
	}
}

// call sends a request and waits for its response, its ctx or the loss of
// the connection.
func (f *framer) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	params, err := f.hopParams(params)
	if err != nil {
		return nil, err
	}
	id := strconv.FormatInt(f.nextID.Add(1), 10)
	ch := make(chan message, 1)
	f.mu.Lock()
	select {
	case <-f.doneCh:
		f.mu.Unlock()
		return nil, errConnLost
	default:
	}
	f.pending[id] = ch
	f.mu.Unlock()
	line := make([]byte, 0, 64+len(method))
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, id...)
	line = append(line, `,"method":`...)
	line = append(line, mustJSON(method)...)
	if params != nil {
		raw, ok := params.(json.RawMessage)
		if !ok {
			b, err := json.Marshal(params)
			if err != nil {
				f.forget(id)
				return nil, err
			}
			raw = b
		}
		line = append(line, `,"params":`...)
		line = append(line, raw...)
	}
	line = append(line, '}')
	if err := f.writeRaw(ctx, line); err != nil {
		f.forget(id)
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, errConnLost
		}
		return resultOf(m)
	case <-ctx.Done():
		f.forget(id)
		// Tell the server to stop working on it, best effort. A serial
		// framer queues the notice before the next caller's turn, so it
		// reaches the server ahead of the next request (the write queue
		// is ordered and rarely full; the wait is bounded). Otherwise it
		// goes in the background, so a server that stopped reading cannot
		// delay the caller past its deadline.
		cancelled := map[string]any{"requestId": json.RawMessage(id), "reason": cancelReason(ctx)}
		if f.serial {
			nctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_ = f.notify(nctx, "notifications/cancelled", cancelled)
			cancel()
			return nil, ctx.Err()
		}
		go func() {
			nctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = f.notify(nctx, "notifications/cancelled", cancelled)
		}()
		return nil, ctx.Err()
	}
}

func cancelReason(ctx context.Context) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out in gateway"
	}
	return "cancelled by client"
}

func resultOf(m message) (json.RawMessage, error) {
	if m.Error != nil {
		return nil, &switchboard.RPCError{Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
	}
	if m.Result == nil {
		return json.RawMessage(`{}`), nil
	}
	return m.Result, nil
}

func (f *framer) forget(id string) {
	f.mu.Lock()
	delete(f.pending, id)
	f.mu.Unlock()
}

func (f *framer) notify(ctx context.Context, method string, params any) error {
	n := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		n["params"] = params
	}
	return f.write(ctx, n)
}

// fifo is a lock handed to waiters strictly in arrival order (sync.Mutex
// is not FIFO: a newcomer can overtake goroutines already waiting). A
// waiter whose ctx ends leaves the line without ever holding the lock.
type fifo struct {
	mu      sync.Mutex
	held    bool
	waiters []chan struct{} // closed when the lock is handed to that waiter
	// changed is closed and replaced whenever the line changes, for tests
	// that wait for a caller to be queued.
	changed chan struct{}
}

func newFIFO() *fifo { return &fifo{changed: make(chan struct{})} }

func (q *fifo) notifyLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// acquire waits for the caller's turn. It returns ctx.Err() when ctx ends
// first; the caller then does not hold the lock.
func (q *fifo) acquire(ctx context.Context) error {
	q.mu.Lock()
	if !q.held && len(q.waiters) == 0 {
		q.held = true
		q.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	q.notifyLocked()
	q.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	err := ctx.Err()
	q.mu.Lock()
	for i, w := range q.waiters {
		if w == turn {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.notifyLocked()
			q.mu.Unlock()
			return err
		}
	}
	q.mu.Unlock()
	// The lock was handed over just as we gave up: pass it on.
	q.release()
	return err
}

// release hands the lock to the longest waiter, or frees it.
func (q *fifo) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiters) == 0 {
		q.held = false
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	q.notifyLocked()
	close(next)
}

// state reports whether the lock is held and how many callers wait, with
// a channel closed at the next change.
func (q *fifo) state() (held bool, waiting int, changed <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held, len(q.waiters), q.changed
}

// discover asks a server that refused initialize whether it speaks
// 2026-07-28 (server/discover); if it does, the connection is stateless
// from now on and discover reports true.
func (f *framer) discover(ctx context.Context, version string) bool {
	f.setStateless(version)
	res, err := f.call(ctx, "server/discover", nil)
	if err == nil {
		var dr struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if json.Unmarshal(res, &dr) == nil && slices.Contains(dr.SupportedVersions, Revision20260728) {
			return true
		}
	}
	f.setLegacy("")
	return false
}
