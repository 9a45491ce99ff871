package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// An upstream that attacks the gateway with what it sends back: one the
// outside review of issue 12 asked for (items 10 and 15). The same tiny
// MCP server speaks stdio (this test binary re-executed with
// envHostileChild), legacy SSE and streamable HTTP; its tools are
//
//   - small: returns "ok";
//   - flood: returns floodBytes of text in 16 KiB items, streamed (the
//     server never holds it); over streamable HTTP a blank line separates
//     the items, which must not reset the count of a JSON body;
//   - stall (stdio): starts its reply, writes stallBytes without a newline
//     and then nothing, keeping the pipe open;
//   - blanks: answers with newlines only, forever: blank lines on stdio,
//     empty events on SSE, a body of nothing on streamable HTTP;
//   - "nul\x00name": a name with a NUL in it; returns "ok".
const (
	envHostileChild = "SWITCHBOARD_HOSTILE_CHILD"
	floodBytes      = 256 << 20
	stallBytes      = 2 << 20
)

// runHostileChild serves the hostile server on stdio and exits, when this
// process was started as one (called from TestMain).
func runHostileChild() {
	if os.Getenv(envHostileChild) != "stdio" {
		return
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		if err := hostileReply(out, in.Bytes(), "", "\n", ",", out.Flush); err != nil {
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// hostileReply writes the answer to one request (nothing for a
// notification) between prefix and suffix; sep separates the items of a
// flood.
func hostileReply(w io.Writer, req []byte, prefix, suffix, sep string, flush func() error) error {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string `json:"protocolVersion"`
			Name            string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(req, &m) != nil || len(m.ID) == 0 {
		return nil
	}
	head := prefix + `{"jsonrpc":"2.0","id":` + string(m.ID) + `,`
	var body string
	switch {
	case m.Method == "initialize":
		body = `"result":{"protocolVersion":` + strconv.Quote(cmpOr(m.Params.ProtocolVersion, "2025-06-18")) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}}`
	case m.Method == "tools/list":
		body = `"result":{"tools":[{"name":"small","inputSchema":{"type":"object"}},{"name":"flood","inputSchema":{"type":"object"}},{"name":"stall","inputSchema":{"type":"object"}},{"name":"blanks","inputSchema":{"type":"object"}},{"name":"nul\u0000name","inputSchema":{"type":"object"}}]}}`
	case m.Method == "tools/call" && (m.Params.Name == "small" || m.Params.Name == "nul\x00name"):
		body = `"result":{"content":[{"type":"text","text":"ok"}]}}`
	case m.Method == "tools/call" && m.Params.Name == "blanks":
		blank := bytes.Repeat([]byte("\n"), 16<<10)
		for {
			if _, err := w.Write(blank); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
		}
	case m.Method == "tools/call" && (m.Params.Name == "flood" || m.Params.Name == "stall"):
		if m.Params.Name == "stall" {
			if _, err := io.WriteString(w, head+`"result":{"content":[{"type":"text","text":"`); err != nil {
				return err
			}
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for sent := 0; sent < stallBytes; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return err
				}
			}
			if err := flush(); err != nil {
				return err
			}
			select {} // the pipe stays open; the gateway ends us
		}
		// 16 KiB text items (each within the limit), separated by sep.
		if _, err := io.WriteString(w, head+`"result":{"content":[`); err != nil {
			return err
		}
		item := []byte(`{"type":"text","text":"` + strings.Repeat("x", 16<<10) + `"}`)
		for sent := 0; sent < floodBytes; sent += len(item) {
			if sent > 0 {
				if _, err := io.WriteString(w, sep); err != nil {
					return err
				}
			}
			if _, err := w.Write(item); err != nil {
				return err
			}
			if err := flush(); err != nil {
				return err
			}
		}
		_, err := io.WriteString(w, `]}}`+suffix)
		return err
	case m.Method == "ping":
		body = `"result":{}}`
	default:
		body = `"error":{"code":-32601,"message":"no such method"}}`
	}
	_, err := io.WriteString(w, head+body+suffix)
	return err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// hostileStreamable serves the hostile server over streamable HTTP, each
