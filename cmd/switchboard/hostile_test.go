package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
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

	status  int                         // HTTP status expected (0: left to check)
	code    int                         // JSON-RPC error code expected (0: no JSON-RPC error expected)
	apiCode string                      // admin API error code expected, as in {"error": {"code": ...}}
	id      string                      // the JSON-RPC id expected in the reply, raw
	result  bool                        // a JSON-RPC result is expected
	check   func(*testing.T, *rpcReply) // more checks
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
		// No session: a plain JSON-RPC POST, served statelessly.
		{name: "no session on tools/list", noSession: true, body: list, status: 200, result: true},
		{name: "no session on tools/call", noSession: true, body: call(`{"name":"echo","arguments":{"text":"x"}}`), status: 200, result: true},
		{name: "no session on resources/subscribe", noSession: true, body: `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"x:y"}}`, status: 200, code: -32601},
		{name: "no session, unsupported protocol version", noSession: true, header: http.Header{"Mcp-Protocol-Version": {"1999-01-01"}}, body: list, status: 400, code: -32600},
		{name: "foreign session", session: foreign, body: list, status: 404, code: -32600},
		{name: "no session on ping", noSession: true, body: ping, status: 200, result: true},
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
		{name: "tools/call with id null", body: `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, status: 400, code: -32600},
		{name: "notification with id null", body: `{"jsonrpc":"2.0","id":null,"method":"notifications/initialized"}`, status: 400, code: -32600},
		{name: "unsolicited response", body: `{"jsonrpc":"2.0","id":99,"result":{"x":1}}`, status: 400},
		{name: "X-Request-Id forging a log line", body: list, header: http.Header{"X-Request-Id": {"x level=ERROR msg=forged"}}, status: 200, check: requestID(regexp.MustCompile(`^[0-9a-f]{16}$`))},
		{name: "X-Request-Id of 65 bytes", body: list, header: http.Header{"X-Request-Id": {strings.Repeat("r", 65)}}, status: 200, check: requestID(regexp.MustCompile(`^[0-9a-f]{16}$`))},
		{name: "X-Request-Id plain, echoed", body: list, header: http.Header{"X-Request-Id": {"trace-42.a_b"}}, status: 200, check: requestID(regexp.MustCompile(`^trace-42\.a_b$`))},
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
		{name: "POST /sse", path: "/sse", body: ping, status: 405, code: -32600},
		{name: "DELETE /sse", method: http.MethodDelete, path: "/sse", status: 405, code: -32600},
		{name: "GET /message", method: http.MethodGet, path: "/message", status: 405, code: -32600},
		{name: "PUT /message", method: http.MethodPut, path: "/message?sessionId=x", body: ping, status: 405, code: -32600},
		{name: "/api/v1/anything", method: http.MethodGet, path: "/api/v1/anything", status: 404, apiCode: "not_found"},
		{name: "POST /api/v1/projects", path: "/api/v1/projects", body: `{}`, status: 400, apiCode: "invalid"},
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
		{name: "foreign Origin /api/v1", method: http.MethodGet, path: "/api/v1/anything", header: evil, status: 403, apiCode: "forbidden"},
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
		// 2026-07-28 is served statelessly, but a request must carry the
		// version in _meta too: -32602, as the revision prescribes.
		{name: "stateless protocol version on tools/list", header: http.Header{"Mcp-Protocol-Version": {"2026-07-28"}}, body: list, status: 400, code: -32602},
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
			if c.code == 0 && c.apiCode == "" && rep.code() != 0 {
				t.Errorf("unexpected JSON-RPC error %d: %.300s", rep.code(), rep.Body)
			}
			if c.apiCode != "" {
				checkAPIError(t, c.apiCode, rep)
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
// requestID checks the X-Request-Id the gateway answered with: the
// client's only when it is plain, else one of its own.
func requestID(want *regexp.Regexp) func(*testing.T, *rpcReply) {
	return func(t *testing.T, rep *rpcReply) {
		t.Helper()
		if got := rep.Header.Get("X-Request-Id"); !want.MatchString(got) {
			t.Errorf("X-Request-Id %q, want %s", got, want)
		}
	}
}

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

// apiStatusOfCode is the admin API's one HTTP status per error code.
var apiStatusOfCode = map[string]int{
	"invalid": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"conflict": 409, "too_large": 413, "unsupported_media_type": 415, "internal": 500, "unavailable": 503, "timeout": 504,
}

// checkAPIError checks that rep has the admin API's error shape,
// {"error": {"code": want, "message": "..."}}, and the code's status.
func checkAPIError(t *testing.T, want string, rep *rpcReply) {
	t.Helper()
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rep.Body, &body); err != nil || body.Error == nil || body.Error.Message == "" {
		t.Errorf("HTTP %d without the API error shape: %.300s", rep.Status, rep.Body)
		return
	}
	if body.Error.Code != want {
		t.Errorf("API error code %q, want %q: %.300s", body.Error.Code, want, rep.Body)
	}
	if s := apiStatusOfCode[body.Error.Code]; s != rep.Status {
		t.Errorf("API error code %q with HTTP %d; the code means %d", body.Error.Code, rep.Status, s)
	}
	if ct := rep.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("API error with Content-Type %q", ct)
	}
	if rep.Status == http.StatusUnauthorized && !strings.HasPrefix(rep.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: Bearer (got %q)", rep.Header.Get("WWW-Authenticate"))
	}
}

// apiDo sends one admin API request with token (none when empty) and
// returns the status and body; the setup and the snapshots use it.
func apiDo(t *testing.T, base, token, method, path, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hostileTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the reply: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// apiMust is apiDo that fails t unless the status is want, decoding the
// reply into out when out is not nil.
func apiMust(t *testing.T, base, token, method, path, body string, want int, out any) {
	t.Helper()
	status, raw := apiDo(t, base, token, method, path, body)
	if status != want {
		t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
}

// apiSnapshot is everything the admin API stores, as the admin sees it:
// projects, and each project's servers (without their live status),
// secrets and tokens. In open mode a project with tokens is read with the
// one in projectTokens (its token routes stay open to the admin).
func apiSnapshot(t *testing.T, base, admin string, projectTokens map[string]string) map[string]any {
	t.Helper()
	var projects struct {
		Projects []map[string]any `json:"projects"`
	}
	apiMust(t, base, admin, http.MethodGet, "/api/v1/projects", "", http.StatusOK, &projects)
	snap := map[string]any{"projects": projects.Projects}
	for _, p := range projects.Projects {
		id, _ := p["id"].(string)
		var servers struct {
			Servers []map[string]any `json:"servers"`
		}
		reader := cmp.Or(projectTokens[id], admin)
		apiMust(t, base, reader, http.MethodGet, "/api/v1/projects/"+id+"/servers", "", http.StatusOK, &servers)
		for _, s := range servers.Servers {
			delete(s, "status") // live, not stored
		}
		var secrets, tokens any
		apiMust(t, base, reader, http.MethodGet, "/api/v1/projects/"+id+"/secrets", "", http.StatusOK, &secrets)
		tokensReader := admin
		if admin == "" { // dev mode: a project's own token manages its tokens
			tokensReader = reader
		}
		apiMust(t, base, tokensReader, http.MethodGet, "/api/v1/projects/"+id+"/tokens", "", http.StatusOK, &tokens)
		snap[id] = map[string]any{"servers": servers.Servers, "secrets": secrets, "tokens": tokens}
	}
	return snap
}

// runAPICases sends each case with the admin token unless it sets its own
// Authorization (an empty list sends none) and checks the answer: HTTP
// status, then the API error code or, for what the MCP edge answers before
// the API (foreign Origin, Host), the JSON-RPC code; no secret echoed.
func runAPICases(t *testing.T, base, admin, secret string, cases []hostileCase) {
	t.Helper()
	echoable := 0
	for _, c := range cases {
		if strings.Contains(c.body, secret) || strings.Contains(c.raw, secret) {
			echoable++
		}
		t.Run(c.name, func(t *testing.T) {
			if c.status >= 400 && c.apiCode == "" && c.code == 0 && c.check == nil {
				t.Fatal("an error case needs the API error code (apiCode), the edge's JSON-RPC code (code) or a check")
			}
			h := http.Header{}
			for k, v := range c.header {
				h[k] = v
			}
			if _, ok := h["Authorization"]; !ok && admin != "" {
				h.Set("Authorization", "Bearer "+admin)
			}
			if _, ok := h["Content-Type"]; !ok && c.body != "" {
				h.Set("Content-Type", "application/json") // an empty list sends none
			}
			c.header = h
			c.path = "/api/v1" + c.path
			if c.method == "" {
				c.method = http.MethodPost
			}
			rep := sendHostile(t, base, "", c)
			if c.status != 0 && rep.Status != c.status {
				t.Errorf("HTTP %d, want %d: %.300s", rep.Status, c.status, rep.Body)
			}
			switch {
			case c.code != 0:
				if rep.code() != c.code {
					t.Errorf("JSON-RPC code %d, want %d: %.300s", rep.code(), c.code, rep.Body)
				}
			case c.apiCode != "":
				checkAPIError(t, c.apiCode, rep)
			case rep.Status < 400 && bytes.Contains(rep.Body, []byte(`"error"`)):
				t.Errorf("a success with an error body: %.300s", rep.Body)
			}
			if c.check != nil {
				c.check(t, rep)
			}
			checkNoSecret(t, secret, rep)
		})
	}
	if echoable < 5 {
		t.Errorf("only %d cases carry the secret; the no-echo checks prove little", echoable)
	}
}

// allow checks the Allow header of a 405.
func allow(want string) func(*testing.T, *rpcReply) {
	return func(t *testing.T, rep *rpcReply) {
		t.Helper()
		if got := rep.Header.Get("Allow"); got != want {
			t.Errorf("Allow %q, want %q", got, want)
		}
	}
}

// noHeader checks that a hostile value did not become a response header.
func noHeader(name string) func(*testing.T, *rpcReply) {
	return func(t *testing.T, rep *rpcReply) {
		t.Helper()
		if v, ok := rep.Header[http.CanonicalHeaderKey(name)]; ok {
			t.Errorf("response header %s: %q was injected", name, v)
		}
	}
}

// shortBody checks that an error does not echo a long input whole.
func shortBody(t *testing.T, rep *rpcReply) {
	t.Helper()
	if len(rep.Body) > 1024 {
		t.Errorf("error body of %d bytes echoes the input", len(rep.Body))
	}
}

// checkGatewayLog fails t if the gateway logged a panic, the secret or a
// line forged by a client.
func checkGatewayLog(t *testing.T, logs, secret string) {
	t.Helper()
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

// TestHostileAPI throws malformed and hostile requests at the admin API of
// a real gateway with an admin token (and, in a second gateway, in open
// mode) and checks each answer: HTTP status and API error code, no secret
// echoed. Afterwards everything the API stores (projects, servers, secrets,
// tokens) must be exactly as before.
func TestHostileAPI(t *testing.T) {
	const secret = "hostile-api-secret-Qm8rT3vN6yW1"
	const limit = 128 << 10
	t.Run("admin token", func(t *testing.T) { hostileAPIAdmin(t, secret, limit) })
	t.Run("open mode", func(t *testing.T) { hostileAPIOpen(t, secret) })
}

func hostileAPIAdmin(t *testing.T, secret string, limit int) {
	const admin = "hostile-admin-token-5f2c9a1e7b3d"
	g := startGateway(t, nil, map[string]string{
		"MCP_SERVER_ADMIN_TOKEN":    admin,
		"MCP_SERVER_MAX_BODY_BYTES": itoa(limit),
	})
	base := g.url
	host := "Host: " + strings.TrimPrefix(base, "http://")

	// What the hostile requests aim at, all in place before the snapshot.
	type created struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	apiMust(t, base, admin, "POST", "/api/v1/projects", `{"id":"acme","description":"hostile target"}`, 201, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects", `{"id":"other"}`, 201, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/servers", `{"name":"remote","config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer ${API_KEY}"}}}`, 201, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/servers", `{"name":"local","enabled":false,"config":{"command":"true","args":["${ROOT:-/srv}"]}}`, 201, nil)
	apiMust(t, base, admin, "PUT", "/api/v1/projects/acme/secrets/API_KEY", `{"value":"`+secret+`"}`, 200, nil)
	apiMust(t, base, admin, "PUT", "/api/v1/projects/acme/products/app", `{"mcp":{"servers":{"app-search":{"url":"http://127.0.0.1:9/sse"}}}}`, 200, nil)
	apiMust(t, base, admin, "PUT", "/api/v1/projects/acme/products/ops", `{"mcp":{"servers":{"ops-sh":{"command":"true","enabled":false}}}}`, 200, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/servers", `{"name":"pasted","enabled":false,"config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer `+admin+`","X-Trace":"on"}}}`, 201, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/servers", `{"name":"mixed","enabled":false,"config":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer `+admin+` ${API_KEY}","X-Api-Key":"${API_KEY:-`+admin+`}"}}}`, 201, nil)
	var tok, old, otherTok created
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/tokens", `{"name":"agent"}`, 201, &tok)
	apiMust(t, base, admin, "POST", "/api/v1/projects/acme/tokens", `{"name":"revoked"}`, 201, &old)
	apiMust(t, base, admin, "DELETE", "/api/v1/projects/acme/tokens/"+old.ID, "", 200, nil)
	apiMust(t, base, admin, "POST", "/api/v1/projects/other/tokens", `{}`, 201, &otherTok)
	before := apiSnapshot(t, base, admin, nil)

	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	asAgent := bearer(tok.Token)
	ct := func(v string) http.Header { return http.Header{"Content-Type": {v}} }
	evil := http.Header{"Origin": {"https://evil.example"}}
	rawReq := func(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }
	long := func(n int) string { return strings.Repeat("a", n) }
	srv := `{"name":"n","config":{"url":"http://n.example"}}`
	stdio := `{"name":"sh","config":{"command":"sh","args":["-c","id"]}}`
	calls := "/projects/acme/tool-calls"
	sqlName := "x'; DROP TABLE kb_project_mcp_servers;--"

	cases := []hostileCase{
		// Bodies that are not one JSON value of the right shape.
		{name: "bad JSON", path: "/projects", body: `{"id":"x",}`, status: 400, apiCode: "invalid"},
		{name: "truncated JSON", path: "/projects", body: `{"id":"x`, status: 400, apiCode: "invalid"},
		{name: "trailing garbage", path: "/projects", body: `{"id":"x"}garbage`, status: 400, apiCode: "invalid"},
		{name: "trailing closing brace", path: "/projects", body: `{"id":"x"}}`, status: 400, apiCode: "invalid"},
		{name: "trailing closing bracket", path: "/projects/acme/servers", body: srv + `]`, status: 400, apiCode: "invalid"},
		{name: "two values", path: "/projects", body: `{"id":"x"} {"id":"y"}`, status: 400, apiCode: "invalid"},
		{name: "unknown field", path: "/projects", body: `{"id":"x","owner":"root"}`, status: 400, apiCode: "invalid"},
		{name: "unknown field id in PATCH", method: "PATCH", path: "/projects/acme", body: `{"description":"x","id":"evil"}`, status: 400, apiCode: "invalid"},
		{name: "unknown field of 10 KB", path: "/projects", body: `{"` + long(10<<10) + `":1}`, status: 400, apiCode: "invalid", check: shortBody},
		{name: "id is a number", path: "/projects", body: `{"id":42}`, status: 400, apiCode: "invalid"},
		{name: "enabled is a string", method: "PATCH", path: "/projects/acme/servers/remote", body: `{"enabled":"false"}`, status: 400, apiCode: "invalid"},
		{name: "config is a string", path: "/projects/acme/servers", body: `{"name":"n","config":"npx server"}`, status: 400, apiCode: "invalid"},
		{name: "config is null", method: "PATCH", path: "/projects/acme/servers/remote", body: `{"config":null}`, status: 400, apiCode: "invalid"},
		{name: "args are numbers", path: "/projects/acme/servers", body: `{"name":"n","config":{"command":"x","args":[1]}}`, status: 400, apiCode: "invalid"},
		{name: "body is an array", path: "/projects", body: `[{"id":"x"}]`, status: 400, apiCode: "invalid"},
		{name: "body is null", path: "/projects", body: `null`, status: 400, apiCode: "invalid"},
		{name: "empty body", path: "/projects", body: ``, status: 400, apiCode: "invalid"},
		{name: "whitespace body", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: " \r\n\t", status: 400, apiCode: "invalid"},
		{name: "deeply nested config", path: "/projects/acme/servers", body: `{"name":"n","config":{"url":"http://n.example","x":` + nested(20000) + `}}`, status: 400, apiCode: "invalid", check: func(t *testing.T, rep *rpcReply) {
			if !bytes.Contains(rep.Body, []byte("nested more than 10000 levels deep")) || bytes.Contains(rep.Body, []byte("at byte")) {
				t.Errorf("the answer does not say the body is nested too deep: %.300s", rep.Body)
			}
		}},

		// Content-Type and size.
		{name: "Content-Type text/plain", path: "/projects", header: ct("text/plain"), body: `{"id":"x"}`, status: 415, apiCode: "unsupported_media_type"},
		{name: "Content-Type form with the secret", method: "PUT", path: "/projects/acme/secrets/API_KEY", header: ct("application/x-www-form-urlencoded"), body: "value=" + secret, status: 415, apiCode: "unsupported_media_type"},
		{name: "Content-Type multipart", path: "/projects", header: ct("multipart/form-data; boundary=x"), body: "--x\r\n\r\n{}\r\n--x--", status: 415, apiCode: "unsupported_media_type"},
		{name: "Content-Type malformed", path: "/projects", header: ct("application/json; charset"), body: `{"id":"x"}`, status: 415, apiCode: "unsupported_media_type"},
		{name: "Content-Type json-patch", method: "PATCH", path: "/projects/acme", header: ct("application/json-patch+json"), body: `[{"op":"remove","path":"/id"}]`, status: 415, apiCode: "unsupported_media_type"},
		{name: "body one byte over the limit", path: "/projects", body: `{"id":"x","description":"` + long(limit) + `"}`, status: 413, apiCode: "too_large"},
		{name: "chunked body over the limit with the secret", method: "PUT", path: "/projects/acme/secrets/API_KEY", header: http.Header{"Content-Type": {"application/json"}}, chunked: strings.NewReader(`{"value":"` + secret + long(2*limit) + `"}`), status: 413, apiCode: "too_large"},
		{name: "declared length over the limit, body withheld", raw: rawReq("POST /api/v1/projects HTTP/1.1", host, "Authorization: Bearer "+admin, "Content-Type: application/json", "Expect: 100-continue", "Content-Length: 10000000000"), status: 413, apiCode: "too_large"},

		// Encodings and NUL.
		{name: "invalid UTF-8 in an id", path: "/projects", body: "{\"id\":\"x\xff\xfe\"}", status: 400, apiCode: "invalid"},
		{name: "invalid UTF-8 in a secret value", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: "{\"value\":\"" + secret + "\xc3\x28\"}", status: 400, apiCode: "invalid"},
		{name: "escaped NUL in a project id", path: "/projects", body: `{"id":"a\u0000b"}`, status: 400, apiCode: "invalid"},
		{name: "raw NUL in a JSON string", path: "/projects", body: "{\"id\":\"a\x00b\"}", status: 400, apiCode: "invalid"},
		{name: "NUL in a server name", path: "/projects/acme/servers", body: `{"name":"n\u0000","config":{"url":"http://n.example"}}`, status: 400, apiCode: "invalid"},
		{name: "NUL in an env value", path: "/projects/acme/servers", body: `{"name":"n","config":{"url":"http://n.example","headers":{"X":"a\u0000b"}}}`, status: 400, apiCode: "invalid"},
		{name: "NUL in a secret value", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + `\u0000"}`, status: 400, apiCode: "invalid"},
		{name: "NUL in a description", method: "PATCH", path: "/projects/acme", body: `{"description":"a\u0000b"}`, status: 400, apiCode: "invalid"},
		{name: "NUL in a server name in the path", method: "GET", path: "/projects/acme/servers/remote%00", status: 404, apiCode: "not_found"},
		{name: "NUL in a secret name in the path", method: "DELETE", path: "/projects/acme/secrets/API_KEY%00", status: 404, apiCode: "not_found"},

		// Path traversal and percent-encoded slashes.
		{name: "encoded traversal as the project", method: "GET", path: "/projects/..%2Fother/servers", status: 404, apiCode: "not_found"},
		{name: "encoded slash inside the project", method: "GET", path: "/projects/acme%2F..%2Fother", status: 404, apiCode: "not_found"},
		{name: "encoded dots as the project", method: "GET", path: "/projects/%2E%2E/servers", status: 404, apiCode: "not_found"},
		{name: "encoded traversal as a server", method: "GET", path: "/projects/acme/servers/..%2F..%2Fsecrets", status: 404, apiCode: "not_found"},
		{name: "encoded traversal deleting a server", method: "DELETE", path: "/projects/acme/servers/..%2Fremote", status: 404, apiCode: "not_found"},
		{name: "encoded traversal deleting a secret", method: "DELETE", path: "/projects/acme/secrets/..%2FAPI_KEY", status: 404, apiCode: "not_found"},
		{name: "encoded slash setting a secret", method: "PUT", path: "/projects/acme/secrets/API_KEY%2F..", body: `{"value":"` + secret + `"}`, status: 400, apiCode: "invalid"},
		{name: "encoded traversal as a product", method: "PUT", path: "/projects/acme/products/..%2Fapp", body: `{"mcp":{"servers":{}}}`, status: 400, apiCode: "invalid"},
		{name: "encoded traversal as a token", method: "DELETE", path: "/projects/acme/tokens/..%2F" + tok.ID, status: 404, apiCode: "not_found"},
		{name: "traversal in a project id", path: "/projects", body: `{"id":"../etc"}`, status: 400, apiCode: "invalid"},
		{name: "traversal in a server name", path: "/projects/acme/servers", body: `{"name":"../../etc/passwd","config":{"url":"http://n.example"}}`, status: 400, apiCode: "invalid"},
		{name: "traversal in a manifest server name", method: "PUT", path: "/projects/acme/products/app", body: `{"mcp":{"servers":{"../x":{"url":"http://n.example"}}}}`, status: 400, apiCode: "invalid"},
		{name: "plain traversal is redirected, not served", raw: rawReq("GET /api/v1/projects/acme/../other/servers HTTP/1.1", host), check: func(t *testing.T, rep *rpcReply) {
			if rep.Status/100 != 3 || rep.Header.Get("Location") != "/api/v1/projects/other/servers" {
				t.Errorf("HTTP %d Location %q, want a redirect to the cleaned path", rep.Status, rep.Header.Get("Location"))
			}
		}},

		// SQL metacharacters.
		{name: "SQL in a project id", path: "/projects", body: `{"id":"x'; DROP TABLE kb_projects;--"}`, status: 400, apiCode: "invalid"},
		{name: "SQL in a server name", path: "/projects/acme/servers", body: `{"name":"` + sqlName + `","config":{"url":"http://n.example"}}`, status: 400, apiCode: "invalid"},
		{name: "SQL in a server name in the path", method: "DELETE", path: "/projects/acme/servers/x'%3B%20DROP%20TABLE%20kb_project_mcp_servers%3B--", status: 404, apiCode: "not_found"},
		{name: "SQL in a secret name", method: "PUT", path: "/projects/acme/secrets/X'%20OR%20'1'%3D'1", body: `{"value":"v"}`, status: 400, apiCode: "invalid"},
		{name: "SQL in a token id", method: "DELETE", path: "/projects/acme/tokens/x'%20OR%20'1'%3D'1", status: 404, apiCode: "not_found"},
		{name: "SQL in a product", method: "DELETE", path: "/projects/acme/products/app'%20OR%20'1'%3D'1", status: 400, apiCode: "invalid"},
		{name: "SQL in a manifest server name", method: "PUT", path: "/projects/acme/products/app", body: `{"mcp":{"servers":{"` + sqlName + `":{"url":"http://n.example"}}}}`, status: 400, apiCode: "invalid"},
		{name: "SQL in history filters", method: "GET", path: calls + "?server=x'%20OR%20'1'%3D'1&tool=%25", status: 200, check: func(t *testing.T, rep *rpcReply) {
			if !bytes.Contains(rep.Body, []byte(`"calls": []`)) {
				t.Errorf("SQL filters matched calls: %.300s", rep.Body)
			}
		}},

		// Overlong names and text.
		{name: "project id of 64", path: "/projects", body: `{"id":"` + long(64) + `"}`, status: 400, apiCode: "invalid"},
		{name: "server name of 65", path: "/projects/acme/servers", body: `{"name":"` + long(65) + `","config":{"url":"http://n.example"}}`, status: 400, apiCode: "invalid"},
		{name: "server name of 60 KB", path: "/projects/acme/servers", body: `{"name":"` + long(60<<10) + `","config":{"url":"http://n.example"}}`, status: 400, apiCode: "invalid", check: shortBody},
		{name: "server name of 8 KB in the path", method: "GET", path: "/projects/acme/servers/" + long(8<<10), status: 404, apiCode: "not_found", check: shortBody},
		{name: "secret name of 129", method: "PUT", path: "/projects/acme/secrets/" + long(129), body: `{"value":"v"}`, status: 400, apiCode: "invalid"},
		{name: "secret value of 64 KiB + 1 with the secret", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + long(64<<10) + `"}`, status: 400, apiCode: "invalid", check: shortBody},
		{name: "product of 129", method: "PUT", path: "/projects/acme/products/" + long(129), body: `{"mcp":{"servers":{}}}`, status: 400, apiCode: "invalid"},
		{name: "description of 1025 bytes", method: "PATCH", path: "/projects/acme", body: `{"description":"` + long(1025) + `"}`, status: 400, apiCode: "invalid"},
		{name: "token name of 1025 bytes", path: "/projects/acme/tokens", body: `{"name":"` + long(1025) + `"}`, status: 400, apiCode: "invalid"},

		// Header and log injection.
		{name: "CRLF in a server name in the path", method: "GET", path: "/projects/acme/servers/x%0D%0ASet-Cookie:%20a=b", status: 404, apiCode: "not_found", check: noHeader("Set-Cookie")},
		{name: "CRLF in a query value", method: "GET", path: calls + "?outcome=ok%0D%0ASet-Cookie:%20a=b", status: 400, apiCode: "invalid", check: noHeader("Set-Cookie")},
		{name: "newline forging a log line", method: "GET", path: "/projects/acme/servers/x%0Alevel=ERROR%20msg=forged-by-client", status: 404, apiCode: "not_found"},
		{name: "CRLF in a header value of a config", path: "/projects/acme/servers", body: `{"name":"n","config":{"url":"http://n.example","headers":{"X":"v\r\nX-Injected: 1"},"transport":"ws"}}`, status: 400, apiCode: "invalid", check: noHeader("X-Injected")},
		{name: "bare CR in Authorization", raw: rawReq("GET /api/v1/projects HTTP/1.1", host, "Authorization: Bearer "+admin+"\rSet-Cookie: a=b"), status: 400, check: func(t *testing.T, rep *rpcReply) {
			noHeader("Set-Cookie")(t, rep)
			if bytes.HasPrefix(rep.Body, []byte("{")) {
				t.Errorf("net/http should refuse the request before the API: %.200s", rep.Body)
			}
		}},

		// Methods.
		{name: "PUT /projects", method: "PUT", path: "/projects", body: `{"id":"x"}`, status: 405, apiCode: "method_not_allowed", check: allow("GET, POST")},
		{name: "DELETE /projects", method: "DELETE", path: "/projects", status: 405, apiCode: "method_not_allowed", check: allow("GET, POST")},
		{name: "HEAD /projects", method: "HEAD", path: "/projects", status: 405, check: allow("GET, POST")},
		{name: "POST a project", path: "/projects/acme", body: `{}`, status: 405, apiCode: "method_not_allowed", check: allow("GET, PATCH, DELETE")},
		{name: "GET a secret", method: "GET", path: "/projects/acme/secrets/API_KEY", status: 405, apiCode: "method_not_allowed", check: allow("PUT, DELETE")},
		{name: "PATCH a secret", method: "PATCH", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + `"}`, status: 405, apiCode: "method_not_allowed", check: allow("PUT, DELETE")},
		{name: "GET a token", method: "GET", path: "/projects/acme/tokens/" + tok.ID, status: 405, apiCode: "method_not_allowed", check: allow("DELETE")},
		{name: "GET a product", method: "GET", path: "/projects/acme/products/app", status: 405, apiCode: "method_not_allowed", check: allow("PUT, DELETE")},
		{name: "POST openapi.json", path: "/openapi.json", body: `{}`, status: 405, apiCode: "method_not_allowed", check: allow("GET")},
		{name: "TRACE servers", method: "TRACE", path: "/projects/acme/servers", status: 405, apiCode: "method_not_allowed", check: allow("GET, POST")},
		{name: "DELETE tool-calls", method: "DELETE", path: calls, status: 405, apiCode: "method_not_allowed", check: allow("GET")},

		// Tool-call history queries.
		{name: "limit=0", method: "GET", path: calls + "?limit=0", status: 400, apiCode: "invalid"},
		{name: "limit=abc", method: "GET", path: calls + "?limit=abc", status: 400, apiCode: "invalid"},
		{name: "limit=1001", method: "GET", path: calls + "?limit=1001", status: 400, apiCode: "invalid"},
		{name: "limit=-1", method: "GET", path: calls + "?limit=-1", status: 400, apiCode: "invalid"},
		{name: "limit=1e3", method: "GET", path: calls + "?limit=1e3", status: 400, apiCode: "invalid"},
		{name: "limit of 30 digits", method: "GET", path: calls + "?limit=" + strings.Repeat("9", 30), status: 400, apiCode: "invalid"},
		{name: "since=yesterday", method: "GET", path: calls + "?since=yesterday", status: 400, apiCode: "invalid"},
		{name: "until in month 13", method: "GET", path: calls + "?until=2026-13-01T00:00:00Z", status: 400, apiCode: "invalid"},
		{name: "cursor not base64", method: "GET", path: calls + "?cursor=not-a-cursor!", status: 400, apiCode: "invalid"},
		{name: "cursor too short", method: "GET", path: calls + "?cursor=AAAA", status: 400, apiCode: "invalid"},
		{name: "cursor of 2 KB", method: "GET", path: calls + "?cursor=" + long(2048), status: 400, apiCode: "invalid"},
		{name: "outcome=bogus", method: "GET", path: calls + "?outcome=bogus", status: 400, apiCode: "invalid"},
		{name: "outcome=OK", method: "GET", path: calls + "?outcome=OK", status: 400, apiCode: "invalid"},
		{name: "malformed percent-encoding", method: "GET", path: calls + "?limit=%zz", status: 400, apiCode: "invalid"},
		{name: "semicolon separator", method: "GET", path: calls + "?limit=5;outcome=ok", status: 400, apiCode: "invalid"},
		{name: "unknown parameter", method: "GET", path: calls + "?limt=5", status: 400, apiCode: "invalid"},
		{name: "parameter twice", method: "GET", path: calls + "?limit=1&limit=1000", status: 400, apiCode: "invalid"},

		// Authentication.
		{name: "no Authorization", method: "GET", path: "/projects", header: http.Header{"Authorization": {}}, status: 401, apiCode: "unauthorized"},
		{name: "no Authorization setting a secret", method: "PUT", path: "/projects/acme/secrets/API_KEY", header: http.Header{"Authorization": {}}, body: `{"value":"` + secret + `"}`, status: 401, apiCode: "unauthorized"},
		{name: "Basic credentials", method: "GET", path: "/projects", header: http.Header{"Authorization": {"Basic YWRtaW46" + admin}}, status: 401, apiCode: "unauthorized"},
		{name: "Bearer without a token", method: "GET", path: "/projects", header: http.Header{"Authorization": {"Bearer"}}, status: 401, apiCode: "unauthorized"},
		{name: "Bearer with spaces only", method: "GET", path: "/projects", header: http.Header{"Authorization": {"Bearer    "}}, status: 401, apiCode: "unauthorized"},
		{name: "admin token with a suffix", method: "GET", path: "/projects", header: bearer(admin + "x"), status: 401, apiCode: "unauthorized"},
		{name: "admin token prefix", method: "GET", path: "/projects", header: bearer(admin[:16]), status: 401, apiCode: "unauthorized"},
		{name: "unknown project token", method: "GET", path: "/projects/acme/servers", header: bearer("sbt_" + strings.Repeat("A", 43)), status: 401, apiCode: "unauthorized"},
		{name: "revoked project token", method: "GET", path: "/projects/acme/servers", header: bearer(old.Token), status: 401, apiCode: "unauthorized"},
		{name: "project token with an encoded CR LF inside", method: "GET", path: "/projects/acme/servers", header: bearer(tok.Token[:20] + "%0D%0A" + tok.Token[20:]), status: 401, apiCode: "unauthorized"},
		{name: "admin token in another header", method: "GET", path: "/projects", header: http.Header{"Authorization": {}, "X-Admin-Token": {admin}}, status: 401, apiCode: "unauthorized"},
		{name: "admin token in the query", method: "GET", path: "/projects?token=" + admin, header: http.Header{"Authorization": {}}, status: 401, apiCode: "unauthorized"},

		// A project token: its own project only, never admin actions.
		{name: "project token lists projects", method: "GET", path: "/projects", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token creates a project", path: "/projects", header: asAgent, body: `{"id":"mine"}`, status: 403, apiCode: "forbidden"},
		{name: "project token deletes its project", method: "DELETE", path: "/projects/acme", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token reads another project", method: "GET", path: "/projects/other/servers", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token sets another project's secret", method: "PUT", path: "/projects/other/secrets/API_KEY", header: asAgent, body: `{"value":"` + secret + `"}`, status: 403, apiCode: "forbidden"},
		{name: "project token creates a stdio server", path: "/projects/acme/servers", header: asAgent, body: stdio, status: 403, apiCode: "forbidden"},
		{name: "project token turns a server into stdio", method: "PATCH", path: "/projects/acme/servers/remote", header: asAgent, body: `{"config":{"command":"sh"}}`, status: 403, apiCode: "forbidden"},
		{name: "project token renames a stdio server", method: "PATCH", path: "/projects/acme/servers/local", header: asAgent, body: `{"name":"local2"}`, status: 403, apiCode: "forbidden"},
		{name: "project token enables a stdio server the admin disabled", method: "PATCH", path: "/projects/acme/servers/local", header: asAgent, body: `{"enabled":true}`, status: 403, apiCode: "forbidden"},
		{name: "project token sets a secret a stdio command uses", method: "PUT", path: "/projects/acme/secrets/ROOT", header: asAgent, body: `{"value":"/"}`, status: 403, apiCode: "forbidden"},
		{name: "project token deletes a secret a stdio command uses", method: "DELETE", path: "/projects/acme/secrets/ROOT", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token turns a stdio server into a remote one", method: "PATCH", path: "/projects/acme/servers/local", header: asAgent, body: `{"config":{"url":"http://127.0.0.1:9/mcp"}}`, status: 403, apiCode: "forbidden"},
		{name: "project token edits a stdio server's description", method: "PATCH", path: "/projects/acme/servers/local", header: asAgent, body: `{"description":"mine now"}`, status: 403, apiCode: "forbidden"},
		{name: "project token disables a stdio server", method: "PATCH", path: "/projects/acme/servers/local", header: asAgent, body: `{"enabled":false}`, status: 403, apiCode: "forbidden"},
		{name: "project token deletes a stdio server", method: "DELETE", path: "/projects/acme/servers/local", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token replaces a manifest's stdio server", method: "PUT", path: "/projects/acme/products/ops", header: asAgent, body: `{"mcp":{"servers":{"ops-sh":{"url":"http://127.0.0.1:9/mcp"}}}}`, status: 403, apiCode: "forbidden"},
		{name: "project token empties a manifest holding a stdio server", method: "PUT", path: "/projects/acme/products/ops", header: asAgent, body: `{"mcp":{"servers":{}}}`, status: 403, apiCode: "forbidden"},
		{name: "project token deletes a manifest holding a stdio server", method: "DELETE", path: "/projects/acme/products/ops", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token reads a pasted credential", method: "GET", path: "/projects/acme/servers/pasted", header: asAgent, status: 200, check: func(t *testing.T, rep *rpcReply) {
			body := rep.Body
			if strings.Contains(string(body), admin) || !strings.Contains(string(body), `"Authorization": "[redacted]"`) || !strings.Contains(string(body), `"X-Trace": "on"`) {
				t.Errorf("literal credential not masked for a project token: %s", body)
			}
		}},
		{name: "project token lists a pasted credential", method: "GET", path: "/projects/acme/servers", header: asAgent, status: 200, check: func(t *testing.T, rep *rpcReply) {
			body := rep.Body
			if strings.Contains(string(body), admin) || !strings.Contains(string(body), `Bearer ${API_KEY}`) {
				t.Errorf("servers list: credential shown or reference hidden: %s", body)
			}
		}},
		{name: "project token reads a credential beside a reference", method: "GET", path: "/projects/acme/servers/mixed", header: asAgent, status: 200, check: func(t *testing.T, rep *rpcReply) {
			if body := string(rep.Body); strings.Contains(body, admin) || strings.Count(body, `"[redacted]"`) != 2 {
				t.Errorf("literal credential beside a ${REF} (or as its default) not masked for a project token: %s", body)
			}
		}},
		{name: "project token imports a stdio manifest", method: "PUT", path: "/projects/acme/products/app", header: asAgent, body: `{"mcp":{"servers":{"app-search":{"url":"http://127.0.0.1:9/sse"},"x":{"command":"sh"}}}}`, status: 403, apiCode: "forbidden"},
		{name: "project token lists its tokens", method: "GET", path: "/projects/acme/tokens", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token creates a token", path: "/projects/acme/tokens", header: asAgent, body: `{"name":"more"}`, status: 403, apiCode: "forbidden"},
		{name: "project token revokes itself", method: "DELETE", path: "/projects/acme/tokens/" + tok.ID, header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token revokes another project's token", method: "DELETE", path: "/projects/other/tokens/" + otherTok.ID, header: asAgent, status: 403, apiCode: "forbidden"},

		// Values that must never come back.
		{name: "secret with an unknown field", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + `","ttl":60}`, status: 400, apiCode: "invalid"},
		{name: "secret with trailing garbage", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + `"}"` + secret + `"`, status: 400, apiCode: "invalid"},
		{name: "secret as an array", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":["` + secret + `"]}`, status: 400, apiCode: "invalid"},
		{name: "secret under a bad name", method: "PUT", path: "/projects/acme/secrets/1BAD", body: `{"value":"` + secret + `"}`, status: 400, apiCode: "invalid"},
		{name: "secret in a bad JSON body", method: "PUT", path: "/projects/acme/secrets/API_KEY", body: `{"value":"` + secret + `",}`, status: 400, apiCode: "invalid"},
		{name: "secret in env of a bad entry", path: "/projects/acme/servers", body: `{"name":"leak","config":{"command":"x","env":{"K":"` + secret + `"},"transport":"sse"}}`, status: 400, apiCode: "invalid"},
		{name: "secret in a non-HTTP url", path: "/projects/acme/servers", body: `{"name":"leak","config":{"url":"ftp://h.example/?k=` + secret + `"}}`, status: 400, apiCode: "invalid"},
		{name: "secret in a manifest listing a server twice", method: "PUT", path: "/projects/acme/products/app", body: `{"mcp":{"servers":{"a":{"url":"http://a.example","headers":{"K":"` + secret + `"}},"a":{"url":"http://b.example"}}}}`, status: 400, apiCode: "invalid"},

		// Origin and Host: the MCP edge answers before the API, in its
		// JSON-RPC shape (not the API's; see openapi.json).
		{name: "foreign Origin", method: "GET", path: "/projects", header: evil, status: 403, apiCode: "forbidden"},
		{name: "foreign Origin setting a secret", method: "PUT", path: "/projects/acme/secrets/API_KEY", header: evil, body: `{"value":"` + secret + `"}`, status: 403, apiCode: "forbidden"},
		{name: "Origin null", method: "GET", path: "/projects", header: http.Header{"Origin": {"null"}}, status: 403, apiCode: "forbidden"},
		{name: "Host not loopback", method: "GET", path: "/projects", host: "evil.example", status: 403, apiCode: "forbidden"},
	}
	runAPICases(t, base, admin, secret, cases)

	after := apiSnapshot(t, base, admin, nil)
	if diff := gocmp.Diff(before, after); diff != "" {
		t.Errorf("hostile requests changed what the API stores (-before +after):\n%s", diff)
	}
	// The tokens still work as before: the agent's reaches its project.
	apiMust(t, base, tok.Token, "GET", "/api/v1/projects/acme/servers", "", 200, nil)

	// A project token that sends back the entry it read, credential
	// masked, with another change (as an edit form does) leaves the
	// admin's credential stored (after the snapshot: this edit succeeds).
	var seen struct {
		Config json.RawMessage `json:"config"`
	}
	apiMust(t, base, tok.Token, "GET", "/api/v1/projects/acme/servers/pasted", "", 200, &seen)
	if !strings.Contains(string(seen.Config), `"[redacted]"`) {
		t.Fatalf("pasted credential not masked for the project token: %s", seen.Config)
	}
	apiMust(t, base, tok.Token, "PATCH", "/api/v1/projects/acme/servers/pasted", `{"description":"edited","config":`+string(seen.Config)+`}`, 200, nil)
	var stored struct {
		Description string `json:"description"`
		Config      struct {
			Headers map[string]string `json:"headers"`
		} `json:"config"`
	}
	apiMust(t, base, admin, "GET", "/api/v1/projects/acme/servers/pasted", "", 200, &stored)
	if stored.Description != "edited" || stored.Config.Headers["Authorization"] != "Bearer "+admin {
		t.Errorf("after a project token's edit: description %q, Authorization %q; want the edit and the admin's credential kept", stored.Description, stored.Config.Headers["Authorization"])
	}
	checkGatewayLog(t, g.logs.String(), secret)
}

func hostileAPIOpen(t *testing.T, secret string) {
	g := startGateway(t, nil, nil)
	base := g.url
	type created struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	// In open mode a request without a token is the admin, except on a
	// project that has tokens: "locked" gets one.
	apiMust(t, base, "", "POST", "/api/v1/projects", `{"id":"open"}`, 201, nil)
	apiMust(t, base, "", "POST", "/api/v1/projects", `{"id":"locked"}`, 201, nil)
	apiMust(t, base, "", "PUT", "/api/v1/projects/locked/secrets/API_KEY", `{"value":"`+secret+`"}`, 200, nil)
	var tok created
	apiMust(t, base, "", "POST", "/api/v1/projects/locked/tokens", `{"name":"agent"}`, 201, &tok)
	before := apiSnapshot(t, base, "", map[string]string{"locked": tok.Token})

	none := http.Header{"Authorization": {}}
	asAgent := http.Header{"Authorization": {"Bearer " + tok.Token}}
	cases := []hostileCase{
		{name: "no token on a locked project", method: "GET", path: "/projects/locked/servers", header: none, status: 401, apiCode: "unauthorized"},
		{name: "no token reading a locked project", method: "GET", path: "/projects/locked", header: none, status: 401, apiCode: "unauthorized"},
		{name: "no token setting a locked project's secret", method: "PUT", path: "/projects/locked/secrets/API_KEY", header: none, body: `{"value":"` + secret + `"}`, status: 401, apiCode: "unauthorized"},
		{name: "no token deleting a locked project's secret", method: "DELETE", path: "/projects/locked/secrets/API_KEY", header: none, status: 401, apiCode: "unauthorized"},
		{name: "no token, bad JSON, locked project", path: "/projects/locked/servers", header: none, body: `{"name":`, status: 401, apiCode: "unauthorized"},
		{name: "garbage token on an open project", method: "GET", path: "/projects/open/servers", header: http.Header{"Authorization": {"Bearer garbage"}}, status: 401, apiCode: "unauthorized"},
		{name: "garbage token listing projects", method: "GET", path: "/projects", header: http.Header{"Authorization": {"Bearer garbage"}}, status: 401, apiCode: "unauthorized"},
		{name: "Basic credentials on a locked project", method: "GET", path: "/projects/locked/servers", header: http.Header{"Authorization": {"Basic YTpi"}}, status: 401, apiCode: "unauthorized"},
		{name: "project token lists projects", method: "GET", path: "/projects", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token reads an open project", method: "GET", path: "/projects/open/servers", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "project token creates a stdio server elsewhere", path: "/projects/open/servers", header: asAgent, body: `{"name":"sh","config":{"command":"sh"}}`, status: 403, apiCode: "forbidden"},
		{name: "project token creates a token elsewhere", path: "/projects/open/tokens", header: asAgent, body: `{}`, status: 403, apiCode: "forbidden"},
		{name: "no token creates a token for a locked project", path: "/projects/locked/tokens", header: none, body: `{}`, status: 401, apiCode: "unauthorized"},
		{name: "project token deletes its project", method: "DELETE", path: "/projects/locked", header: asAgent, status: 403, apiCode: "forbidden"},
		{name: "bad JSON without a token", path: "/projects", header: none, body: `{"id":"x"}}`, status: 400, apiCode: "invalid"},
		{name: "secret with an unknown field without a token", method: "PUT", path: "/projects/open/secrets/API_KEY", header: none, body: `{"value":"` + secret + `","x":1}`, status: 400, apiCode: "invalid"},
		{name: "secret value of 64 KiB + 1", method: "PUT", path: "/projects/open/secrets/API_KEY", header: none, body: `{"value":"` + secret + strings.Repeat("s", 64<<10) + `"}`, status: 400, apiCode: "invalid", check: shortBody},
		{name: "secret with a NUL without a token", method: "PUT", path: "/projects/open/secrets/API_KEY", header: none, body: `{"value":"` + secret + `\u0000"}`, status: 400, apiCode: "invalid"},
		{name: "secret with trailing garbage without a token", method: "PUT", path: "/projects/open/secrets/API_KEY", header: none, body: `{"value":"` + secret + `"}]`, status: 400, apiCode: "invalid"},
		{name: "secret with a garbage token", method: "PUT", path: "/projects/open/secrets/API_KEY", header: http.Header{"Authorization": {"Bearer " + secret}}, body: `{"value":"` + secret + `"}`, status: 401, apiCode: "unauthorized"},
		{name: "foreign Origin without a token", method: "GET", path: "/projects", header: http.Header{"Origin": {"https://evil.example"}}, status: 403, apiCode: "forbidden"},
		{name: "Host not loopback without a token", method: "DELETE", path: "/projects/open", host: "evil.example", status: 403, apiCode: "forbidden"},
	}
	runAPICases(t, base, "", secret, cases)

	after := apiSnapshot(t, base, "", map[string]string{"locked": tok.Token})
	if diff := gocmp.Diff(before, after); diff != "" {
		t.Errorf("hostile requests changed what the API stores (-before +after):\n%s", diff)
	}
	apiMust(t, base, tok.Token, "GET", "/api/v1/projects/locked/servers", "", 200, nil)
	checkGatewayLog(t, g.logs.String(), secret)
}

// TestHostileSelfUpstream: a gateway given its own endpoint as an upstream
// refuses the request that comes back to it at once (508, a hop header it
// sent itself) instead of waiting on itself for the connect timeout; the
// server shows as failed with a message naming the loop, and the
// gateway's other tools keep working.
func TestHostileSelfUpstream(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, map[string]string{"MCP_SERVER_CONNECT_TIMEOUT": "10m"})
	apiMust(t, g.url, "", "POST", "/api/v1/projects/default/servers", `{"name":"self","config":{"url":"`+g.url+`/mcp"}}`, 201, nil)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	names, _ := toolObjects(t, c.call("tools/list", nil))
	if !strings.Contains(strings.Join(names, ","), "echo") {
		t.Fatalf("tools/list lost the other server's tools: %v", names)
	}
	var servers struct {
		Servers []struct {
			Name   string `json:"name"`
			Status *struct {
				State     string `json:"state"`
				LastError string `json:"lastError"`
			} `json:"status"`
		} `json:"servers"`
	}
	apiMust(t, g.url, "", "GET", "/api/v1/projects/default/servers", "", 200, &servers)
	found := false
	for _, s := range servers.Servers {
		if s.Name == "self" {
			found = true
			if s.Status == nil || s.Status.State == "ready" || !strings.Contains(s.Status.LastError, "loop") {
				t.Errorf("self upstream status = %+v, want a failure naming the loop", s.Status)
			}
		}
	}
	if !found {
		t.Fatal("self upstream not listed")
	}
	if got := c.toolText("echo", map[string]any{"text": "still here"}); got != "still here" {
		t.Errorf("echo = %q", got)
	}
}

// TestHostileSecretForms: a stdio server that prints a project secret to
// stderr so that the start of the 16 KiB tail shown in status cuts it, and
// then percent-encoded, JSON-escaped and in base64 (at an offset, as in
// a Basic credential), and a client that passes the secret encoded to a
// tool under an innocent name: no form of the value, and no piece of it
// from the cut, reaches status, the call log or the gateway's log (issue
// 20, items 17 and 19).
func TestHostileSecretForms(t *testing.T) {
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	value := "p@ss/" + secretValue(t) + " w+rd" // 36 bytes
	pieces := []string{value[len(value)-29:], value[:12]}
	b64 := base64.StdEncoding.EncodeToString([]byte("user:" + value))
	js, _ := json.Marshal(value)
	forms := []string{url.QueryEscape(value), strings.ToLower(url.PathEscape(value)), string(js[1 : len(js)-1]), `\u0070` + value[1:], b64}
	pieces = append(pieces, forms...)
	after := "\n" + strings.Join(forms, "\n") + "\n"
	after += strings.Repeat("y", 16<<10-29-len(after)) // the tail starts 29 bytes into the value's end
	api.createProject("vault")
	api.putSecret("vault", "API_KEY", value)
	api.createServer("vault", "leak", map[string]any{"command": "sh", "args": []string{"-c", `printf 'starting with %s%s' "$KEY" "$AFTER" >&2; exit 1`},
		"env": map[string]string{"KEY": "${API_KEY}", "AFTER": after}})
	api.createServer("vault", "keeper", fixture("keeper", nil))

	cs, _ := openMCP(t, g.url+"/projects/vault/mcp", adminToken)
	toolNames(t, cs) // starts both servers
	var stderr string
	eventually(t, opTimeout, func() (bool, string) {
		var s struct {
			Status struct{ Stderr string } `json:"status"`
		}
		api.must(http.StatusOK, "GET", "/api/v1/projects/vault/servers/leak", nil, &s)
		stderr = s.Status.Stderr
		return strings.HasSuffix(stderr, "yyy"), "the leak server's stderr tail is not in status yet"
	})
	if !strings.HasPrefix(stderr, "[redacted]\n[redacted]\n") {
		t.Errorf("stderr tail starts %.200q, want the cut value and the next line redacted", stderr)
	}
	callText(t, cs, "echo", map[string]any{"text": "q=" + forms[0] + " b=" + b64 + " j=" + forms[2]})
	logged := api.waitCalls("vault", "?tool=echo", 1)
	// "user:" is five bytes: the base64 of it and of the value's first
	// two bits (7 characters) stays.
	if !strings.Contains(string(logged[0].Arguments), "q=[redacted] b="+b64[:7]+"[redacted] j=[redacted]") {
		t.Errorf("logged arguments %s, want every form redacted", logged[0].Arguments)
	}
	g.stop(t) // the log is complete
	for _, p := range append(pieces, value) {
		for what, text := range map[string]string{"status": stderr, "the call log": string(logged[0].Arguments), "the gateway log": g.logs.String()} {
			if strings.Contains(text, p) {
				t.Errorf("%s shows %q, a form or piece of the secret", what, p)
			}
		}
	}
}

// TestHostileCredentialsInEntries: a project token reads its project's
// servers (list, one, status) hoping for the credentials an admin wrote
// into them outside the headers: URL user-info and query, a stdio
// server's flags and the URLs of its env. It gets none; the admin still
// reads them all (issue 20, item 20).
func TestHostileCredentialsInEntries(t *testing.T) {
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	api.createProject("shared")
	literals := []string{"urlpass-5bq1", "apikey-9xw2", "flagtok-3kd7", "flagpw-8mz4", "dsnpw-2hv6"}
	api.createServer("shared", "remote", map[string]any{"url": "http://user:urlpass-5bq1@127.0.0.1:9/mcp?api_key=apikey-9xw2&v=2"})
	api.createServer("shared", "local", map[string]any{"command": "/nonexistent/srv", "args": []string{"--token=flagtok-3kd7", "--password", "flagpw-8mz4", "--verbose"},
		"env": map[string]string{"DATABASE_URL": "postgres://app:dsnpw-2hv6@db:5432/app"}})
	tenant := api.as(api.createToken("shared", "tenant").Token)
	for _, path := range []string{"/servers", "/servers/remote", "/servers/local", "/status", ""} {
		body := string(tenant.must(http.StatusOK, "GET", "/api/v1/projects/shared"+path, nil, nil))
		for _, l := range literals {
			if strings.Contains(body, l) {
				t.Errorf("a project token's GET %s shows %q", "/api/v1/projects/shared"+path, l)
			}
		}
	}
	body := string(api.must(http.StatusOK, "GET", "/api/v1/projects/shared/servers", nil, nil))
	for _, l := range literals {
		if !strings.Contains(body, l) {
			t.Errorf("the admin's GET does not show %q: the attack proves nothing", l)
		}
	}
}

// TestHostileCredentialsInHostedArgs (issue 20, item 20): a hosted
// server's command line is masked for a project token as a stdio
// server's is, in the hosted list and in each server's own read; the
// admin reads it as registered. No engine is needed: a servers-file
// entry is listed (failed) with the engine unreachable.
func TestHostileCredentialsInHostedArgs(t *testing.T) {
	g := startGateway(t, [][2]any{{"boxed", map[string]any{"hosted": map[string]any{
		"image": "switchboard-test/any:1", "command": "--api-key=cmdkey-4tr8",
		"args": []string{"--token=flagtok-6yu1", "--password", "flagpw-1qa5", "--db", "postgres://app:dsnpw-7ws3@db/app?sslmode=off", "--verbose"},
	}}}}, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "DOCKER_HOST": "unix://" + t.TempDir() + "/no-docker.sock"})
	api := newAPI(t, g.url, adminToken)
	literals := []string{"cmdkey-4tr8", "flagtok-6yu1", "flagpw-1qa5", "dsnpw-7ws3"}
	tenant := api.as(api.createToken("default", "tenant").Token)
	for _, path := range []string{"/api/v1/mcp/servers", "/api/v1/mcp/servers/boxed", "/api/v1/projects/default/mcp/servers", "/api/v1/projects/default/mcp/servers/boxed", "/api/v1/projects/default/servers", "/api/v1/projects/default/status"} {
		body := string(tenant.must(http.StatusOK, "GET", path, nil, nil))
		for _, l := range literals {
			if strings.Contains(body, l) {
				t.Errorf("a project token's GET %s shows %q", path, l)
			}
		}
	}
	var st switchboard.HostedStatus
	tenant.must(http.StatusOK, "GET", "/api/v1/mcp/servers/boxed", nil, &st)
	want := []string{"--token=[redacted]", "--password", "[redacted]", "--db", "postgres://app:[redacted]@db/app?sslmode=off", "--verbose"}
	if st.Config.Command != "--api-key=[redacted]" || !slices.Equal(st.Config.Args, want) {
		t.Errorf("a project token reads command %q, args %q; want the flags and URL kept, each credential [redacted]", st.Config.Command, st.Config.Args)
	}
	body := string(api.must(http.StatusOK, "GET", "/api/v1/mcp/servers/boxed", nil, nil))
	for _, l := range literals {
		if !strings.Contains(body, l) {
			t.Errorf("the admin's GET does not show %q: the attack proves nothing", l)
		}
	}
}

// TestHostileCredentialsInStderr (issue 34, items 7 and 8): a stdio
// server that prints its own command line, and a project secret split
// over two lines, to stderr before it fails. Its config is shown masked,
// and so is its stderr tail: no status, and not the gateway's log, shows
// a credential of its args, or the secret, even when split.
func TestHostileCredentialsInStderr(t *testing.T) {
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken})
	api := newAPI(t, g.url, adminToken)
	api.createProject("printer")
	value := "split-" + secretValue(t)
	api.putSecret("printer", "API_KEY", value)
	literals := []string{"argtok-5hq2x9", "argpw-7kd1m4", "argdsn-3mv8p0"}
	api.createServer("printer", "echoargs", map[string]any{"command": "sh",
		"args": []string{"-c", `echo "started as $0 $*" >&2; printf 'key %s\n%s\nend\n' "${KEY%${KEY#??????????}}" "${KEY#??????????}" >&2; exit 1`,
			"srv", "--token=argtok-5hq2x9", "--password", "argpw-7kd1m4", "postgres://app:argdsn-3mv8p0@db/app"},
		"env": map[string]string{"KEY": "${API_KEY}"}})
	api.createServer("printer", "keeper", fixture("keeper", nil))
	cs, _ := openMCP(t, g.url+"/projects/printer/mcp", adminToken)
	toolNames(t, cs) // starts both servers
	var stderr string
	eventually(t, opTimeout, func() (bool, string) {
		var s struct {
			Status struct{ Stderr string } `json:"status"`
		}
		api.must(http.StatusOK, "GET", "/api/v1/projects/printer/servers/echoargs", nil, &s)
		stderr = s.Status.Stderr
		return strings.Contains(stderr, "end"), "the server's stderr tail is not in status yet"
	})
	if !strings.Contains(stderr, "started as srv --token=[redacted] --password [redacted] postgres://app:[redacted]@db/app") {
		t.Errorf("stderr tail %q: want the command line with its credentials redacted", stderr)
	}
	tenant := api.as(api.createToken("printer", "tenant").Token)
	status := string(tenant.must(http.StatusOK, "GET", "/api/v1/projects/printer/status", nil, nil))
	g.stop(t) // the log is complete
	for what, text := range map[string]string{"status": stderr, "the project's status": status, "the gateway log": g.logs.String()} {
		for _, l := range append(literals, value, value[:10], value[10:]) {
			if strings.Contains(text, l) {
				t.Errorf("%s shows %q", what, l)
			}
		}
	}
}

// TestHostileShadowHosted (issue 34, item 9): a project token creates a
// stored server with the name of the project's hosted server, which would
// then stop being served ("another server of the project has its
// name"). It is refused (409, naming the hosted server); no engine is
// needed: a servers-file hosted entry is listed with the engine
// unreachable.
func TestHostileShadowHosted(t *testing.T) {
	g := startGateway(t, [][2]any{{"boxed", map[string]any{"hosted": map[string]any{"image": "switchboard-test/any:1"}}}},
		map[string]string{"MCP_SERVER_ADMIN_TOKEN": adminToken, "DOCKER_HOST": "unix://" + t.TempDir() + "/no-docker.sock"})
	api := newAPI(t, g.url, adminToken)
	tenant := api.as(api.createToken("default", "tenant").Token)
	body := string(tenant.must(http.StatusConflict, "POST", "/api/v1/projects/default/servers",
		map[string]any{"name": "boxed", "config": map[string]any{"url": "http://127.0.0.1:9/mcp"}}, nil))
	if !strings.Contains(body, "hosted server") {
		t.Errorf("409 body %s: want it to name the hosted server", body)
	}
	// The admin may not shadow it either.
	api.must(http.StatusConflict, "POST", "/api/v1/projects/default/servers",
		map[string]any{"name": "boxed", "config": map[string]any{"url": "http://127.0.0.1:9/mcp"}}, nil)
	var list struct {
		Servers []struct {
			Name   string `json:"name"`
			Source string `json:"source"`
		} `json:"servers"`
	}
	api.must(http.StatusOK, "GET", "/api/v1/projects/default/servers", nil, &list)
	for _, s := range list.Servers {
		if s.Name == "boxed" && s.Source != "hosted" {
			t.Fatalf("a server named boxed that is not the hosted one: %+v", list)
		}
	}
}
