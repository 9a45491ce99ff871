package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

type loggerKey struct{}

// reqInfo is what withRequestLog learned about a request. Edges mounted
// inside another edge's Wrap (the projects' edges) log the request with
// their own logger: it names their project and redacts their secrets.
type reqInfo struct {
	attrs []any        // request_id, session_id
	log   *slog.Logger // for the "request" line: the serving edge's, without attrs (added only when it logs)
}

// reqLog returns this edge's logger with the request's attributes, or
// the edge's logger outside a request.
func (s *Server) reqLog(ctx context.Context) *slog.Logger {
	if ri, ok := ctx.Value(loggerKey{}).(*reqInfo); ok {
		return s.log.With(ri.attrs...)
	}
	return s.log
}

// person is who a request's calls are logged as (Options.Person).
type person struct{ principal, name string }

type personKey struct{}

// withPerson puts the person behind each request in its context, for the
// call log.
func (s *Server) withPerson(next http.Handler) http.Handler {
	if s.opts.Person == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, n := s.opts.Person(r); p != "" {
			r = r.WithContext(context.WithValue(r.Context(), personKey{}, person{p, n}))
		}
		next.ServeHTTP(w, r)
	})
}

func personOf(ctx context.Context) person {
	p, _ := ctx.Value(personKey{}).(person)
	return p
}

// claim makes this edge's logger the one that logs the request; the
// "request" line is written after the handler returns, on the same
// goroutine.
func (s *Server) claim(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ri, ok := r.Context().Value(loggerKey{}).(*reqInfo); ok {
			ri.log = s.log
		}
		next.ServeHTTP(w, r)
	})
}

// validRequestID accepts a client's X-Request-Id only when it is short and
// plain, so logs cannot be forged through it.
var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// withRequestLog gives every request an id (the client's X-Request-Id when
// it is plain, else a random one), echoes it in the response and logs the
// request at debug level with its session.
func (s *Server) withRequestLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !validRequestID.MatchString(id) {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		attrs := []any{"request_id", id}
		if sid := r.Header.Get("Mcp-Session-Id"); sid != "" && len(sid) <= 128 {
			attrs = append(attrs, "session_id", sid)
		} else if sid := r.URL.Query().Get("sessionId"); sid != "" && len(sid) <= 128 {
			attrs = append(attrs, "session_id", sid)
		}
		ri := &reqInfo{attrs: attrs, log: s.log}
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), loggerKey{}, ri)))
		if ri.log.Enabled(r.Context(), slog.LevelDebug) { // no allocation when off
			ri.log.With(ri.attrs...).Debug("request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush keeps SSE streaming through the recorder.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