// answer a single application/json body, its flood padded with blank lines
// (a GET stream is refused).
func hostileStreamable() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		req, _ := io.ReadAll(r.Body)
		if bytes.Contains(req, []byte(`"method":"notifications/`)) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = hostileReply(w, req, "", "", ",\n\n", flusher(w))
	})
}

// hostileSSE serves the hostile server over the legacy HTTP+SSE
// transport: GET /sse is the event stream, POST /message its requests.
func hostileSSE(t *testing.T) http.Handler {
	var mu sync.Mutex
	streams := map[string]chan []byte{}
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sse", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		id := strconv.Itoa(n)
		ch := make(chan []byte, 16)
		streams[id] = ch
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: endpoint\ndata: /message?sessionId=%s\n\n", id)
		flush := flusher(w)
		_ = flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case req := <-ch:
				if hostileReply(w, req, "event: message\ndata: ", "\n\n", ",", flush) != nil || flush() != nil {
					return // the gateway cut us off
				}
			}
		}
	})
	mux.HandleFunc("POST /message", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ch := streams[r.URL.Query().Get("sessionId")]
		mu.Unlock()
		if ch == nil {
			http.NotFound(w, r)
			return
		}
		req, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusAccepted)
		select {
		case ch <- req:
		case <-r.Context().Done():
		}
	})
	return mux
}

func flusher(w http.ResponseWriter) func() error {
	rc := http.NewResponseController(w)
	return rc.Flush
}

