// Package console is the operator console served at /ui/: server-rendered
// pages (html/template, assets embedded with embed) that show and steer
// the gateway from a browser.
//
// The console holds no rights of its own and opens no second path to the
// store or the upstreams: every read and every action is an in-process
// request to the gateway's own handler (the admin API under /api/v1/, the
// project MCP endpoints for "try it" and status), carrying the browser's
// token in the Authorization header, so the API's checks decide what the
// browser may see and do, and tool calls are logged like any client's.
// The token lives in an HttpOnly, SameSite=Strict cookie set by the login
// form; forms carry a double-submit CSRF token and cross-origin POSTs are
// refused (http.CrossOriginProtection).
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/server/api/apiclient"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie names. Both are HttpOnly, SameSite=Strict, scoped to /ui/ and
// Secure when the request came over TLS.
const (
	tokenCookie   = "switchboard_token"
	projectCookie = "switchboard_project"
	csrfCookie    = "switchboard_csrf"
	csrfField     = "csrf"
	cookiePath    = "/ui/"
)

// Options configure the console.
type Options struct {
	Version string
	Logger  *slog.Logger
	// Now is the clock of the charts' windows; default time.Now.
	Now func() time.Time
}

// Console serves /ui/.
type Console struct {
	opts   Options
	log    *slog.Logger
	gw     atomic.Pointer[http.Handler]
	tmpl   map[string]*template.Template
	mux    *http.ServeMux
	origin *http.CrossOriginProtection
}

// New returns the console. It serves nothing useful until Bind gives it
// the gateway's handler.
func New(opts Options) *Console {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Console{opts: opts, log: opts.Logger, tmpl: parseTemplates(), origin: http.NewCrossOriginProtection()}
	c.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusForbidden, "This form was sent from another site (cross-origin request refused). Open the console at this gateway's own address and submit it again.")
	}))
	c.mux = c.routes()
	return c
}

// Bind gives the console the gateway's root handler, through which it
// makes every request. It is called once, before the console serves.
func (c *Console) Bind(gateway http.Handler) { c.gw.Store(&gateway) }

// ServeHTTP serves /ui/.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.mux.ServeHTTP(w, r)
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /ui/login", c.loginPage)
	mux.Handle("POST /ui/login", c.post(c.login))
	mux.Handle("POST /ui/logout", c.post(c.logout))
	mux.HandleFunc("GET /ui/{$}", c.overviewAll)
	mux.Handle("POST /ui/projects", c.post(c.createProject))
	const p = "/ui/p/{project}"
	mux.HandleFunc("GET "+p+"/{$}", c.overviewProject)
	mux.HandleFunc("GET "+p+"/tools", c.toolsPage)
	mux.Handle("POST "+p+"/tools", c.post(c.tryTool))
	mux.HandleFunc("GET "+p+"/calls", c.callsPage)
	mux.HandleFunc("GET "+p+"/manage", c.managePage)
	mux.Handle("POST "+p+"/manage/{action}", c.post(c.formAction("manage", c.manageDo, c.manageFailed)))
	mux.HandleFunc("GET "+p+"/hosted", c.hostedPage)
	mux.Handle("POST "+p+"/hosted/{action}", c.post(c.formAction("hosted", c.hostedDo, c.hostedFailed)))
	mux.HandleFunc("GET "+p+"/sandbox", c.sandboxPage)
	mux.Handle("POST "+p+"/sandbox/{action}", c.post(c.formAction("sandbox", c.sandboxDo, c.sandboxFailed)))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		c.renderError(w, r, nil, http.StatusNotFound, "No such page in the console.")
	})
	return mux
}

// post guards a form handler: the request must come from this origin
// (Sec-Fetch-Site or Origin, as http.CrossOriginProtection decides) and
// carry the CSRF token that matches its cookie (double submit).
func (c *Console) post(next http.HandlerFunc) http.Handler {
	return c.origin.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			c.renderError(w, r, nil, http.StatusBadRequest, "The form could not be read (at most 1 MiB, form-encoded).")
			return
		}
		if !validCSRF(r) {
			c.renderError(w, r, nil, http.StatusForbidden, "The form's security token is missing or stale (your session may have changed). Reload the page and submit the form again.")
			return
		}
		next(w, r)
	}))
}

// validCSRF: the form's token equals the CSRF cookie's.
func validCSRF(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) < 32 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue(csrfField))) == 1
}

