package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// hostileCase is one malformed or hostile request and what the gateway must
// answer. Unless said otherwise it is a POST /mcp with JSON headers and the
// good session's id.
type hostileCase struct {
	name      string
	method    string      // default POST
	path      string      // default /mcp
	session   string      // Mcp-Session-Id; default: the good session on POST /mcp
	noSession bool        // send no Mcp-Session-Id at all
	header    http.Header // overrides; an empty list removes the header
	host      string      // overrides Host
	body      string
	chunked   io.Reader // body sent with Transfer-Encoding: chunked
	raw       string    // the whole request, written as is over TCP

	status int                         // HTTP status expected (0: left to check)
	code   int                         // JSON-RPC error code expected (0: no JSON-RPC error expected)
	id     string                      // the JSON-RPC id expected in the reply, raw
	result bool                        // a JSON-RPC result is expected
	check  func(*testing.T, *rpcReply) // more checks
}

// hostileTimeout bounds every single request of the table.
const hostileTimeout = 20 * time.Second

// sendHostile sends c and decodes the reply. A GET answered with an event
// stream is not read (it never ends); everything else is read in full.
func sendHostile(t *testing.T, base, good string, c hostileCase) *rpcReply {
	t.Helper()
	if c.raw != "" {
		return sendRawTCP(t, strings.TrimPrefix(base, "http://"), c.raw)
	}
	method := cmp.Or(c.method, http.MethodPost)
	path := cmp.Or(c.path, "/mcp")
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	var body io.Reader
	if c.chunked != nil {
		body = io.MultiReader(c.chunked) // hides the length: sent chunked
	} else if c.body != "" || method == http.MethodPost {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	switch {
	case c.noSession:
	case c.session != "":
		req.Header.Set("Mcp-Session-Id", c.session)
	case method == http.MethodPost && path == "/mcp":
		req.Header.Set("Mcp-Session-Id", good)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	if c.host != "" {
		req.Host = c.host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	rep := &rpcReply{Status: resp.StatusCode, Header: resp.Header}
	sse := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	if sse && method == http.MethodGet {
		return rep // an open server-to-client stream: the status says it all
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the reply: %v", method, path, err)
	}
	decodeHostile(rep, raw, sse)
	return rep
}

func decodeHostile(rep *rpcReply, raw []byte, sse bool) {
	rep.Body = bytes.TrimSpace(raw)
	if sse {
		for line := range strings.Lines(string(raw)) {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && d != "" {
				rep.Events = append(rep.Events, []byte(d))
				rep.Body = []byte(d)
			}
		}
	}
	_ = json.Unmarshal(rep.Body, &rep.msg)
}

// sendRawTCP writes req over a fresh connection and reads one response:
// for requests Go's client refuses to send (bare CR, NUL, duplicate
// Content-Length).
func sendRawTCP(t *testing.T, addr, req string) *rpcReply {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hostileTimeout / 2))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatalf("raw write: %v", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 {
		resp, err = http.ReadResponse(br, nil) // skip 100 Continue
	}
	if err != nil {
		t.Fatalf("raw read: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	rep := &rpcReply{Status: resp.StatusCode, Header: resp.Header}
	decodeHostile(rep, raw, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"))
	return rep
}

// gatewayStatus is the part of GET / that hostile input must not change.
type gatewayStatus struct {
	Sessions  int `json:"sessions"`
	Tools     int `json:"tools"`
	Upstreams []struct {
		Name  string `json:"name"`
		State string `json:"state"`
		Tools int    `json:"tools"`
	} `json:"upstreams"`
}

func fetchStatus(t *testing.T, base string) (gatewayStatus, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var st gatewayStatus
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &st) != nil {
		t.Fatalf("status: %d %s", resp.StatusCode, raw)
	}
	return st, raw
}

// legacyStream is an open GET /sse: its endpoint and its message events.
type legacyStream struct {
	endpoint string
	events   chan string
}

func openLegacy(t *testing.T, base string) *legacyStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /sse: %d", resp.StatusCode)
	}
	ls := &legacyStream{events: make(chan string, 64)}
	endpoint := make(chan string, 1)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var ev string
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				ev = e
			} else if d, ok := strings.CutPrefix(line, "data: "); ok {
				if ev == "endpoint" {
					endpoint <- d
					continue
				}
				select {
				case ls.events <- d:
				default:
				}
			}
		}
	}()
	select {
	case ls.endpoint = <-endpoint:
	case <-time.After(hostileTimeout):
		t.Fatal("no endpoint event on GET /sse")
	}
	return ls
}