// vmRSS is this process's resident set size in bytes (the gateway runs in
// it).
func vmRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	testenv.Need(t, "procfs", err == nil, "no /proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestHostileOversizedReply (issue 12, item 10): an upstream answering a
// call with 256 MiB, on stdio, legacy SSE and streamable HTTP, is cut off
// at MCP_SERVER_MAX_MESSAGE_BYTES: the caller gets an error naming the
// variable, the gateway's memory stays bounded (the whole reply would be
// 256 MiB; the three together would be 768), and the server answers again
// afterwards.
func TestHostileOversizedReply(t *testing.T) {
	const limit = 64 << 10
	sse := httptest.NewServer(hostileSSE(t))
	t.Cleanup(sse.Close)
	st := httptest.NewServer(hostileStreamable())
	t.Cleanup(st.Close)
	servers := [][2]any{
		{"stdio", map[string]any{"command": os.Args[0], "env": map[string]string{envHostileChild: "stdio"}, "toolPrefix": "stdio_"}},
		{"sse", map[string]any{"url": sse.URL + "/sse", "transport": "sse", "toolPrefix": "sse_"}},
		{"http", map[string]any{"url": st.URL, "transport": "streamable-http", "toolPrefix": "http_"}},
	}
	g := startGateway(t, servers, map[string]string{"MCP_SERVER_MAX_MESSAGE_BYTES": itoa(limit)})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	for _, s := range servers {
		if got := c.toolText(s[0].(string)+"_small", map[string]any{}); got != "ok" {
			t.Fatalf("%s small = %q", s[0], got)
		}
	}
	before := vmRSS(t)
	var wg sync.WaitGroup
	reps := make([]*rpcReply, len(servers))
	for i, s := range servers {
		wg.Go(func() {
			c := newRaw(t, g.url+"/mcp") // no session: one request, one answer
			reps[i] = c.call("tools/call", map[string]any{"name": s[0].(string) + "_flood", "arguments": map[string]any{}})
		})
	}
	wg.Wait()
	after := vmRSS(t)
	for i, s := range servers {
		rep := reps[i]
		if rep.msg.Error == nil || !strings.Contains(rep.msg.Error.Message, "MCP_SERVER_MAX_MESSAGE_BYTES") || !strings.Contains(rep.msg.Error.Message, itoa(limit)) {
			t.Errorf("%s: oversized reply answered %d %.300s; want an error naming MCP_SERVER_MAX_MESSAGE_BYTES and its value", s[0], rep.Status, rep.Body)
		}
	}
	if grew := after - before; grew > 128<<20 {
		t.Errorf("gateway RSS grew by %d MiB over three 256 MiB replies cut at %d KiB", grew>>20, limit>>10)
	}
	for _, s := range servers {
		name := s[0].(string)
		// An SSE upstream reconnects in the background; the others
		// reconnect on this call.
		eventually(t, 30*time.Second, func() (bool, string) {
			rep := c.call("tools/call", map[string]any{"name": name + "_small", "arguments": map[string]any{}})
			return rep.msg.Error == nil, fmt.Sprintf("%s after the cut: %.300s", name, rep.Body)
		})
	}
}

// TestHostileEndlessLine (issue 12, item 15): a stdio server that starts
// its reply and then writes no newline (2 MiB, then nothing) does not
// hold the call past its own timeout, and status says the stream is
// broken well before the message limit would have been reached.
func TestHostileEndlessLine(t *testing.T) {
	g := startGateway(t, [][2]any{
		{"endless", map[string]any{"command": os.Args[0], "env": map[string]string{envHostileChild: "stdio"}, "callTimeout": "300ms"}},
	}, nil)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	rep := c.call("tools/call", map[string]any{"name": "stall", "arguments": map[string]any{}})
	if rep.msg.Error == nil || !strings.Contains(rep.msg.Error.Message, "300ms") {
		t.Fatalf("call into an endless line: %d %.300s; want the call's own timeout (300ms)", rep.Status, rep.Body)
	}
	eventually(t, 30*time.Second, func() (bool, string) {
		_, raw := fetchStatus(t, g.url)
		return bytes.Contains(raw, []byte("stream broken")) && bytes.Contains(raw, []byte("without a newline")), "status: " + string(raw)
	})
}

// TestHostileSessionHog (issue 12, item 14): one project's token cannot
// take every session of the gateway: past MCP_SERVER_MAX_SESSIONS_PER_PROJECT
// its initialize gets 503 naming the limit, while another project still
// opens sessions. The limit is on by default.
func TestHostileSessionHog(t *testing.T) {
	if cfg, err := config.Load(func(string) string { return "" }); err != nil || cfg.MaxProjectSessions <= 0 || cfg.MaxProjectSessions >= cfg.MaxSessions {
		t.Errorf("default per-project session limit %d of %d in all (%v): one project could take them all", cfg.MaxProjectSessions, cfg.MaxSessions, err)
	}
	const admin = "hog-admin-token-8d1f4c2a9e"
	g := startGateway(t, nil, map[string]string{"MCP_SERVER_ADMIN_TOKEN": admin,
		"MCP_SERVER_MAX_SESSIONS": "4", "MCP_SERVER_MAX_SESSIONS_PER_PROJECT": "2"})
	tokens := map[string]string{}
	for _, p := range []string{"hog", "other"} {
		apiMust(t, g.url, admin, "POST", "/api/v1/projects", `{"id":"`+p+`"}`, 201, nil)
		var tok struct {
			Token string `json:"token"`
		}
		apiMust(t, g.url, admin, "POST", "/api/v1/projects/"+p+"/tokens", `{"name":"agent"}`, 201, &tok)
		tokens[p] = tok.Token
	}
	open := func(p string) *rpcReply {
		c := newRaw(t, g.url+"/projects/"+p+"/mcp")
		c.header.Set("Authorization", "Bearer "+tokens[p])
		return c.call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "hog", "version": "1"}})
	}
	for i := range 2 {
		if rep := open("hog"); rep.Status != http.StatusOK {
			t.Fatalf("hog session %d: %d %s", i+1, rep.Status, rep.Body)
		}
	}
	if rep := open("hog"); rep.Status != http.StatusServiceUnavailable || !strings.Contains(string(rep.Body), "MCP_SERVER_MAX_SESSIONS_PER_PROJECT") {
		t.Errorf("third hog session: %d %s; want 503 naming MCP_SERVER_MAX_SESSIONS_PER_PROJECT", rep.Status, rep.Body)
	}
	if rep := open("other"); rep.Status != http.StatusOK {
		t.Errorf("another project's session while the hog is at its limit: %d %s", rep.Status, rep.Body)
	}
}

