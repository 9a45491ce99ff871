// Package server is Switchboard's HTTP edge: the streamable-HTTP MCP
// endpoint (/mcp), the legacy HTTP+SSE transport (/sse, /message), status,
// health and readiness, Origin validation, CORS and body limits.
//
// Sessions, initialize, ping and the server-to-client GET stream are
// mark3labs/mcp-go's streamable HTTP server. tools/list, tools/call and
// cancellation are answered here, in dispatch.go, because mcp-go v1.2.1
// turns every handler error into -32603, unknown tools into -32602 and
// re-encodes tool objects and results; answering them ourselves is the one
// place where codes and bytes on the wire are exactly right.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/rs/cors"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/httpbody"
)

// Gateway is what the edge needs from the upstream side.
type Gateway interface {
	// Tools returns the tool catalog, connecting servers never tried yet.
	Tools(ctx context.Context) *switchboard.Catalog
	// Catalog returns the current tools and never connects anything.
	Catalog() *switchboard.Catalog
	// Call forwards a tool call and returns the upstream's raw result.
	// req.Project and req.Session are set by the edge.
	Call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error)
	// Status reports every upstream.
	Status() []switchboard.ServerStatus
}

// Options configure the edge.
type Options struct {
	Version        string
	CORS           bool
	CORSOrigins    []string      // also the allowed Origins beyond loopback
	MaxBodyBytes   int64         // default 4 MiB
	SessionIdleTTL time.Duration // default 30m
	MaxSessions    int           // open sessions (both transports); default 10000
	Heartbeat      time.Duration // default 25s
	Logger         *slog.Logger
	// Project labels this edge's metrics; default "default".
	Project string
	// Observer, when set, is told about every tool call.
	Observer Observer
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// BasePath mounts the MCP routes under a prefix: "/projects/p" serves
	// /projects/p/mcp, /projects/p/sse and /projects/p/message. An edge
	// with a BasePath serves nothing else (status, health and metrics
	// belong to the top level).
	BasePath string
	// Principal, when set, names who sent a request (for example the
	// token that authenticated it). A session belongs to the principal
	// that opened it: requests on it from another principal get 403.
	Principal func(*http.Request) string
	// Person, when set, names the person behind a request for the call
	// log (switchboard.ToolCallRecord.Principal and PrincipalName); ""
	// when there is none (a static token).
	Person func(*http.Request) (principal, name string)
	// OpenSessions, when set, replaces this edge's own count in the
	// MaxSessions check, so several edges can share one limit.
	OpenSessions func() int
	// MaxProjectSessions, when positive, also caps this edge's own
	// sessions, so one project cannot take a shared MaxSessions.
	MaxProjectSessions int
	// HopID, when set, is this gateway's hop id (see
	// switchboard.HopHeader): a request carrying it came from this very
	// gateway and is refused with 508.
	HopID string
	// OnSessionEnd, when set, is called exactly once for every client
	// session that ends: a DELETE, idle expiry, a legacy SSE stream that
	// dropped, or Shutdown (which returns after the calls). session is the
	// id the edge put in CallRequest.Session. It runs on the goroutine that
	// ended the session (a request handler, the sweeper, Shutdown) without
	// the edge's locks held, so it must not block for long: slow cleanup
	// belongs in a goroutine the callee owns.
	OnSessionEnd func(session string)
	// StatusSections, when set, adds sections to the status JSON (GET /
	// and a plain GET /mcp) of project, such as "sandbox"; it is called
	// per request and must return within ctx.
	StatusSections func(ctx context.Context, project string) map[string]any
	// SessionTools, when set, serves the tools that one client session
	// added to its own view (catalog servers it activated with mcp-add).
	SessionTools SessionTools
	// ListPageSize is how many tools one page of tools/list holds;
	// default 1000 (a longer list comes in pages, with nextCursor).
	ListPageSize int
}

// SessionTools are tools only one client session, or one sessionless
// caller (CallRequest.Caller: a token and client identity), sees. They are
// listed after the project's tools and called when the project's catalog
// has no tool of that name: a project tool wins a collision.
type SessionTools interface {
	// SessionCatalog returns the own tools of session (a session id or a
	// sessionless caller's key), nil when it has none.
	// It runs on every tools/list and tools/call of a session: it must be
	// cheap and must not block.
	SessionCatalog(session string) *switchboard.Catalog
	// CallSessionTool runs a tool of req.Session's own catalog. Errors are
	// domain errors or *switchboard.RPCError, as from Gateway.Call.
	CallSessionTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error)
}