// reply waits for the stream's response carrying id.
func (ls *legacyStream) reply(t *testing.T, id string) string {
	t.Helper()
	deadline := time.After(hostileTimeout)
	for {
		select {
		case d := <-ls.events:
			if strings.Contains(d, `"id":`+id+`,`) || strings.Contains(d, `"id":`+id+`}`) {
				return d
			}
		case <-deadline:
			t.Fatalf("no reply with id %s on the legacy stream", id)
		}
	}
}

// nested returns n opening brackets followed by n closing ones.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestHostileInput throws malformed and hostile requests at a real gateway
// and checks each answer (HTTP status, JSON-RPC code), that no secret is
// ever echoed, and that afterwards nothing changed: same upstream state and
// tools, same sessions, the good session and the legacy stream still work,
// and nothing panicked.
func TestHostileInput(t *testing.T) {
	const secret = "hostile-secret-Zq7vX2pL9wK4"
	const limit = 65536
	up := stdioServer("up")
	up["env"].(map[string]string)["HOSTILE_TOKEN"] = "${SWITCHBOARD_TEST_SECRET}"
	g := startGateway(t, [][2]any{{"up", up}}, map[string]string{
		"MCP_SERVER_MAX_BODY_BYTES": itoa(limit),
		"SWITCHBOARD_TEST_SECRET":   secret,
	})
	base := g.url
	addr := strings.TrimPrefix(base, "http://")

	// Sessions opened on purpose, all before the "before" snapshot: the
	// good one, one ended by DELETE, one legacy stream.
	good := newRaw(t, base+"/mcp")
	good.initialize()
	if got := good.toolText("echo", map[string]any{"text": "warm"}); got != "warm" {
		t.Fatalf("echo before the table: %q", got)
	}
	dead := newRaw(t, base+"/mcp")
	dead.initialize()
	if rep := sendHostile(t, base, "", hostileCase{method: http.MethodDelete, session: dead.session}); rep.Status != http.StatusOK {
		t.Fatalf("DELETE: %d %s", rep.Status, rep.Body)
	}
	legacy := openLegacy(t, base)
	before, beforeRaw := fetchStatus(t, base)
	if len(before.Upstreams) != 1 || before.Upstreams[0].State != "ready" || before.Tools == 0 {
		t.Fatalf("unexpected status before the table: %s", beforeRaw)
	}

	js := func(method, params string) string {
		if params == "" {
			return `{"jsonrpc":"2.0","id":1,"method":"` + method + `"}`
		}
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	}
	call := func(params string) string { return js("tools/call", params) }
	list := js("tools/list", "")
	ping := js("ping", "")
	foreign := "sb-00000000000000000000000000000000"
	evil := http.Header{"Origin": {"https://evil.example"}}
	sseAccept := http.Header{"Accept": {"text/event-stream"}}
	// A tools/call whose body is exactly the limit.
	atLimit := func() string {
		head, tail := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`, `"}}}`
		return head + strings.Repeat("a", limit-len(head)-len(tail)) + tail
	}()
	rawReq := func(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }
	host := "Host: " + addr

	cases := []hostileCase{
		// Not JSON, or not one JSON-RPC message.
		{name: "bad JSON", body: `{"jsonrpc":"2.0","id":1,"method":"tools/list",}`, status: 400, code: -32700},
		{name: "truncated JSON", body: `{"jsonrpc":"2.0","id":1,"method":"tools/li`, status: 400, code: -32700},
		{name: "empty body", body: ``, status: 400, code: -32700},
		{name: "whitespace body", body: " \r\n\t ", status: 400, code: -32700},
		{name: "JSON null", body: `null`, status: 400, code: -32600},
		{name: "JSON string", body: `"tools/list"`, status: 400, code: -32600},
		{name: "JSON number", body: `42`, status: 400, code: -32600},
		{name: "two messages back to back", body: list + list, status: 400, code: -32700},
		{name: "wrong jsonrpc version", body: `{"jsonrpc":"1.0","id":7,"method":"tools/list"}`, status: 400, code: -32600, id: `7`},
		{name: "jsonrpc as number", body: `{"jsonrpc":2.0,"id":1,"method":"tools/list"}`, status: 400, code: -32600},
		{name: "missing jsonrpc", body: `{"id":1,"method":"tools/list"}`, status: 400, code: -32600},
		{name: "empty batch", body: `[]`, status: 400, code: -32600},
		{name: "batch", body: `[` + list + `,` + ping + `]`, status: 400, code: -32600},
		{name: "broken batch", body: `[` + list + `,`, status: 400, code: -32700},

		// Ids.
		// Numeric ids must come back exactly as sent. mcp-go (ping,
		// initialize) holds them as float64, so ids it cannot echo exactly
		// are refused up front, for every method alike.
		{name: "largest exact numeric id on ping", body: `{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"}`, status: 200, id: `9007199254740991`, result: true},
		{name: "largest exact numeric id on tools/list", body: `{"jsonrpc":"2.0","id":-9007199254740991,"method":"tools/list"}`, status: 200, id: `-9007199254740991`, result: true},
		{name: "numeric id 2^53+1 on ping", body: `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, status: 400, code: -32600, id: `null`},
		{name: "huge numeric id on ping", body: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`, status: 400, code: -32600, id: `null`},
		{name: "huge numeric id on tools/list", body: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/list"}`, status: 400, code: -32600, id: `null`},
		{name: "id 1e400 on ping", body: `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, status: 400, code: -32600, id: `null`},
		{name: "object id", body: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, status: 400, code: -32600, id: `null`},
		{name: "array id", body: `{"jsonrpc":"2.0","id":[1],"method":"tools/list"}`, status: 400, code: -32600, id: `null`},
		{name: "bool id", body: `{"jsonrpc":"2.0","id":true,"method":"tools/list"}`, status: 400, code: -32600, id: `null`},
		{name: "id string of 257 bytes", body: `{"jsonrpc":"2.0","id":"` + strings.Repeat("x", 257) + `","method":"tools/list"}`, status: 400, code: -32600, id: `null`},
		{name: "id number of 300 digits", body: `{"jsonrpc":"2.0","id":` + strings.Repeat("9", 300) + `,"method":"ping"}`, status: 400, code: -32600, id: `null`},
		{name: "id string of 256 bytes with quotes", body: `{"jsonrpc":"2.0","id":"` + strings.Repeat("y", 254) + `","method":"tools/list"}`, status: 200, id: `"` + strings.Repeat("y", 254) + `"`, result: true},

		// Nesting.
		{name: "100k nested arrays (over the limit)", body: js("ping", nested(100000)), status: 413, code: -32600},
		{name: "30k nested arrays (within the limit)", body: js("tools/list", nested(30000)), status: 400, code: -32700},
		{name: "60k unclosed arrays", body: js("ping", strings.Repeat("[", 60000)), status: 400, code: -32700},
		{name: "5k nested arrays in ping params", body: js("ping", `{"x":`+nested(5000)+`}`), status: 200, result: true},

		// Content-Type.
		{name: "Content-Type text/plain", header: http.Header{"Content-Type": {"text/plain"}}, body: list, status: 415, code: -32600},
		{name: "Content-Type multipart", header: http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}, body: "--x\r\n\r\n" + list + "\r\n--x--", status: 415, code: -32600},
		{name: "Content-Type form", header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, body: list, status: 415, code: -32600},
		{name: "no Content-Type on tools/list", header: http.Header{"Content-Type": {}}, body: list, status: 200, result: true},
		{name: "no Content-Type on ping (taken as JSON, like every method)", header: http.Header{"Content-Type": {}}, body: ping, status: 200, result: true},

		// Sessions.
		{name: "no session on tools/list", noSession: true, body: list, status: 400, code: -32600},
		{name: "no session on tools/call", noSession: true, body: call(`{"name":"echo","arguments":{"text":"x"}}`), status: 400, code: -32600},
		{name: "foreign session", session: foreign, body: list, status: 404, code: -32600},
		{name: "no session on ping", noSession: true, body: ping, status: 400, code: -32600},
		{name: "foreign session on ping", session: foreign, body: ping, status: 404, code: -32600},
		{name: "terminated session", session: dead.session, body: list, status: 404, code: -32600},
		{name: "terminated session on ping", session: dead.session, body: ping, status: 404, code: -32600},
		{name: "legacy session id on /mcp", session: strings.TrimPrefix(legacy.endpoint, "/message?sessionId="), body: list, status: 404, code: -32600},
		{name: "8 KB session id", session: strings.Repeat("s", 8<<10), body: list, status: 404, code: -32600},
		{name: "SQL in session id", session: "x' OR '1'='1", body: list, status: 404, code: -32600},
		{name: "bare CR in session id", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session+"\rX-Injected: 1", "Content-Length: "+itoa(len(list))) + list, status: 400},
		{name: "NUL in session id", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session+"\x00x", "Content-Length: "+itoa(len(list))) + list, status: 400},
		{name: "two different Content-Lengths", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session, "Content-Length: "+itoa(len(list)), "Content-Length: 5") + list, status: 400},
		{name: "no Host header", raw: rawReq("GET / HTTP/1.1"), status: 400},
		{name: "GET stream without session", method: http.MethodGet, header: sseAccept, status: 400, code: -32600},
		{name: "GET stream with foreign session", method: http.MethodGet, header: sseAccept, session: foreign, status: 404, code: -32600},
		{name: "GET stream with terminated session", method: http.MethodGet, header: sseAccept, session: dead.session, status: 404, code: -32600},
		{name: "DELETE foreign session", method: http.MethodDelete, session: foreign, status: 404, code: -32600},
		{name: "DELETE terminated session", method: http.MethodDelete, session: dead.session, status: 404, code: -32600},
		{name: "DELETE without session", method: http.MethodDelete, status: 400, code: -32600},

		// Size.
		{name: "one byte over the limit", body: atLimit + " ", status: 413, code: -32600},
		{name: "exactly the limit", body: atLimit, status: 200, result: true},
		{name: "chunked over the limit", chunked: strings.NewReader(js("ping", `"`+strings.Repeat("z", 3*limit)+`"`)), status: 413, code: -32600},
		{name: "chunked within the limit", chunked: strings.NewReader(list), status: 200, result: true},
		{name: "declared length over the limit, body withheld", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session, "Expect: 100-continue", "Content-Length: 10000000000"), status: 413, code: -32600},
		{name: "malformed chunk", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session, "Transfer-Encoding: chunked") + "zz\r\n" + list + "\r\n0\r\n\r\n", status: 400, code: -32700},
		{name: "Content-Length and chunked together: chunked wins", raw: rawReq("POST /mcp HTTP/1.1", host, "Content-Type: application/json", "Mcp-Session-Id: "+good.session, "Content-Length: 4", "Transfer-Encoding: chunked") + "5\r\nhello\r\n0\r\n\r\n", status: 400, code: -32700},

		// Encodings.
		{name: "invalid UTF-8", body: call("{\"name\":\"echo\xff\xfe\"}"), status: 400, code: -32700},
		{name: "raw NUL in a string", body: call("{\"name\":\"ec\x00ho\"}"), status: 400, code: -32700},
		{name: "NUL between tokens", body: "{\"jsonrpc\":\"2.0\",\x00\"id\":1,\"method\":\"ping\"}", status: 400, code: -32700},
		{name: "UTF-8 BOM", body: "\xef\xbb\xbf" + list, status: 400, code: -32700},
		{name: "escaped NUL in tool name", body: call(`{"name":"echo\u0000"}`), status: 200, code: -32601},
		{name: "lone surrogate in tool name", body: call(`{"name":"\ud800"}`), status: 200, code: -32601},

		// tools/call and tools/list params.
		{name: "name is a number", body: call(`{"name":42}`), status: 200, code: -32602, id: `1`},
		{name: "name is null", body: call(`{"name":null}`), status: 200, code: -32602},
		{name: "name is an object", body: call(`{"name":{"name":"echo"}}`), status: 200, code: -32602},
		{name: "name is an array", body: call(`{"name":["echo"]}`), status: 200, code: -32602},
		{name: "params is a string", body: call(`"echo"`), status: 200, code: -32602},
		{name: "params is an array", body: call(`["echo",{}]`), status: 200, code: -32602},
		{name: "params missing", body: js("tools/call", ""), status: 200, code: -32602},
		{name: "arguments is a string", body: call(`{"name":"echo","arguments":"{\"text\":\"x\"}"}`), status: 200, code: -32602},
		{name: "arguments is an array", body: call(`{"name":"echo","arguments":[{"text":"x"}]}`), status: 200, code: -32602},
		{name: "arguments is a number", body: call(`{"name":"echo","arguments":1}`), status: 200, code: -32602},
		{name: "arguments is true", body: call(`{"name":"echo","arguments":true}`), status: 200, code: -32602},
		{name: "_meta is an array", body: call(`{"name":"echo","arguments":{"text":"x"},"_meta":[1]}`), status: 200, code: -32602},
		{name: "_meta is a string", body: call(`{"name":"echo","arguments":{"text":"x"},"_meta":"m"}`), status: 200, code: -32602},
		{name: "tools/list params is an array", body: js("tools/list", `[1]`), status: 200, code: -32602},
		{name: "tools/list foreign cursor", body: js("tools/list", `{"cursor":"../../etc/passwd"}`), status: 200, code: -32602},

		// Methods and tool names.
		{name: "unknown method", body: js("no/such", "{}"), status: 200, code: -32601},
		{name: "method with path traversal", body: js("../../etc/passwd", "{}"), status: 200, code: -32601},
		{name: "method is a number", body: `{"jsonrpc":"2.0","id":1,"method":42}`, status: 400, code: -32600},
		{name: "method is empty", body: js("", ""), status: 400, code: -32600},
		{name: "tool name with path traversal", body: call(`{"name":"../../../../etc/passwd","arguments":{}}`), status: 200, code: -32601},
		{name: "tool name with SQL", body: call(`{"name":"x'; DROP TABLE tools--","arguments":{}}`), status: 200, code: -32601},
		{name: "tool name of 60 KB", body: call(`{"name":"` + strings.Repeat("n", 60<<10) + `"}`), status: 200, code: -32601},
		{name: "tool name forging a log line", body: call(`{"name":"x\nlevel=ERROR msg=forged-by-client\n"}`), status: 200, code: -32601},
		{name: "tool name with format verbs", body: call(`{"name":"%s%n%x%!(EXTRA)"}`), status: 200, code: -32601},
		{name: "tool name with shell", body: call(`{"name":"$(cat /etc/passwd)` + "`id`" + `"}`), status: 200, code: -32601},
		{name: "cancel with garbage requestId", body: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"$gt":""}}}`, status: 202},
		{name: "unsolicited response", body: `{"jsonrpc":"2.0","id":99,"result":{"x":1}}`, status: 400},
		{name: "initialize as a notification", body: `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, noSession: true, status: 400, code: -32600, check: noSessionIssued},
		{name: "initialize with params a string", body: js("initialize", `"x"`), noSession: true, status: 200, code: -32600, id: `1`, check: noSessionIssued},
		{name: "initialize with params an array", body: js("initialize", `[]`), noSession: true, status: 200, code: -32600, id: `1`, check: noSessionIssued},

		// HTTP methods and routes.
		{name: "PUT /mcp", method: http.MethodPut, body: list, status: 405, code: -32600},
		{name: "PATCH /mcp", method: http.MethodPatch, body: list, status: 405, code: -32600},
		{name: "OPTIONS /mcp without CORS", method: http.MethodOptions, header: http.Header{"Access-Control-Request-Method": {"POST"}, "Origin": {"http://localhost:3000"}}, status: 405, code: -32600},
		{name: "TRACE /mcp", method: http.MethodTrace, status: 405, code: -32600},
		{name: "HEAD /mcp", method: http.MethodHead, status: 405},
		{name: "GET /mcp Accept text/html", method: http.MethodGet, header: http.Header{"Accept": {"text/html"}}, status: 200},
		{name: "GET /mcp Accept */*", method: http.MethodGet, header: http.Header{"Accept": {"*/*"}}, status: 200},
		{name: "GET stream with old protocol version", method: http.MethodGet, session: good.session, header: http.Header{"Accept": {"text/event-stream"}, "Mcp-Protocol-Version": {"1999-01-01"}}, status: 400, code: -32600},
		{name: "GET stream with garbage protocol version", method: http.MethodGet, session: good.session, header: http.Header{"Accept": {"text/event-stream"}, "Mcp-Protocol-Version": {"garbage"}}, status: 400, code: -32600},
		{name: "/message without sessionId", path: "/message", body: ping, status: 404, code: -32600},
		{name: "/message unknown sessionId", path: "/message?sessionId=sse-00000000000000000000000000000000", body: ping, status: 404, code: -32600},
		{name: "/message sessionId traversal", path: "/message?sessionId=..%2F..%2Fetc%2Fpasswd", body: ping, status: 404, code: -32600},
		{name: "/message streamable session id", path: "/message?sessionId=" + good.session, body: ping, status: 404, code: -32600},
		{name: "/message bad JSON", path: legacy.endpoint, body: `{"jsonrpc":"2.0","id":1,`, status: 400, code: -32700},
		{name: "/message batch", path: legacy.endpoint, body: `[` + ping + `]`, status: 400, code: -32600},
		{name: "/message over the limit", path: legacy.endpoint, body: atLimit + " ", status: 413, code: -32600},
		{name: "/message text/plain", path: legacy.endpoint, header: http.Header{"Content-Type": {"text/plain"}}, body: ping, status: 415, code: -32600},
		{name: "POST /sse", path: "/sse", body: ping, status: 405},
		{name: "GET /message", method: http.MethodGet, path: "/message", status: 405},
		{name: "/api/v1/anything", method: http.MethodGet, path: "/api/v1/anything", status: 404},
		{name: "POST /api/v1/projects", path: "/api/v1/projects", body: `{}`, status: 400},
		{name: "/MCP", path: "/MCP", body: list, status: 404},
		{name: "path traversal out of /mcp", raw: rawReq("GET /mcp/../../etc/passwd HTTP/1.1", host), check: func(t *testing.T, rep *rpcReply) {
			// ServeMux cleans the path and redirects; it never serves a file.
			if rep.Status/100 != 3 || rep.Header.Get("Location") != "/etc/passwd" {
				t.Errorf("HTTP %d Location %q, want a redirect to the cleaned path", rep.Status, rep.Header.Get("Location"))
			}
		}},

		// Origin and Host.
		{name: "foreign Origin POST /mcp", header: evil, body: list, status: 403, code: -32600},
		{name: "foreign Origin GET /mcp", method: http.MethodGet, header: evil, status: 403, code: -32600},
		{name: "foreign Origin GET /mcp stream", method: http.MethodGet, session: good.session, header: http.Header{"Origin": evil["Origin"], "Accept": {"text/event-stream"}}, status: 403, code: -32600},
		{name: "foreign Origin DELETE /mcp", method: http.MethodDelete, session: good.session, header: evil, status: 403, code: -32600},
		{name: "foreign Origin OPTIONS /mcp", method: http.MethodOptions, header: evil, status: 403, code: -32600},
		{name: "foreign Origin GET /", method: http.MethodGet, path: "/", header: evil, status: 403, code: -32600},
		{name: "foreign Origin GET /sse", method: http.MethodGet, path: "/sse", header: evil, status: 403, code: -32600},
		{name: "foreign Origin POST /message", path: legacy.endpoint, header: evil, body: ping, status: 403, code: -32600},
		{name: "foreign Origin GET /healthz", method: http.MethodGet, path: "/healthz", header: evil, status: 403, code: -32600},
		{name: "foreign Origin GET /readyz", method: http.MethodGet, path: "/readyz", header: evil, status: 403, code: -32600},
		{name: "foreign Origin /api/v1", method: http.MethodGet, path: "/api/v1/anything", header: evil, status: 403, code: -32600},
		{name: "foreign Origin GET /metrics", method: http.MethodGet, path: "/metrics", header: evil, status: 403, code: -32600},
		{name: "Origin null", header: http.Header{"Origin": {"null"}}, body: list, status: 403, code: -32600},
		{name: "Origin localhost.evil", header: http.Header{"Origin": {"http://localhost.evil.example"}}, body: list, status: 403, code: -32600},
		{name: "Origin userinfo trick", header: http.Header{"Origin": {"http://127.0.0.1@evil.example"}}, body: list, status: 403, code: -32600},
		{name: "Origin file", header: http.Header{"Origin": {"file://"}}, body: list, status: 403, code: -32600},
		{name: "Host not loopback POST /mcp", host: "evil.example", body: list, status: 403, code: -32600},
		{name: "Host not loopback GET /", method: http.MethodGet, path: "/", host: "evil.example:80", status: 403, code: -32600},
		{name: "Host not loopback GET /sse", method: http.MethodGet, path: "/sse", host: "evil.example", status: 403, code: -32600},
		{name: "Host not loopback DELETE /mcp", method: http.MethodDelete, session: good.session, host: "evil.example", status: 403, code: -32600},
		{name: "Host not loopback GET /metrics", method: http.MethodGet, path: "/metrics", host: "evil.example", status: 403, code: -32600},
		{name: "Host localhost.evil", host: "localhost.evil.example", body: list, status: 403, code: -32600},
		{name: "Host loopback-looking name", host: "127.0.0.1.nip.io", body: list, status: 403, code: -32600},

		// Protocol version header.
		{name: "garbage protocol version on tools/list", header: http.Header{"Mcp-Protocol-Version": {"garbage"}}, body: list, status: 400, code: -32600},
		{name: "garbage protocol version on tools/call", header: http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}, body: call(`{"name":"echo","arguments":{"text":"x"}}`), status: 400, code: -32600},
		{name: "old protocol version on ping", header: http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}, body: ping, status: 400, code: -32600},
		{name: "garbage protocol version on ping", header: http.Header{"Mcp-Protocol-Version": {"garbage"}}, body: ping, status: 400, code: -32600},
		{name: "stateless protocol version on tools/list", header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}}, body: list, status: 400, code: -32600},
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := sendHostile(t, base, good.session, c)
			if c.status != 0 && rep.Status != c.status {
				t.Errorf("HTTP %d, want %d: %.300s", rep.Status, c.status, rep.Body)
			}
			if c.code != 0 && rep.code() != c.code {
				t.Errorf("JSON-RPC code %d, want %d: %.300s", rep.code(), c.code, rep.Body)
			}
			if c.code == 0 && rep.code() != 0 {
				t.Errorf("unexpected JSON-RPC error %d: %.300s", rep.code(), rep.Body)
			}
			if c.id != "" && string(rep.msg.ID) != c.id {
				t.Errorf("reply id %.80s, want %.80s", rep.msg.ID, c.id)
			}
			if c.result && rep.msg.Result == nil {
				t.Errorf("no JSON-RPC result: %.300s", rep.Body)
			}
			if c.check != nil {
				c.check(t, rep)
			}
			checkNoSecret(t, secret, rep)
		})
	}

	t.Run("partial requests do not block others", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		partial := []string{
			"POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Ty",                                                      // headers cut short
			"POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", // body cut short
		}
		for i := range 50 {
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, partial[i%2]); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		cc := *good
		cc.t = t
		if got := cc.toolText("echo", map[string]any{"text": "through"}); got != "through" {
			t.Fatalf("echo with 50 partial connections open: %q", got)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("echo took %v with 50 partial connections open", d)
		}
	})

	after, afterRaw := fetchStatus(t, base)
	if after.Sessions != before.Sessions || after.Tools != before.Tools || len(after.Upstreams) != len(before.Upstreams) {
		t.Errorf("status changed:\n before %s\n after  %s", beforeRaw, afterRaw)
	} else {
		for i, u := range after.Upstreams {
			if u != before.Upstreams[i] {
				t.Errorf("upstream %s changed: %+v -> %+v", u.Name, before.Upstreams[i], u)
			}
		}
	}
	if bytes.Contains(afterRaw, []byte(secret)) {
		t.Errorf("status JSON shows the secret")
	}
	if got := good.toolText("echo", map[string]any{"text": "still here"}); got != "still here" {
		t.Errorf("good session after the table: echo %q", got)
	}
	if rep := sendHostile(t, base, good.session, hostileCase{path: legacy.endpoint, body: `{"jsonrpc":"2.0","id":4242,"method":"ping"}`}); rep.Status != http.StatusAccepted {
		t.Errorf("legacy ping after the table: %d %s", rep.Status, rep.Body)
	} else if r := legacy.reply(t, "4242"); !strings.Contains(r, `"result"`) {
		t.Errorf("legacy ping reply: %s", r)
	}
	// The secret really was in play: the upstream child got it.
	if env := good.toolText("env", map[string]any{}); !strings.Contains(env, "HOSTILE_TOKEN="+secret) {
		t.Errorf("the upstream never received the secret; the no-echo checks prove nothing")
	}
	logs := g.logs.String()
	if strings.Contains(strings.ToLower(logs), "panic") {
		t.Errorf("the gateway log mentions a panic")
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the gateway log shows the secret")
	}
	for line := range strings.Lines(logs) {
		if strings.HasPrefix(line, "level=ERROR msg=forged-by-client") {
			t.Errorf("a client forged a log line: %q", line)
		}
	}
}

// noSessionIssued: a failed initialize must not hand out (or keep) a session.
func noSessionIssued(t *testing.T, rep *rpcReply) {
	t.Helper()
	if id := rep.Header.Get("Mcp-Session-Id"); id != "" {
		t.Errorf("a failed initialize issued session %s", id)
	}
}

func checkNoSecret(t *testing.T, secret string, rep *rpcReply) {
	t.Helper()
	if bytes.Contains(rep.Body, []byte(secret)) {
		t.Errorf("reply body echoes the secret")
	}
	for k, vs := range rep.Header {
		for _, v := range vs {
			if strings.Contains(v, secret) {
				t.Errorf("reply header %s echoes the secret", k)
			}
		}
	}
}