// TestHostileBlankLines (issue 20, item 21): an upstream answering a call
// with newlines only, forever (blank lines on stdio, empty events on
// legacy SSE, a body of nothing on streamable HTTP), is cut at
// MCP_SERVER_MAX_MESSAGE_BYTES like any oversized message, long before
// the call's own timeout, and the server answers again afterwards (on
// stdio the next call no longer waits behind the endless one).
func TestHostileBlankLines(t *testing.T) {
	const limit = 64 << 10
	sse := httptest.NewServer(hostileSSE(t))
	t.Cleanup(sse.Close)
	st := httptest.NewServer(hostileStreamable())
	t.Cleanup(st.Close)
	servers := [][2]any{
		{"stdio", map[string]any{"command": os.Args[0], "env": map[string]string{envHostileChild: "stdio"}, "toolPrefix": "stdio_", "callTimeout": "60s"}},
		{"sse", map[string]any{"url": sse.URL + "/sse", "transport": "sse", "toolPrefix": "sse_", "callTimeout": "60s"}},
		{"http", map[string]any{"url": st.URL, "transport": "streamable-http", "toolPrefix": "http_", "callTimeout": "60s"}},
	}
	g := startGateway(t, servers, map[string]string{"MCP_SERVER_MAX_MESSAGE_BYTES": itoa(limit)})
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	for _, s := range servers {
		name := s[0].(string)
		if got := c.toolText(name+"_small", map[string]any{}); got != "ok" {
			t.Fatalf("%s small = %q", name, got)
		}
		rep := c.call("tools/call", map[string]any{"name": name + "_blanks", "arguments": map[string]any{}})
		if rep.msg.Error == nil || !strings.Contains(rep.msg.Error.Message, "MCP_SERVER_MAX_MESSAGE_BYTES") || !strings.Contains(rep.msg.Error.Message, itoa(limit)) {
			t.Errorf("%s: endless blank lines answered %d %.300s; want an error naming MCP_SERVER_MAX_MESSAGE_BYTES and its value", name, rep.Status, rep.Body)
		}
		eventually(t, 30*time.Second, func() (bool, string) {
			rep := c.call("tools/call", map[string]any{"name": name + "_small", "arguments": map[string]any{}})
			return rep.msg.Error == nil, fmt.Sprintf("%s after the cut: %.300s", name, rep.Body)
		})
	}
}

// TestHostileNULToolName (issue 20, item 18): a remote upstream's tool
// whose name holds a NUL is called like any other, the call is recorded
// (under the name spelled as a Go string literal, which any store keeps)
// and /metrics carries that spelling, never a raw NUL.
func TestHostileNULToolName(t *testing.T) {
	st := httptest.NewServer(hostileStreamable())
	t.Cleanup(st.Close)
	g := startGateway(t, [][2]any{{"http", map[string]any{"url": st.URL, "transport": "streamable-http"}}}, nil)
	c := newRaw(t, g.url+"/mcp")
	c.initialize()
	if got := c.toolText("nul\x00name", map[string]any{}); got != "ok" {
		t.Fatalf("nul tool = %q", got)
	}
	resp, err := http.Get(g.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.IndexByte(body, 0) >= 0 {
		t.Error("/metrics carries a raw NUL")
	}
	if want := `server="http",tool="\"nul\\x00name\""} 1`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks the call under %s", want)
	}
	g.stop(t)
	store, err := sqlite.Open(context.Background(), g.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	page, err := store.ListToolCalls(context.Background(), switchboard.ToolCallFilter{ProjectID: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Calls) != 1 || page.Calls[0].Tool != `"nul\x00name"` || page.Calls[0].Outcome != switchboard.OutcomeOK {
		t.Errorf("call log %+v, want the answered call under the tool `\"nul\\x00name\"`", page.Calls)
	}
}
