package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboard-mcp/switchboard"
)

// remoteConn adapts mcp-go's legacy SSE and streamable HTTP client
// transports to conn. Requests go out raw through SendRequest so results
// and error codes are never decoded into lossy typed structs.
type remoteConn struct {
	hop
	tr       transport.Interface
	nextID   atomic.Int64
	doneCh   chan struct{}
	doneOnce sync.Once
	httpc    *http.Client
	// life ends with the connection: it bounds the cancellation
	// notifications sent in the background after a call gave up.
	life    context.Context
	endLife context.CancelFunc
	// broken is set when a reply or event passed the message limit.
	broken atomic.Pointer[string]

	// acked is called on each notifications/subscriptions/acknowledged
	// (set by listen before its first request), and acks counts them.
	acked atomic.Pointer[func()]
	acks  atomic.Int32
	// wg holds the subscriptions/listen goroutine; close waits for it.
	wg sync.WaitGroup
	// newProbe makes the transport server/discover goes out on (nil:
	// no probe, as on legacy SSE).
	newProbe func() (transport.Interface, error)
	// requests, once set, answers the server's requests other than ping
	// (ctx is the call's on the call's own response stream).
	requests atomic.Pointer[func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)]
}

func (c *remoteConn) brokenReason() string {
	if p := c.broken.Load(); p != nil {
		return *p
	}
	return ""
}

// startRemote connects to a remote upstream. ctx is the connection's
// lifetime (the SSE stream lives on it); connectCtx bounds the connect
// itself, so a server that accepts and never answers cannot hold it.
func startRemote(ctx, connectCtx context.Context, spec switchboard.ServerSpec, limit int64, hop string, onNote func(string, json.RawMessage), log *slog.Logger) (*remoteConn, error) {
	log = slog.New(transportLog{log.Handler()})
	life, endLife := context.WithCancel(context.Background())
	c := &remoteConn{doneCh: make(chan struct{}), life: life, endLife: endLife}
	// One client per upstream: its connections are not shared with other
	// upstreams, and no client header ever reaches it: only spec.Headers.
	// Every body is read through the message limit.
	_, deadline := spec.Headers[switchboard.DeadlineHeader]
	c.httpc = &http.Client{Transport: limitTransport{hop: hop, deadline: deadline, limit: limit, onExceed: func(err error) {
		msg := err.Error()
		c.broken.Store(&msg)
	}, base: traceTransport{base: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}}}}
	httpc := c.httpc
	var err error
	switch spec.Transport {
	case switchboard.TransportSSE:
		var sse *transport.SSE
		sse, err = transport.NewSSE(spec.URL,
			transport.WithHeaders(spec.Headers),
			transport.WithHTTPClient(httpc),
			transport.WithSSELogger(log),
			// The call's own context bounds every request; mcp-go's 60 s
			// default would cut long tool calls short.
			transport.WithResponseTimeout(24*time.Hour))
		if err == nil {
			sse.SetConnectionLostHandler(func(err error) {
				log.Warn("upstream SSE stream lost", "err", err)
				c.markDone()
			})
			c.tr = sse
		}
	default:
		// The connection's own transport listens on the GET stream, which
		// carries a 2025 session's list_changed; the deprecation is about
		// 2026-07-28, which probe speaks.
		//lint:ignore SA1019 the 2025 session's GET stream, on purpose
		listen := transport.WithContinuousListening()
		c.tr, err = transport.NewStreamableHTTP(spec.URL,
			transport.WithHTTPHeaders(spec.Headers),
			transport.WithHTTPBasicClient(httpc),
			transport.WithHTTPLogger(log),
			listen)
		// server/discover goes out on a transport of its own: mcp-go
		// opens a transport's gate to the GET stream on any discover
		// answered without a JSON-RPC error (a stateful go-sdk server
		// answers one, listing 2025 versions only), and a GET stream
		// opened before initialize has no session, so the listener
		// would start late and miss notifications. The probe becomes the
		// connection's transport if the server speaks 2026-07-28.
		c.newProbe = func() (transport.Interface, error) {
			p, err := transport.NewStreamableHTTP(spec.URL,
				transport.WithHTTPHeaders(spec.Headers),
				transport.WithHTTPBasicClient(httpc),
				transport.WithHTTPLogger(log))
			if err != nil {
				return nil, err
			}
			c.wire(p, onNote)
			if err := p.Start(ctx); err != nil {
				_ = p.Close()
				return nil, err
			}
			return p, nil
		}
	}
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrConfig, "server %q: %v", spec.Name, err)
	}
	c.wire(c.tr, onNote)
	stop := context.AfterFunc(connectCtx, func() { _ = c.tr.Close() })
	err = c.tr.Start(ctx)
	if !stop() && err == nil {
		err = fmt.Errorf("not connected within the connect timeout: %w", connectCtx.Err())
	}
	if err != nil {
		c.markDone()
		_ = c.tr.Close()
		return nil, err
	}
	return c, nil
}