// csrfToken returns the request's CSRF token, setting the cookie when the
// browser has none yet.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	v := randomToken()
	http.SetCookie(w, cookie(r, csrfCookie, v, 0))
	// Later reads in this request (a page rendered after an action) see it.
	r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
	return v
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// cookie is one of the console's cookies: HttpOnly, SameSite=Strict,
// path /ui/, Secure over TLS; maxAge < 0 deletes it.
func cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: cookiePath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// ---- in-process calls to the gateway

// reply is the gateway's answer to one in-process request: an MCP
// exchange's status, header and body, or an API call's status and
// message (see fromAPI).
type reply struct {
	status int
	header http.Header
	body   []byte
	msg    string
}

// ok reports a 2xx answer.
func (rp reply) ok() bool { return rp.status >= 200 && rp.status < 300 }

// message is the error message of an API call, or of a JSON-RPC error
// body.
func (rp reply) message() string {
	if rp.msg != "" {
		return rp.msg
	}
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(rp.body, &e) == nil && len(e.Error) > 0 {
		var m struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &m) == nil && m.Message != "" {
			return m.Message
		}
	}
	return http.StatusText(rp.status)
}

// call sends one request to the gateway's root handler as the browser
// that sent r: its token from the cookie in Authorization, r's context
// (cancellation, local address) and Host, no Origin (it is the gateway's
// own request). body is JSON-encoded when not nil.
func (c *Console) call(r *http.Request, method, path string, body any, hdr http.Header) reply {
	gw := c.gw.Load()
	if gw == nil {
		return reply{status: http.StatusServiceUnavailable, body: []byte(`{"error":{"message":"the console is not bound to the gateway"}}`)}
	}
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			b, _ = json.Marshal(v)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return reply{status: http.StatusBadRequest, body: []byte(`{"error":{"message":"bad request path"}}`)}
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	req.TLS = r.TLS
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok := tokenOf(r); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	(*gw).ServeHTTP(rec, req)
	return reply{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// api is the admin API's client acting as the browser that sent r (see
// inProcess).
func (c *Console) api(r *http.Request) *apiclient.Client {
	cl := &apiclient.Client{HTTP: inProcess{c: c, r: r}, Token: tokenOf(r)}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		cl.Header = http.Header{"X-Request-Id": {id}}
	}
	return cl
}

// inProcess serves the API client's requests with the gateway's root
// handler, as the browser that sent r: r's Host, remote address and TLS
// state, no Origin (it is the gateway's own request).
type inProcess struct {
	c *Console
	r *http.Request
}

func (d inProcess) Do(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	gw := d.c.gw.Load()
	if gw == nil {
		rec.WriteHeader(http.StatusServiceUnavailable)
		rec.WriteString(`{"error":{"message":"the console is not bound to the gateway"}}`)
		return rec.Result(), nil
	}
	req.Host = d.r.Host
	req.RemoteAddr = d.r.RemoteAddr
	req.TLS = d.r.TLS
	(*gw).ServeHTTP(rec, req)
	return rec.Result(), nil
}

// fromAPI is the reply for an API call's error (nil: 200): the API's
// status and message, or 502 when it gave no answer the console could
// read.
func (c *Console) fromAPI(err error) reply {
	if err == nil {
		return reply{status: http.StatusOK}
	}
	var he *apiclient.Error
	if errors.As(err, &he) {
		return reply{status: he.Status, msg: he.Message}
	}
	c.log.Warn("console: API call failed", "err", err)
	return reply{status: http.StatusBadGateway, msg: "the API's answer could not be read"}
}

func tokenOf(r *http.Request) string {
	if ck, err := r.Cookie(tokenCookie); err == nil {
		return ck.Value
	}
	return ""
}

func projectOf(r *http.Request) string {
	if ck, err := r.Cookie(projectCookie); err == nil && projectID(ck.Value) {
		return ck.Value
	}
	return ""
}

// projectID mirrors the API's rule for project ids, so a path segment is
// never sent on unless it could name a project.
func projectID(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= '0' && ch <= '9':
		case (ch == '_' || ch == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// failed renders the page for a failed read: 401 sends the browser to
// the login form (coming back here afterwards), anything else is an error
// page with the API's status and message.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, v *view, rp reply) {
	if rp.status == http.StatusUnauthorized {
		q := url.Values{"next": {r.URL.RequestURI()}}
		if p := r.PathValue("project"); p != "" {
			q.Set("project", p)
		}
		http.Redirect(w, r, "/ui/login?"+q.Encode(), http.StatusSeeOther)
		return
	}
	c.renderError(w, r, v, rp.status, rp.message())
}

// safeNext is where the login form may send the browser afterwards: a
// console path, never another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// withTimeout bounds one console request's work on the gateway.
func withTimeout(r *http.Request, d time.Duration) (*http.Request, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return r.WithContext(ctx), cancel
}