// CatalogCaller is SessionTools that can also run a catalog tool called
// by name by any client, with or without a session, activating its
// server for the caller (the catalog's): tried when no project or
// session tool has the name.
type CatalogCaller interface {
	ProvidesTool(name string) bool
	CallCatalogTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error)
}

// Observer records tool calls (metrics, the call log). It must not block.
// In rec, Server is "" for tools no server offers, Tool is the name the
// client called, and Arguments are the client's raw (unredacted) bytes.
type Observer interface {
	ObserveCall(rec switchboard.ToolCallRecord)
}

// Deadlines on client I/O, so a client that stops reading or writing
// holds only its own request, and not for long.
const (
	progressWriteTimeout = 10 * time.Second // one progress event
	responseWriteTimeout = 30 * time.Second // the final response
)

// supportedVersions are the MCP protocol versions the endpoint speaks. The
// 2026-07-28 stateless era is left out: it has no sessions or GET stream.
var supportedVersions = []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618, mcp.ProtocolVersion20250326, "2024-11-05"}

// Server is the HTTP edge of one project.
type Server struct {
	gw      Gateway
	opts    Options
	log     *slog.Logger
	started time.Time

	mcp        *mcpserver.MCPServer
	streamable *mcpserver.StreamableHTTPServer
	sessions   *sessions
	legacy     *legacySessions
	mux        *http.ServeMux
	handler    http.Handler

	rendered atomic.Pointer[renderedList]
	inflight sync.Map // session + "\x00" + id -> context.CancelCauseFunc

	// renderedStateless is rendered with the 2026-07-28 members added.
	renderedStateless atomic.Pointer[renderedStateless]
	listens           listeners // open subscriptions/listen streams

	// MCP beyond tools (features.go): each session's client, the
	// resource subscriptions (uri -> sessions) and the requests sent to
	// clients on an upstream's behalf.
	clients sync.Map // session -> *clientState
	subMu   sync.Mutex
	subs    map[string]map[string]bool
	subCall sync.Mutex // orders upstream (un)subscriptions (features.go)
	out     outbound
	rounds  rounds // 2026-07-28 calls waiting for the client's input (mrtr.go)

	ready   atomic.Bool
	goMu    sync.Mutex // guards closing against calls.Add
	closing bool
	ctx     context.Context // lifetime; cancelled by Shutdown
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the sweeper
	// sweepOnce starts the sweeper with the first session (the
	// constructor starts nothing); Shutdown takes it too, so no sweeper
	// starts after it.
	sweepOnce sync.Once
	calls     sync.WaitGroup // legacy messages being answered
	shutOnce  sync.Once
}

type renderedList struct {
	catalog *switchboard.Catalog
	result  []byte
}