// wire sets tr's handlers: notifications go to onNote (subscription
// acknowledgements to listen), and a server's requests get ping answered
// and -32601 for anything else.
func (c *remoteConn) wire(tr transport.Interface, onNote func(string, json.RawMessage)) {
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/subscriptions/acknowledged" {
			if f := c.acked.Load(); f != nil {
				(*f)()
			}
			return
		}
		params, _ := json.Marshal(n.Params)
		onNote(n.Method, params)
	})
	if bt, ok := tr.(transport.BidirectionalInterface); ok {
		bt.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
			if req.Method == "ping" {
				return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
			}
			if h := c.requests.Load(); h != nil {
				params, _ := json.Marshal(req.Params)
				res, err := (*h)(ctx, req.Method, params)
				var rpc *switchboard.RPCError
				if errors.As(err, &rpc) {
					var data any
					if len(rpc.Data) > 0 {
						data = rpc.Data
					}
					return transport.NewJSONRPCErrorResponse(req.ID, rpc.Code, rpc.Message, data), nil
				}
				if err != nil {
					return transport.NewJSONRPCErrorResponse(req.ID, switchboard.CodeInternalError, switchboard.Message(err), nil), nil
				}
				return transport.NewJSONRPCResultResponse(req.ID, res), nil
			}
			return transport.NewJSONRPCErrorResponse(req.ID, switchboard.CodeMethodNotFound, "switchboard does not offer "+req.Method, nil), nil
		})
	}
}

func (c *remoteConn) markDone() {
	c.doneOnce.Do(func() {
		close(c.doneCh)
		c.endLife()
	})
}

func (c *remoteConn) done() <-chan struct{} { return c.doneCh }

func (c *remoteConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	select {
	case <-c.doneCh:
		return nil, errConnLost
	default:
	}
	params, err := c.hopParams(params)
	if err != nil {
		return nil, err
	}
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(c.nextID.Add(1)), Method: method, Params: params}
	if c.stateless() {
		req.Header = standardHeaders(method, params)
	}
	id := req.ID
	// mcp-go's SSE client arms its own timer from ctx's deadline and races
	// it against ctx, so it can give up a moment before ctx ends with an
	// error that is not ctx's. Hand it a context without the deadline that
	// ends when ctx does: a deadline is then always reported as one.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	// A lost SSE stream never answers: fail calls in flight at once.
	go func() {
		select {
		case <-c.doneCh:
			cancel()
		case <-sctx.Done():
		}
	}()
	resp, err := c.tr.SendRequest(sctx, req)
	if err != nil && c.brokenReason() != "" {
		// A reply (or an event on the stream) passed the message limit:
		// reset the connection so status says why and callers are told.
		c.markDone()
		return nil, errConnLost
	}
	if err != nil {
		if ctx.Err() != nil && c.stateless() {
			// On 2026-07-28 closing the request's stream is the
			// cancellation; there is no notification to send.
			return nil, ctx.Err()
		}
		if ctx.Err() != nil {
			// HTTP transports do not tell the server; we do, in the
			// background: the caller's deadline has passed, and a server
			// stuck on the call may be just as stuck on the notification
			// (notify waits up to 5 s; the connection's end cuts it short).
			reason := cancelReason(ctx)
			go func() {
				_ = c.notify(c.life, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason})
			}()
			return nil, ctx.Err()
		}
		if errors.Is(err, transport.ErrSessionTerminated) && c.stateless() {
			// No session to lose on 2026-07-28: a 404 is the revision's
			// status for -32601 (mcp-go's transport drops its body).
			return nil, &switchboard.RPCError{Code: switchboard.CodeMethodNotFound, Message: "method not found: " + method}
		}
		if errors.Is(err, transport.ErrSessionTerminated) {
			// The server answered 404 for our session (it restarted and
			// forgot it), or an earlier request got that answer and the
			// transport did not send this one: either way the request
			// never ran, so the caller may send it again on a new session.
			// Checked before doneCh: a concurrent request's 404 may have
			// ended the connection first.
			c.markDone()
			return nil, errSessionLost
		}
		select {
		case <-c.doneCh:
			return nil, errConnLost
		default:
		}
		var ue *url.Error
		if errors.Is(err, transport.ErrTransportClosed) || errors.As(err, &ue) {
			// The request got no HTTP answer at all (refused, reset, DNS):
			// rebuild and re-initialize on next use, through the breaker,
			// so status and the breaker see a server that went away.
			c.markDone()
			if ue != nil {
				// The cause only: the URL may hold an interpolated secret.
				return nil, fmt.Errorf("%w: %v", errConnLost, ue.Err)
			}
			return nil, errConnLost
		}
		return nil, fmt.Errorf("%w: %v", errConnLost, err)
	}
	if resp.Error != nil {
		var data json.RawMessage
		if resp.Error.Data != nil {
			data, _ = json.Marshal(resp.Error.Data)
		}
		return nil, &switchboard.RPCError{Code: resp.Error.Code, Message: resp.Error.Message, Data: data}
	}
	if resp.Result == nil {
		return json.RawMessage(`{}`), nil
	}
	return resp.Result, nil
}

