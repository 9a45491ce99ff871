package upstreams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	mcpgoserver "github.com/mark3labs/mcp-go/server"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
)

// mcpGoHandler is a third-party-style upstream: an mcp-go v1.2.1
// streamable server with an echo tool and a meta tool (returning the
// call's _meta as text). legacy pins it to the 2025 revisions, as a
// gateway that needs sessions does; otherwise it also speaks 2026-07-28.
func mcpGoHandler(legacy bool) http.Handler {
	s := mcpgoserver.NewMCPServer("mcpgo", "1", mcpgoserver.WithToolCapabilities(true))
	s.AddTool(mcpgo.NewTool("echo", mcpgo.WithString("text", mcpgo.Required())), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		return mcpgo.NewToolResultText(req.GetString("text", "")), nil
	})
	s.AddTool(mcpgo.NewTool("meta"), func(_ context.Context, req mcpgo.CallToolRequest) (*mcpgo.CallToolResult, error) {
		b := []byte("{}")
		if req.Params.Meta != nil {
			var err error
			if b, err = json.Marshal(req.Params.Meta); err != nil {
				return nil, err
			}
		}
		return mcpgo.NewToolResultText(string(b)), nil
	})
	opts := []mcpgoserver.StreamableHTTPOption{mcpgoserver.WithStateful(true)}
	if legacy {
		opts = append(opts, mcpgoserver.WithStreamableHTTPProtocolVersions(mcpgo.ProtocolVersion20251125, mcpgo.ProtocolVersion20250618, mcpgo.ProtocolVersion20250326))
	}
	return mcpgoserver.NewStreamableHTTPServer(s, opts...)
}

// methodLog records the JSON-RPC methods POSTed to h, and the
// MCP-Protocol-Version and Mcp-Session-Id headers they came with;
// refuse, when set, answers server/discover with that HTTP status and a
// plain-text body instead (a 2025 server with strict routing).
type methodLog struct {
	h      http.Handler
	refuse int
	// gate, when set, holds subscriptions/listen requests until it is
	// closed, announcing each on held.
	gate atomic.Pointer[chan struct{}]
	held chan struct{}

	mu    sync.Mutex
	posts []post
}

type post struct {
	method, version, session string
}

func (l *methodLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		l.mu.Lock()
		l.posts = append(l.posts, post{m.Method, r.Header.Get("MCP-Protocol-Version"), r.Header.Get("Mcp-Session-Id")})
		l.mu.Unlock()
		if g := l.gate.Load(); g != nil && m.Method == "subscriptions/listen" {
			l.held <- struct{}{}
			<-*g
		}
		if m.Method == "server/discover" && l.refuse != 0 {
			http.Error(w, "no such method", l.refuse)
			return
		}
	}
	l.h.ServeHTTP(w, r)
}

func (l *methodLog) methods() []post {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]post(nil), l.posts...)
}