// New builds the edge for gw. It starts the idle-session sweeper; call
// Shutdown to stop it.
func New(gw Gateway, opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 4 << 20
	}
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = 30 * time.Minute
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 10000
	}
	if opts.ListPageSize <= 0 {
		opts.ListPageSize = 1000
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 25 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Project == "" {
		opts.Project = "default"
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{gw: gw, opts: opts, log: opts.Logger, started: time.Now(), ctx: ctx, cancel: cancel, subs: map[string]map[string]bool{}}
	onEnd := func(id string) {
		s.sessionEnded(id)
		if opts.OnSessionEnd != nil {
			opts.OnSessionEnd(id)
		}
	}
	s.sessions, s.legacy = newSessions(opts.SessionIdleTTL, onEnd), newLegacySessions(onEnd)
	mopts := []mcpserver.ServerOption{mcpserver.WithToolCapabilities(true), mcpserver.WithRecovery()}
	if _, ok := gw.(Features); ok {
		// Answered by the edge (features.go); the options only make
		// initialize declare them.
		mopts = append(mopts, mcpserver.WithPromptCapabilities(true), mcpserver.WithResourceCapabilities(true, true),
			mcpserver.WithLogging(), mcpserver.WithCompletions())
	}
	s.mcp = mcpserver.NewMCPServer("switchboard", opts.Version, mopts...)
	s.streamable = mcpserver.NewStreamableHTTPServer(s.mcp,
		mcpserver.WithSessionIdManager(s.sessions),
		mcpserver.WithHeartbeatInterval(opts.Heartbeat),
		mcpserver.WithEventStore(mcpserver.NewInMemoryEventStore()),
		mcpserver.WithStreamableHTTPProtocolVersions(supportedVersions[:3]...),
		mcpserver.WithStreamableHTTPLogger(opts.Logger),
		// Host and Origin are checked in guard for every route.
		mcpserver.WithDisableLocalhostProtection(true))
	s.mux = s.routes()
	s.handler = s.Wrap(s.mux)
	s.ready.Store(true)
	s.sessions.onNew = s.startSweep
	return s
}

// startSweep starts the idle-session sweeper, once, unless the edge is
// shutting down.
func (s *Server) startSweep() {
	s.sweepOnce.Do(func() {
		if s.ctx.Err() == nil {
			s.wg.Go(s.sweep)
		}
	})
}

// Handler returns the edge's HTTP handler: its routes behind Wrap.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns the edge's routes without the Origin, Host, CORS and
// logging layers of Wrap, for mounting inside a handler that has them;
// requests it serves are logged with this edge's logger.
func (s *Server) Routes() http.Handler { return s.claim(s.withPerson(s.mux)) }

// Wrap puts h behind the edge's request log, Origin and Host checks and,
// when enabled, CORS: what every route of the gateway needs.
func (s *Server) Wrap(h http.Handler) http.Handler {
	if s.opts.CORS {
		h = cors.New(cors.Options{
			AllowedOrigins: s.opts.CORSOrigins,
			AllowedMethods: []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions},
			AllowedHeaders: []string{"Content-Type", "Accept", "Authorization", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id", "Mcp-Method", "Mcp-Name"},
			// WWW-Authenticate: a browser client finds the resource
			// metadata (sign-in) in a 401's challenge.
			ExposedHeaders:   []string{"Mcp-Session-Id", "WWW-Authenticate"},
			AllowCredentials: false,
		}).Handler(h)
	}
	return s.withRequestLog(s.guard(h))
}

// onlyMethod answers the other methods of a legacy transport path with
// 405 in the JSON-RPC error shape the transport speaks (ServeMux would
// answer in plain text).
func onlyMethod(allow, hint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeRPCError(w, http.StatusMethodNotAllowed, nil, switchboard.CodeInvalidRequest, "method not allowed; "+hint)
	}
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	base := s.opts.BasePath
	mux.HandleFunc(base+"/mcp", s.handleMCP)
	mux.HandleFunc("GET "+base+"/sse", s.handleSSE)
	mux.HandleFunc(base+"/sse", onlyMethod("GET", "GET /sse opens the legacy event stream; send messages to the endpoint it names"))
	mux.HandleFunc("POST "+base+"/message", s.handleMessage)
	mux.HandleFunc(base+"/message", onlyMethod("POST", "POST /message?sessionId=... sends one message of a legacy session"))
	if base != "" {
		return mux
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.ready.Load() {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.HandleFunc("GET /{$}", s.handleStatus)
	if s.opts.Metrics != nil {
		mux.Handle("GET /metrics", s.opts.Metrics)
	}
	return mux
}

// guard rejects requests from foreign origins (403, per the MCP transport
// rules: allowed origins are the CORS origins plus loopback) and, when the
// listener is on loopback, Host headers that are not loopback names (DNS
// rebinding).
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		forbid := func(msg string) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				// The admin API's own error shape.
				writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]string{"code": "forbidden", "message": msg}})
				return
			}
			writeRPCError(w, http.StatusForbidden, nil, switchboard.CodeInvalidRequest, msg)
		}
		if s.opts.HopID != "" && hasHop(r.Header, s.opts.HopID) {
			writeRPCError(w, http.StatusLoopDetected, nil, switchboard.CodeInvalidRequest,
				"request loop: this request was sent by this gateway itself; an upstream server of the gateway points back at it (remove that server or point it elsewhere)")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o) {
			forbid("origin not allowed; add it to MCP_SERVER_CORS_ORIGINS (with MCP_ENABLE_CORS=true) to allow browser clients from it")
			return
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopbackAddr(la) && !isLoopbackHost(r.Host) {
			forbid("host not allowed: this gateway listens on loopback only; connect to 127.0.0.1 or localhost")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) originAllowed(origin string) bool {
	for _, o := range s.opts.CORSOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackHost(u.Host)
}

func isLoopbackAddr(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return false
}

func isLoopbackHost(hostport string) bool {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.Trim(h, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// handleMCP serves the streamable-HTTP endpoint.
func (s *Server) handleMCP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		s.handlePost(w, r)
	case http.MethodGet:
		if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			s.handleStatus(w, r)
			return
		}
		if statelessStreamGone(w, r) {
			return
		}
		// mcp-go opens a stream (and registers a session that is never
		// freed, since an event store is set) for any id, even none.
		id, ok := s.checkSession(w, r, nil)
		if !ok {
			return
		}
		s.sessions.streamOpened(id)
		defer s.sessions.streamClosed(id)
		s.streamable.ServeHTTP(w, r)
	case http.MethodDelete:
		if statelessStreamGone(w, r) {
			return
		}
		if _, ok := s.checkSession(w, r, nil); !ok {
			return
		}
		s.streamable.ServeHTTP(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeRPCError(w, http.StatusMethodNotAllowed, nil, switchboard.CodeInvalidRequest, "method not allowed; use POST for messages, GET for the event stream, DELETE to end a session")
	}
}

// readMessage reads and checks one JSON-RPC message from a POST body. On
// failure it has already answered the request.
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request) ([]byte, *rpcMessage, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeRPCError(w, http.StatusUnsupportedMediaType, nil, switchboard.CodeInvalidRequest, "Content-Type must be application/json")
			return nil, nil, false
		}
	}
	// A missing Content-Type is taken as JSON, for every method alike.
	r.Header.Set("Content-Type", "application/json")
	tooLarge := func() {
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, switchboard.CodeInvalidRequest,
			"request body exceeds the limit of "+strconv.FormatInt(s.opts.MaxBodyBytes, 10)+" bytes (MCP_SERVER_MAX_BODY_BYTES)")
	}
	// A declared length over the limit is refused before reading: the
	// client may be waiting for 100 Continue, or never send the body.
	if r.ContentLength > s.opts.MaxBodyBytes {
		tooLarge()
		return nil, nil, false
	}
	body, err := httpbody.Read(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			tooLarge()
			return nil, nil, false
		}
		writeRPCError(w, http.StatusBadRequest, nil, switchboard.CodeParseError,
			"the request body did not arrive in full within "+httpbody.Timeout.String()+"; send it at once, with a correct Content-Length")
		return nil, nil, false
	}
	m, rerr := parseMessage(body)
	if rerr != nil {
		status := http.StatusBadRequest
		writeRPCError(w, status, m.idOrNil(), rerr.Code, rerr.Message)
		return nil, nil, false
	}
	return body, m, true
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	body, m, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	// Give mcp-go the body we consumed.
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if m.Method == "initialize" {
		s.initialize(w, r, m)
		return
	}
	if isStatelessRequest(r, m) {
		s.statelessPost(w, r.WithContext(s.withCaller(r, m)), m)
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" {
		s.stateless(w, r.WithContext(s.withCaller(r, m)), m)
		return
	}
	sid, ok := s.checkSession(w, r, m.idOrNil())
	if !ok {
		return
	}
	if m.Method == "" && s.out.resolve(sid, m) {
		// A client's answer to a request the edge sent it for an upstream.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch {
	case s.servesMethod(m.Method):
	default:
		if !m.isNotification() && m.Method != "" && !mcpGoServes(m.Method) {
			writeRPCError(w, http.StatusOK, m.ID, switchboard.CodeMethodNotFound, sessionMethodNotFound(m.Method).Message)
			return
		}
		// Everything else (ping, notifications, responses) is mcp-go's.
		s.streamable.ServeHTTP(w, r)
		return
	}
	if m.isNotification() {
		s.cancelled(sid, m)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := &postWriter{w: w, sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	ctx := withStream(withTraceContext(r.Context(), r.Header), out)
	if out.sse && s.offersRequests(sid) {
		// Requests an upstream makes of this client while serving this
		// request go down this request's own stream.
		ctx = withPeer(ctx, s.newPeer(sid, out.event))
	}
	resp := s.dispatch(ctx, sid, m, out.progress)
	out.finish(resp)
}

// stateless answers a plain JSON-RPC POST that names no session, the way
// a script or curl calls a tool: tools/list, tools/call and ping are
// served as for a session with no client capabilities (same auth, error
// table, call log and metrics; the log's session is empty); a
// notification is accepted and dropped; anything else is -32601. A
// request that names a session goes through checkSession instead, so an
// unknown or ended session is still 404.
func (s *Server) stateless(w http.ResponseWriter, r *http.Request, m *rpcMessage) {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !versionSupported(v) {
		writeRPCError(w, http.StatusBadRequest, m.idOrNil(), switchboard.CodeInvalidRequest,
			"unsupported MCP-Protocol-Version; supported: "+strings.Join(supportedVersions, ", "))
		return
	}
	if m.isNotification() || m.Method == "" {
		// Notifications (nothing to cancel without a session) and
		// responses to requests we never sent.
		w.WriteHeader(http.StatusAccepted)
		return
	}
	out := &postWriter{w: w, sse: strings.Contains(r.Header.Get("Accept"), "text/event-stream")}
	switch m.Method {
	case "tools/list", "tools/call":
		out.finish(s.dispatch(withTraceContext(r.Context(), r.Header), "", m, out.progress))
	case "prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read", "completion/complete":
		out.finish(s.dispatch(withTraceContext(r.Context(), r.Header), "", m, out.progress))
	case "ping":
		out.finish(response(m.ID, []byte(`{}`)))
	default:
		out.finish(errorResponse(m.ID, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound,
			Message: "method " + switchboard.Clip(m.Method) + " needs a session: send initialize first (without a session only tools/list, tools/call and ping are served)"}))
	}
}