func (c *remoteConn) notify(ctx context.Context, method string, params any) error {
	if c.stateless() {
		return nil // 2026-07-28 has no client notifications the gateway sends
	}
	n := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method}}
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return err
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			return err
		}
		n.Params.AdditionalFields = fields
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.tr.SendNotification(ctx, n)
}

func (c *remoteConn) close() error {
	c.markDone()
	err := c.tr.Close()
	c.wg.Wait()
	c.httpc.CloseIdleConnections()
	return err
}

// setProtocolVersion tells transports that send the MCP-Protocol-Version
// header which version initialize negotiated.
func (c *remoteConn) setProtocolVersion(v string) {
	if pv, ok := c.tr.(interface{ SetProtocolVersion(string) }); ok {
		pv.SetProtocolVersion(v)
	}
}

// limitTransport reads every response body through a per-message limit.
// A text/event-stream body is counted per event (bytes since the blank
// line that ended the last event with a field other than a comment); the
// blank lines and comments of events without one count toward the next,
// so a stream of nothing but empty events is cut like one endless event.
// Any other body (application/json, an error page) counts whole, blank
// lines or not: a JSON reply padded with "\n\n" between its elements is
// still one message. Passing the limit fails the read with a
// *tooLargeError, reported once through onExceed.
type limitTransport struct {
	hop      string // our hop id, sent on every request when set
	deadline bool   // set switchboard.DeadlineHeader from each request's context
	limit    int64
	onExceed func(error)
	base     http.RoundTripper
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.hop != "" || t.deadline {
		r = r.Clone(r.Context()) // a RoundTripper must not modify the caller's request
	}
	if t.hop != "" {
		r.Header.Add(switchboard.HopHeader, t.hop)
	}
	if t.deadline {
		if ms, ok := switchboard.DeadlineLeft(r.Context()); ok {
			r.Header.Set(switchboard.DeadlineHeader, ms)
		} else {
			r.Header.Del(switchboard.DeadlineHeader)
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &limitedBody{ReadCloser: resp.Body, limit: t.limit, onExceed: t.onExceed, events: mt == "text/event-stream"}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// wrapped transport.
func (t limitTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type limitedBody struct {
	io.ReadCloser
	limit    int64
	onExceed func(error)
	events   bool  // an event stream: a blank line ends a message
	n        int64 // bytes of the current message
	nl       bool  // the last byte that was not '\r' was '\n'
	mid      bool  // the current line has a byte that is not '\r'
	comment  bool  // the current line starts with ':'
	field    bool  // the current event has a line that is not a comment
	err      error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	for i, c := range p[:n] {
		switch {
		case c == '\n' && b.nl && b.events && b.field:
			b.n, b.field = 0, false // blank line: the event ended
		default:
			b.n++ // '\r' too: endless "\r" is no line end to a reader
		}
		switch {
		case c == '\n':
			if b.mid && !b.comment {
				b.field = true
			}
			b.mid = false
		case c != '\r' && !b.mid:
			b.mid, b.comment = true, c == ':'
		}
		if c != '\r' {
			b.nl = c == '\n'
		}
		if b.n > b.limit {
			b.err = &tooLargeError{b.limit}
			if b.onExceed != nil {
				b.onExceed(b.err)
			}
			return i, b.err
		}
	}
	return n, err
}

// standardHeaders are the headers 2026-07-28 asks of every request over
// streamable HTTP besides MCP-Protocol-Version (which the transport
// sends): Mcp-Method and, on tools/call, prompts/get and resources/read,
// Mcp-Name. Mcp-Param-* headers (tool parameters annotated x-mcp-header)
// are not sent.
func standardHeaders(method string, params any) http.Header {
	raw, _ := params.(json.RawMessage)
	std := mcp.StandardHeaders(Revision20260728, mcp.MCPMethod(method), raw)
	h := make(http.Header, len(std))
	for k, v := range std {
		h.Set(k, v)
	}
	return h
}

// discover sends server/discover as a 2026-07-28 client. It reports true
// when the server supports 2026-07-28, leaving the connection stateless,
// with the server's capabilities. Any refusal (a JSON-RPC error, an HTTP
// 4xx without one, a result without 2026-07-28) reports false and leaves
// the connection as it was, for initialize. An error means no answer came:
// the server is unreachable, or ctx ended.
func (c *remoteConn) discover(ctx context.Context, version string) (bool, json.RawMessage, error) {
	if c.newProbe == nil {
		return false, nil, nil
	}
	probe, err := c.newProbe()
	if err != nil {
		return false, nil, err
	}
	main := c.tr
	c.tr = probe
	c.setProtocolVersion(Revision20260728)
	c.setStateless(version)
	res, err := c.call(ctx, "server/discover", nil)
	if err == nil {
		var dr struct {
			SupportedVersions []string        `json:"supportedVersions"`
			Capabilities      json.RawMessage `json:"capabilities"`
		}
		if json.Unmarshal(res, &dr) == nil && slices.Contains(dr.SupportedVersions, Revision20260728) {
			_ = main.Close() // never used: no session to end
			return true, dr.Capabilities, nil
		}
	}
	c.tr = main
	c.setLegacy("")
	_ = probe.Close()
	var rpc *switchboard.RPCError
	switch {
	case err == nil, errors.As(err, &rpc):
		return false, nil, nil
	case ctx.Err() != nil:
		return false, nil, ctx.Err()
	}
	select {
	case <-c.doneCh:
		return false, nil, err // no HTTP answer at all
	default:
		return false, nil, nil // an HTTP status without a JSON-RPC body
	}
}

// listen opens subscriptions/listen for tool list changes and keeps it
// open for the connection's life, re-opening it (with backoff) when the
// server ends it; each re-opening is followed by a re-list, as changes may
// have been missed meanwhile. It returns once the server acknowledged the
// first subscription, or refused it (the error), or ctx ended; the stream
// then stays with the connection, and close ends it.
func (c *remoteConn) listen(ctx context.Context, relist func(), log *slog.Logger) error {
	first := make(chan error, 1)
	acked := func() {
		if c.acks.Add(1) == 1 {
			first <- nil
		} else {
			relist()
		}
	}
	c.acked.Store(&acked)
	params, err := withHopMeta(json.RawMessage(`{"notifications":{"toolsListChanged":true}}`), c.meta)
	if err != nil {
		return err
	}
	c.wg.Go(func() {
		delay := 250 * time.Millisecond
		for {
			begin := time.Now()
			req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId(c.nextID.Add(1)),
				Method: "subscriptions/listen", Params: params, Header: standardHeaders("subscriptions/listen", params)}
			resp, err := c.tr.SendRequest(c.life, req)
			if err == nil && resp.Error != nil {
				err = fmt.Errorf("JSON-RPC error %d: %s", resp.Error.Code, resp.Error.Message)
			}
			if c.life.Err() != nil {
				return
			}
			if c.acks.Load() == 0 {
				if err == nil {
					err = errors.New("the server ended subscriptions/listen before acknowledging it")
				}
				first <- err
				return
			}
			if time.Since(begin) > time.Minute {
				delay = 250 * time.Millisecond
			}
			log.Info("upstream ended subscriptions/listen; re-opening it", "err", err, "in", delay)
			t := time.NewTimer(delay)
			select {
			case <-c.life.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(delay*2, 30*time.Second)
		}
	})
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// transportLog is mcp-go's logger: a server that answers the GET stream
// with 405 does not offer one, which the MCP transport allows (the
// hosted hop between replicas is one), so mcp-go's "server does not
// support listening" is information, not an error.
type transportLog struct{ slog.Handler }

func (h transportLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelError && r.Message == "server does not support listening" {
		r.Level = slog.LevelInfo
		if !h.Handler.Enabled(ctx, r.Level) {
			return nil
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h transportLog) WithAttrs(a []slog.Attr) slog.Handler {
	return transportLog{h.Handler.WithAttrs(a)}
}

func (h transportLog) WithGroup(name string) slog.Handler {
	return transportLog{h.Handler.WithGroup(name)}
}
