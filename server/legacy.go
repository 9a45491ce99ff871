package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// maxLegacyInFlight bounds the messages one legacy session may have in
// flight: each holds a goroutine and its body until its answer is queued.
const maxLegacyInFlight = 64

// legacySessions are clients of the HTTP+SSE transport (protocol
// 2024-11-05): GET /sse opens a stream whose first event names the POST
// endpoint; every response and notification goes down that stream.
type legacySessions struct {
	mu   sync.Mutex
	byID map[string]*legacySession
	// onEnd hears every session that ends (Options.OnSessionEnd); whoever
	// removes it from byID calls it, so it runs once per session.
	onEnd func(id string)
}

type legacySession struct {
	id     string
	owner  string // the principal that opened it (Options.Principal)
	out    chan []byte
	slots  chan struct{} // messages in flight; bounds what one client can pin
	ctx    context.Context
	cancel context.CancelFunc
	ended  bool // reported to onEnd; under legacySessions.mu
}

func newLegacySessions(onEnd func(string)) *legacySessions {
	return &legacySessions{byID: map[string]*legacySession{}, onEnd: onEnd}
}

func (l *legacySessions) add(parent context.Context) *legacySession {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(parent)
	ls := &legacySession{id: "sse-" + hex.EncodeToString(b[:]), out: make(chan []byte, 256),
		slots: make(chan struct{}, maxLegacyInFlight), ctx: ctx, cancel: cancel}
	l.mu.Lock()
	l.byID[ls.id] = ls
	l.mu.Unlock()
	return ls
}

func (l *legacySessions) get(id string) *legacySession {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id]
}

// remove ends a session whose stream is gone.
func (l *legacySessions) remove(ls *legacySession) {
	l.mu.Lock()
	live := !ls.ended
	ls.ended = true
	delete(l.byID, ls.id)
	l.mu.Unlock()
	ls.cancel()
	if live && l.onEnd != nil {
		l.onEnd(ls.id)
	}
}

func (l *legacySessions) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byID)
}

// broadcast queues msg for every stream without blocking; a stream whose
// queue is full misses it (it is a hint to re-list, not data).
func (l *legacySessions) broadcast(msg []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ls := range l.byID {
		select {
		case ls.out <- msg:
		default:
		}
	}
}

// closeAll ends every session (Shutdown): their streams send what is
// queued and close, and each is reported ended now, not when its handler
// gets round to returning.
func (l *legacySessions) closeAll() {
	l.mu.Lock()
	var ended []*legacySession
	for _, ls := range l.byID {
		if !ls.ended {
			ls.ended = true
			ended = append(ended, ls)
		}
	}
	l.mu.Unlock()
	for _, ls := range ended {
		ls.cancel()
		if l.onEnd != nil {
			l.onEnd(ls.id)
		}
	}
}

// send queues msg for the stream, waiting while the queue is full unless
// the stream is gone: a response the client waits for is never dropped.
func (ls *legacySession) send(msg []byte) {
	select {
	case ls.out <- msg:
	case <-ls.ctx.Done():
	}
}

func (s *Server) handleSSE(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeRPCError(w, http.StatusInternalServerError, nil, switchboard.CodeInternalError, "streaming unsupported")
		return
	}
	if !s.roomForSession(w, nil) {
		return
	}
	ls := s.legacy.add(s.ctx)
	defer s.legacy.remove(ls)
	if s.opts.Principal != nil {
		ls.owner = s.opts.Principal(r)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	// The endpoint sits beside the stream: /sse -> /message, and
	// /projects/p/sse -> /projects/p/message.
	endpoint := strings.TrimSuffix(r.URL.Path, "sse") + "message?sessionId=" + ls.id
	_, _ = w.Write([]byte("event: endpoint\ndata: " + endpoint + "\n\n"))
	fl.Flush()
	rc := http.NewResponseController(w)
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ls.ctx.Done():
			// Answers queued before the session ended (the last calls of
			// a graceful shutdown) still go out.
			for {
				select {
				case msg := <-ls.out:
					_ = rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
					if !writeEvent(w, msg) {
						return
					}
				default:
					return
				}
			}
		case <-hb.C:
			_ = rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return
			}
			fl.Flush()
		case msg := <-ls.out:
			// A client that stops reading loses its stream (and session).
			_ = rc.SetWriteDeadline(time.Now().Add(responseWriteTimeout))
			if !writeEvent(w, msg) {
				return
			}
		}
	}
}