// checkSession answers every request but initialize that lacks a session
// (400), names an unknown or ended one (404) or an unsupported
// MCP-Protocol-Version (400), so mcp-go only ever sees live sessions.
func (s *Server) checkSession(w http.ResponseWriter, r *http.Request, id json.RawMessage) (string, bool) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		writeRPCError(w, http.StatusBadRequest, id, switchboard.CodeInvalidRequest, "missing Mcp-Session-Id header; send initialize first and repeat the session id it returns")
		return "", false
	}
	if term, err := s.sessions.Validate(sid); err != nil || term {
		writeRPCError(w, http.StatusNotFound, id, switchboard.CodeInvalidRequest, "session not found or ended; send initialize to start a new session")
		return "", false
	}
	if s.opts.Principal != nil && s.sessions.owner(sid) != s.opts.Principal(r) {
		writeRPCError(w, http.StatusForbidden, id, switchboard.CodeInvalidRequest, "this session was opened with another token; send initialize with this token to start your own session")
		return "", false
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && !versionSupported(v) {
		writeRPCError(w, http.StatusBadRequest, id, switchboard.CodeInvalidRequest, "unsupported MCP-Protocol-Version; supported: "+strings.Join(supportedVersions, ", "))
		return "", false
	}
	return sid, true
}