// TestUpstreamRevision: each streamable HTTP upstream is spoken to in
// 2026-07-28 when it says so in server/discover, and in 2025 after any
// refusal, at once, on the same connect; calls, errors and _meta work in
// both, and a result reads the same whichever revision the upstream
// speaks.
func TestUpstreamRevision(t *testing.T) {
	const legacy = ProtocolVersion
	for _, tc := range []struct {
		name   string
		h      http.Handler
		refuse int
		want   string
		sdk    bool // the mcptest fixture (rpc_error, progress)
	}{
		{name: "go-sdk stateless", h: mcptest.StatelessHandler(mcptest.Options{Name: "up"}), want: Revision20260728, sdk: true},
		{name: "go-sdk stateful", h: mcptest.StreamableHandler(mcptest.Options{Name: "up"}), want: legacy, sdk: true},
		{name: "mcp-go", h: mcpGoHandler(false), want: Revision20260728},
		{name: "mcp-go pinned to 2025", h: mcpGoHandler(true), want: legacy},
		{name: "discover answered 404", h: mcptest.StreamableHandler(mcptest.Options{Name: "up"}), refuse: http.StatusNotFound, want: legacy, sdk: true},
		{name: "discover answered 405", h: mcptest.StreamableHandler(mcptest.Options{Name: "up"}), refuse: http.StatusMethodNotAllowed, want: legacy, sdk: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &methodLog{h: tc.h, refuse: tc.refuse}
			ts := httptest.NewServer(log)
			t.Cleanup(ts.Close)
			h := newHarness(t, testOptions())
			h.apply(switchboard.ServerSpec{Name: "up", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL})

			if got := h.text("echo", `{"text":"héllo"}`); got != "héllo" {
				t.Fatalf("echo = %q", got)
			}
			st := h.status("up")
			if st.Protocol != tc.want {
				t.Errorf("status protocol = %q, want %q", st.Protocol, tc.want)
			}
			// One connect: discover first, then (2025) initialize right
			// after the refusal, on the same connect; a 2026 connection
			// never initializes and never sends a session id.
			posts := log.methods()
			if len(posts) == 0 || posts[0].method != "server/discover" || posts[0].version != Revision20260728 {
				t.Fatalf("first request %+v, want server/discover with MCP-Protocol-Version 2026-07-28", posts)
			}
			for _, p := range posts[1:] {
				switch {
				case tc.want == Revision20260728 && (p.method == "initialize" || p.session != "" || p.version != Revision20260728):
					t.Errorf("2026 connection sent %+v", p)
				case tc.want != Revision20260728 && p.method == "server/discover":
					t.Errorf("discover sent again: %+v", posts)
				}
			}
			if tc.want != Revision20260728 && (len(posts) < 2 || posts[1].method != "initialize") {
				t.Errorf("requests %+v, want initialize right after the refused discover", posts)
			}
			if n := countState(h.statesOf("up"), switchboard.StateConnecting); n != 1 {
				t.Errorf("connected %d times, want 1", n)
			}

			// _meta: the client's protocol keys never reach the upstream;
			// ours do on a 2026 hop; user keys and the progress token pass.
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			res, err := h.m.Call(ctx, switchboard.CallRequest{Tool: "meta", Arguments: json.RawMessage(`{}`),
				Meta:       json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"the-client","version":"9"},"user/key":"kept","progressToken":"tok"}`),
				OnProgress: func(json.RawMessage) {}})
			if err != nil {
				t.Fatal(err)
			}
			var seen map[string]json.RawMessage
			if err := json.Unmarshal([]byte(resultText(t, res)), &seen); err != nil {
				t.Fatalf("meta: %v", err)
			}
			if string(seen["user/key"]) != `"kept"` || seen["progressToken"] == nil {
				t.Errorf("upstream saw _meta %s: user key or progress token missing", resultText(t, res))
			}
			if strings.Contains(resultText(t, res), "the-client") {
				t.Errorf("the client's protocol _meta reached the upstream: %s", resultText(t, res))
			}
			version := string(seen["io.modelcontextprotocol/protocolVersion"])
			switch {
			case tc.want == Revision20260728 && (version != `"2026-07-28"` || !strings.Contains(string(seen["io.modelcontextprotocol/clientInfo"]), `"switchboard"`)):
				t.Errorf("2026 upstream saw _meta %s, want the gateway's own protocol keys", resultText(t, res))
			case tc.want != Revision20260728 && strings.Contains(resultText(t, res), protocolMetaPrefix):
				t.Errorf("2025 upstream saw protocol _meta: %s", resultText(t, res))
			}
			if bytes.Contains(res, []byte("resultType")) || bytes.Contains(res, []byte(protocolMetaPrefix+"serverInfo")) {
				t.Errorf("result kept the upstream's hop bytes: %s", res)
			}

			if !tc.sdk {
				return
			}
			_, err = h.call("rpc_error", "{}")
			var rpc *switchboard.RPCError
			if !errors.As(err, &rpc) || rpc.Code != switchboard.CodeInvalidParams || string(rpc.Data) != `{"field":"x"}` {
				t.Errorf("rpc_error: err = %v, want RPCError -32602 with data", err)
			}
			res, err = h.call("exotic", `{"id":"a"}`)
			if err != nil {
				t.Fatal(err)
			}
			if countBig(res) != 2 {
				t.Errorf("exotic lost the big integers: %s", res)
			}
		})
	}
}

// TestStatelessListChanged: a 2026-07-28 upstream's tool list changes
// come over subscriptions/listen (opened before the first tools/list, so
// no change is missed) and are re-listed; progress comes on the call's
// stream with the client's token.
func TestStatelessListChanged(t *testing.T) {
	log := &methodLog{h: mcptest.StatelessHandler(mcptest.Options{Name: "up"})}
	ts := httptest.NewServer(log)
	t.Cleanup(ts.Close)
	h := newHarness(t, testOptions())
	h.apply(switchboard.ServerSpec{Name: "up", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL})
	h.tools()
	if p := h.status("up").Protocol; p != Revision20260728 {
		t.Fatalf("protocol = %q, want %s", p, Revision20260728)
	}
	var methods []string
	for _, p := range log.methods() {
		methods = append(methods, p.method)
	}
	if want := "server/discover,subscriptions/listen,tools/list"; strings.Join(methods, ",") != want {
		t.Errorf("connect sent %v, want %s", methods, want)
	}

	h.text("add_tool", `{"name":"newtool"}`)
	h.waitFor("newtool in the catalog", func() bool {
		_, ok := h.m.Catalog().Lookup("newtool")
		return ok
	})
	if got := h.text("newtool", `{"text":"new"}`); got != "new" {
		t.Errorf("newtool = %q", got)
	}

	tokens := h.progressTokens(2)
	if strings.Join(tokens, ",") != `"tok-1","tok-1"` {
		t.Errorf("progress tokens %v, want the client's twice", tokens)
	}
}

// stdio2026Only is a stdio server that speaks only 2026-07-28: it refuses
// initialize with -32601, answers server/discover, and answers tools/call
// with the request line itself as text (so the test sees the _meta sent).
// A request without the 2026 protocol _meta gets -32600.
const stdio2026Only = `
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
  [ -z "$id" ] && continue
  case "$line" in
  *'"method":"initialize"'*)
    echo '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"initialize was removed in 2026-07-28"}}' ;;
  *'"io.modelcontextprotocol/protocolVersion":"2026-07-28"'*)
    case "$line" in
    *'"method":"server/discover"'*)
      echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete"}}' ;;
    *'"method":"tools/list"'*)
      echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"echo_line","inputSchema":{"type":"object"}}],"resultType":"complete"}}' ;;
    *'"method":"tools/call"'*)
      esc=$(printf '%s' "$line" | sed 's/\\/\\\\/g; s/"/\\"/g')
      echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"content":[{"type":"text","text":"'"$esc"'"}],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sh"}}}}' ;;
    *)
      echo '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32601,"message":"method not found"}}' ;;
    esac ;;
  *)
    echo '{"jsonrpc":"2.0","id":'"$id"',"error":{"code":-32600,"message":"missing io.modelcontextprotocol/protocolVersion"}}' ;;
  esac