// handleMessage takes one client message for a legacy session. It answers
// 202 at once; the response goes down the session's stream.
func (s *Server) handleMessage(w http.ResponseWriter, r *http.Request) {
	ls := s.legacy.get(r.URL.Query().Get("sessionId"))
	if ls == nil {
		writeRPCError(w, http.StatusNotFound, nil, switchboard.CodeInvalidRequest, "unknown sessionId; open GET /sse and use the endpoint it sends")
		return
	}
	if s.opts.Principal != nil && ls.owner != s.opts.Principal(r) {
		writeRPCError(w, http.StatusForbidden, nil, switchboard.CodeInvalidRequest, "this session was opened with another token; open GET /sse with this token")
		return
	}
	body, m, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	if m.Method == "" && s.out.resolve(ls.id, m) {
		// A client's answer to a request the edge sent it for an upstream.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	select {
	case ls.slots <- struct{}{}:
	default:
		writeRPCError(w, http.StatusTooManyRequests, m.idOrNil(), switchboard.CodeInvalidRequest,
			"too many messages in flight on this session; wait for answers before sending more")
		return
	}
	s.goMu.Lock()
	if s.closing {
		s.goMu.Unlock()
		<-ls.slots
		writeRPCError(w, http.StatusServiceUnavailable, m.idOrNil(), switchboard.CodeInvalidRequest, "shutting down")
		return
	}
	s.calls.Add(1)
	s.goMu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	// The answer outlives the request: it runs on the session's context,
	// carrying the request's trace context and log attributes (request
	// and session id).
	ctx := withTraceContext(ls.ctx, r.Header)
	if ri := r.Context().Value(loggerKey{}); ri != nil {
		ctx = context.WithValue(ctx, loggerKey{}, ri)
	}
	if p := r.Context().Value(personKey{}); p != nil {
		ctx = context.WithValue(ctx, personKey{}, p)
	}
	go func() {
		defer s.calls.Done()
		defer func() { <-ls.slots }()
		switch {
		case !m.isNotification() && m.Method != "" && s.servesMethod(m.Method):
			if s.offersRequests(ls.id) {
				ctx = withPeer(ctx, s.newPeer(ls.id, func(msg []byte) bool {
					select {
					case ls.out <- msg:
						return true
					case <-ls.ctx.Done():
						return false
					}
				}))
			}
			resp := s.dispatch(ctx, ls.id, m, func(p json.RawMessage) {
				// Progress is advisory: dropped when the stream is backed up.
				select {
				case ls.out <- notification("notifications/progress", p):
				default:
				}
			})
			if resp != nil { // nil: the client cancelled the call, which gets no answer
				ls.send(resp)
			}
		case m.isNotification():
			s.cancelled(ls.id, m)
		case m.Method != "" && !mcpGoServes(m.Method):
			// Our own table, not mcp-go's fallback: mcp-go would answer
			// server/discover advertising 2026-07-28, which this
			// transport never speaks.
			ls.send(errorResponse(m.ID, sessionMethodNotFound(m.Method)))
		default:
			resp := s.mcp.HandleMessage(ls.ctx, body)
			if resp == nil {
				return
			}
			if m.Method == "initialize" {
				s.sessionStarted(ls.id, m.Params)
			}
			b, err := json.Marshal(resp)
			if err != nil {
				b = errorResponse(m.ID, &switchboard.RPCError{Code: switchboard.CodeInternalError, Message: "internal error"})
			}
			ls.send(b)
		}
	}()
}