// initialize lets mcp-go answer an initialize request, and ends the
// session mcp-go created for it unless the handshake succeeded: mcp-go
// mints a session before it looks at the message, for failed handshakes
// and for initialize sent as a notification too.
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, m *rpcMessage) {
	if m.isNotification() {
		writeRPCError(w, http.StatusBadRequest, nil, switchboard.CodeInvalidRequest, "initialize must be a request with an id")
		return
	}
	if !s.roomForSession(w, m.idOrNil()) {
		return
	}
	rec := httptest.NewRecorder()
	s.streamable.ServeHTTP(rec, r)
	// mcp-go sets the header only on a plain JSON reply.
	sid := rec.Header().Get("Mcp-Session-Id")
	var res struct {
		Result json.RawMessage `json:"result"`
	}
	if sid != "" && (rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &res) != nil || len(res.Result) == 0) {
		s.sessions.discard(sid)
		s.endSession(sid)
		rec.Header().Del("Mcp-Session-Id")
	} else if sid != "" {
		if s.opts.Principal != nil {
			s.sessions.setOwner(sid, s.opts.Principal(r))
		}
		s.sessionStarted(sid, m.Params)
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func versionSupported(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// postWriter answers one POST: plain JSON, or an SSE stream once a
// progress notification has to go out before the result.
type postWriter struct {
	w        http.ResponseWriter
	sse      bool
	mu       sync.Mutex
	streamed bool
	finished bool
	// queue holds the notifications notify took, for the goroutine
	// (owned by wg) that writes them; closed, nil, by finish.
	queue  chan []byte
	closed bool // finish began: notify takes no more
	wg     sync.WaitGroup
}

// notifyQueue bounds the notifications waiting for a slow client's
// stream; beyond it they are dropped, as mcp-go drops a session's.
const notifyQueue = 64

func (p *postWriter) progress(params json.RawMessage) {
	p.event(notification("notifications/progress", params))
}

// notify sends msg on the request's stream without blocking its caller
// (an upstream's reader, which serves every call of that server): a
// goroutine writes it, before the response. It reports false when the
// request has no stream to take it (the client does not accept SSE, or
// the response is being sent).
func (p *postWriter) notify(msg []byte) bool {
	if !p.sse {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.finished {
		return false
	}
	if p.queue == nil {
		p.queue = make(chan []byte, notifyQueue)
		q := p.queue
		p.wg.Go(func() {
			for m := range q {
				p.event(m)
			}
		})
	}
	select {
	case p.queue <- msg:
	default:
	}
	return true
}

// drain stops notify and waits until what it took is written, so the
// response comes after the messages that came before it.
func (p *postWriter) drain() {
	p.mu.Lock()
	p.closed = true
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	if q != nil {
		close(q)
		p.wg.Wait()
	}
}

// event sends msg on the request's stream, turning the answer into an
// SSE stream first; it reports false when it cannot (the client does not
// accept SSE, or the answer went).
func (p *postWriter) event(msg []byte) bool {
	if !p.sse {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return false
	}
	if !p.streamed {
		p.streamed = true
		h := p.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		p.w.WriteHeader(http.StatusOK)
	}
	// A client that stops reading its own stream must not hold the call.
	_ = http.NewResponseController(p.w).SetWriteDeadline(time.Now().Add(progressWriteTimeout))
	return writeEvent(p.w, msg)
}

// close ends the response's stream for good without an answer: events
// after it are dropped. It waits for an event being written.
func (p *postWriter) close() {
	p.drain()
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
}

// finish sends the response. A nil resp is a call the client cancelled,
// which gets none: a stream already open ends without it, and a POST
// still waiting for its HTTP answer gets 202 Accepted with no body (what
// a notification gets), the least wrong of the answers HTTP leaves: an
// empty 200 JSON or SSE body would be a broken response, and an error
// status a failure the client did not have.
func (p *postWriter) finish(resp []byte) {
	p.drain()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished = true
	if resp == nil {
		if !p.streamed {
			p.w.WriteHeader(http.StatusAccepted)
		}
		return
	}
	_ = http.NewResponseController(p.w).SetWriteDeadline(time.Now().Add(responseWriteTimeout))
	if p.streamed {
		writeEvent(p.w, resp)
		return
	}
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusOK)
	_, _ = p.w.Write(append(resp, '\n'))
}

func writeEvent(w http.ResponseWriter, data []byte) bool {
	b := make([]byte, 0, len(data)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	if _, err := w.Write(b); err != nil {
		return false
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// ToolsChanged tells every connected client that the tool list changed.
// Wire it to the upstream manager's change callback.
func (s *Server) ToolsChanged() {
	s.mcp.SendNotificationToAllClients(string(mcp.MethodNotificationToolsListChanged), nil)
	s.legacy.broadcast([]byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`))
	s.listens.notify(listenTools)
}

// SessionToolsChanged tells one client session that its own tool list
// changed (SessionTools). A streamable session gets it on its GET stream,
// a legacy one on its SSE stream, a sessionless caller (session is its
// CallRequest.Caller) on its subscriptions/listen streams; one without a
// stream misses it (it is a hint to re-list: the tool that changed it
// also says so in its result).
func (s *Server) SessionToolsChanged(session string) {
	if isCaller(session) {
		s.listens.notifyOwner(session, listenTools)
		return
	}
	if ls := s.legacy.get(session); ls != nil {
		select {
		case ls.out <- []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`):
		default:
		}
		return
	}
	_ = s.mcp.SendNotificationToSpecificClient(session, string(mcp.MethodNotificationToolsListChanged), nil)
}

// handleStatus answers GET / and a plain GET /mcp with what a human or a
// monitor wants to see.
// roomForSession answers 503 when MaxSessions sessions are open.
func (s *Server) roomForSession(w http.ResponseWriter, id json.RawMessage) bool {
	open := s.Sessions
	if s.opts.OpenSessions != nil {
		open = s.opts.OpenSessions
	}
	if s.opts.MaxProjectSessions > 0 && s.Sessions() >= s.opts.MaxProjectSessions {
		writeRPCError(w, http.StatusServiceUnavailable, id, switchboard.CodeInvalidRequest,
			"too many open sessions in this project (MCP_SERVER_MAX_SESSIONS_PER_PROJECT); end unused sessions with DELETE or try later")
		return false
	}
	if open() < s.opts.MaxSessions {
		return true
	}
	writeRPCError(w, http.StatusServiceUnavailable, id, switchboard.CodeInvalidRequest,
		"too many open sessions (MCP_SERVER_MAX_SESSIONS); end unused sessions with DELETE or try later")
	return false
}

// Sessions is the number of open client sessions, both transports.
func (s *Server) Sessions() int { return s.sessions.count() + s.legacy.count() }

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	ups := s.gw.Status()
	tools := 0
	for _, u := range ups {
		tools += switchboard.ListedTools(u)
	}
	status := map[string]any{
		"name":      "switchboard",
		"version":   s.opts.Version,
		"uptime":    time.Since(s.started).Round(time.Second).String(),
		"ready":     s.ready.Load(),
		"sessions":  s.Sessions(),
		"tools":     tools,
		"servers":   len(ups),
		"upstreams": ups,
		"endpoints": map[string]string{"mcp": s.opts.BasePath + "/mcp", "sse": s.opts.BasePath + "/sse"},
	}
	if s.opts.StatusSections != nil {
		for k, v := range s.opts.StatusSections(r.Context(), s.opts.Project) {
			if _, taken := status[k]; !taken {
				status[k] = v
			}
		}
	}
	writeJSON(w, http.StatusOK, status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// sweep ends sessions idle for longer than the idle timeout. It goes
// through mcp-go's own DELETE path so its per-session state is freed too.
func (s *Server) sweep() {
	t := time.NewTicker(max(s.opts.SessionIdleTTL/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		for _, id := range s.sessions.expired() {
			s.endSession(id)
		}
	}
}

func (s *Server) endSession(id string) {
	req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	req.Header.Set("Mcp-Session-Id", id)
	s.streamable.ServeHTTP(httptest.NewRecorder(), req)
	s.log.Debug("session expired", "session_id", id)
}

// Shutdown marks the edge not ready and refuses new legacy messages, lets
// the legacy calls in flight finish and send their answers down their
// streams (until ctx ends, when they are cancelled), then ends every
// client stream and session so HTTP shutdown is not held up by long-lived
// GET streams, and stops the sweeper. In-flight streamable POSTs are left
// to http.Server.Shutdown, which should run at the same time.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.shutOnce.Do(func() {
		s.ready.Store(false)
		s.goMu.Lock()
		s.closing = true
		s.goMu.Unlock()
		drained := make(chan struct{})
		go func() { s.calls.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-ctx.Done():
			err = fmt.Errorf("legacy calls still running at the shutdown deadline were cancelled: %w", ctx.Err())
		}
		s.cancel()
		s.legacy.closeAll()
		err = errors.Join(err, s.streamable.Shutdown(ctx))
		// mcp-go ends the sessions it tracks; those it does not (no
		// stream ever opened) end here, each reported once.
		s.sessions.endAll()
		s.calls.Wait()
		s.sweepOnce.Do(func() {}) // a sweeper starting now has started
		s.wg.Wait()
	})
	return err
}

// hasHop reports whether the hop header lists id.
func hasHop(h http.Header, id string) bool {
	for _, v := range h.Values(switchboard.HopHeader) {
		for _, part := range strings.Split(v, ",") {
			if strings.TrimSpace(part) == id {
				return true
			}
		}
	}
	return false
}