done
`

// TestStdio2026Only: a stdio server that refused initialize is asked
// server/discover and then spoken to in 2026-07-28, with the gateway's
// protocol _meta on every request and its result in the 2025 shape.
func TestStdio2026Only(t *testing.T) {
	h := newHarness(t, testOptions())
	h.apply(shellScript(t, "only26", stdio2026Only, nil))
	if got := h.status("only26"); got.State != switchboard.StateIdle {
		t.Fatalf("state %q before use", got.State)
	}
	res, err := h.call("echo_line", `{"a":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if p := h.status("only26").Protocol; p != Revision20260728 {
		t.Errorf("protocol = %q, want %s", p, Revision20260728)
	}
	if bytes.Contains(res, []byte("resultType")) || bytes.Contains(res, []byte("serverInfo")) {
		t.Errorf("result kept the upstream's hop bytes: %s", res)
	}
	var sent struct {
		Params struct {
			Name      string                     `json:"name"`
			Arguments json.RawMessage            `json:"arguments"`
			Meta      map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(resultText(t, res)), &sent); err != nil {
		t.Fatalf("the server's echo of the request: %v", err)
	}
	if sent.Params.Name != "echo_line" || string(sent.Params.Arguments) != `{"a":1}` ||
		string(sent.Params.Meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` ||
		string(sent.Params.Meta["io.modelcontextprotocol/clientCapabilities"]) != `{}` {
		t.Errorf("tools/call sent %s", resultText(t, res))
	}
}

// TestStdioNeverProbed: stdio upstreams are initialized first, so a 2025
// server that cannot bear an unknown request before initialize (this one
// exits on server/discover, others never answer it) connects at once.
func TestStdioNeverProbed(t *testing.T) {
	const strict = `
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
  case "$line" in
  *'"method":"server/discover"'*) echo "unexpected server/discover" >&2; exit 1 ;;
  *'"method":"initialize"'*)
    echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"strict","version":"1"}}}' ;;
  *'"method":"tools/list"'*)
    echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"tools":[{"name":"hello","inputSchema":{"type":"object"}}]}}' ;;
  *'"method":"tools/call"'*)
    echo '{"jsonrpc":"2.0","id":'"$id"',"result":{"content":[{"type":"text","text":"hi"}]}}' ;;
  esac
done
`
	h := newHarness(t, testOptions())
	h.apply(shellScript(t, "strict", strict, nil))
	if got := h.text("hello", `{}`); got != "hi" {
		t.Fatalf("hello = %q", got)
	}
	if st := h.status("strict"); st.Protocol != "2025-06-18" || st.State != switchboard.StateReady {
		t.Errorf("status %+v, want ready on 2025-06-18", st)
	}
}

// swapHandler serves through whichever handler it holds now.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}

// TestStatelessListenReopened: when a 2026 upstream's listen stream is
// cut, the gateway opens it again and re-lists, so a change made while it
// was down is still picked up: here the server was replaced by one with
// another tool, which never sends a list change (nothing changed in its
// own life).
func TestStatelessListenReopened(t *testing.T) {
	sw := &swapHandler{}
	sw.set(mcptest.StatelessHandler(mcptest.Options{Name: "up"}))
	log := &methodLog{h: sw, held: make(chan struct{}, 1)}
	ts := httptest.NewServer(log)
	t.Cleanup(ts.Close)
	h := newHarness(t, testOptions())
	h.apply(switchboard.ServerSpec{Name: "up", Transport: switchboard.TransportStreamableHTTP, URL: ts.URL})
	h.tools()

	gate := make(chan struct{})
	log.gate.Store(&gate)
	ts.CloseClientConnections() // cuts the listen stream
	select {
	case <-log.held: // the gateway is re-opening it
	case <-time.After(waitTimeout):
		t.Fatal("subscriptions/listen was not re-opened")
	}
	sw.set(mcptest.StatelessHandler(mcptest.Options{Name: "up", ExtraTools: 1})) // the "restarted" server
	log.gate.Store(nil)
	close(gate)
	h.waitFor("the new server's extra tool", func() bool {
		_, ok := h.m.Catalog().Lookup("up_t0000")
		return ok
	})
	if st := h.status("up"); st.State != switchboard.StateReady {
		t.Errorf("state %q after the listen stream was cut, want ready", st.State)
	}
}
