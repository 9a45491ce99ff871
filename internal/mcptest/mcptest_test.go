package mcptest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMain lets the test binary act as the stdio fixture child process.
func TestMain(m *testing.M) {
	RunIfChild()
	m.Run()
}

// waitTimeout bounds every wait for an asynchronous event; it is a failure
// deadline, never a way to let state settle.
const waitTimeout = 30 * time.Second

// builtinTools are the tools every fixture server has.
var builtinTools = []string{
	"add_tool", "cancelled_count", "crash", "echo", "env", "exotic", "meta", "pid",
	"progress", "remove_tool", "rpc_error", "slow", "tool_error",
}

// fixtureClient is a connected go-sdk client session plus the events its
// handlers observed.
type fixtureClient struct {
	cs *mcp.ClientSession
	// pid is the process id the fixture's pid tool must report.
	pid int
	// stdio reports whether the fixture runs in a child process.
	stdio bool
	// listChanged receives one value per notifications/tools/list_changed.
	listChanged chan struct{}
	// ready is closed once list_changed notifications can be delivered to
	// this client (standalone SSE stream up, or subscription acknowledged).
	ready     chan struct{}
	readyOnce sync.Once

	mu       sync.Mutex
	progress map[string]chan *mcp.ProgressNotificationParams
}

func (fc *fixtureClient) markReady() { fc.readyOnce.Do(func() { close(fc.ready) }) }

// watch returns a channel receiving the progress notifications for token.
func (fc *fixtureClient) watch(token string) <-chan *mcp.ProgressNotificationParams {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	ch := make(chan *mcp.ProgressNotificationParams, 64)
	fc.progress[token] = ch
	return ch
}

func newFixtureClient() (*mcp.Client, *fixtureClient) {
	fc := &fixtureClient{
		listChanged: make(chan struct{}, 64),
		ready:       make(chan struct{}),
		progress:    map[string]chan *mcp.ProgressNotificationParams{},
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcptest-client", Version: "0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, _ := req.Params.ProgressToken.(string)
			fc.mu.Lock()
			ch := fc.progress[tok]
			fc.mu.Unlock()
			if ch != nil {
				ch <- req.Params
			}
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			fc.listChanged <- struct{}{}
		},
	})
	// On the 2026-07-28 protocol, list_changed notifications reach the client
	// only once its subscriptions/listen request has been acknowledged.
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				fc.markReady()
			}
			return next(ctx, method, req)
		}
	})
	return c, fc
}

// getObserver is an http.RoundTripper that reports when the streamable
// client's standalone SSE stream (a GET) has been accepted by the server.
type getObserver struct {
	base http.RoundTripper
	ok   func()
}

func (o getObserver) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.base.RoundTrip(req)
	// The server registers the stream before it sends the response headers,
	// so from now on notifications are delivered on it.
	if err == nil && req.Method == http.MethodGet && resp.StatusCode == http.StatusOK {
		o.ok()
	}
	return resp, err
}

type transportCase struct {
	name    string
	connect func(t *testing.T, opts Options) *fixtureClient
}

func stdioCase(name, protocolVersion string) transportCase {
	return transportCase{name: name, connect: func(t *testing.T, opts Options) *fixtureClient {
		c, fc := newFixtureClient()
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), ChildEnv(opts)...)
		cmd.Env = append(cmd.Env, "MCPTEST_MARKER="+name)
		cmd.Stderr = os.Stderr
		cs, err := c.Connect(waitCtx(t), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() {
			if err := cs.Close(); err != nil {
				t.Errorf("closing stdio session: %v", err)
			}
		})
		t.Logf("negotiated protocol %s", cs.InitializeResult().ProtocolVersion)
		if cs.InitializeResult().ProtocolVersion < "2026-07-28" {
			fc.markReady() // legacy sessions get list_changed unconditionally
		}
		fc.cs, fc.pid, fc.stdio = cs, cmd.Process.Pid, true
		return fc
	}}
}

var transports = []transportCase{
	stdioCase("stdio", ""),
	stdioCase("stdio-2025-11-25", "2025-11-25"),
	{name: "sse", connect: func(t *testing.T, opts Options) *fixtureClient {
		srv := httptest.NewServer(SSEHandler(opts))
		t.Cleanup(srv.Close)
		c, fc := newFixtureClient()
		cs, err := c.Connect(waitCtx(t), &mcp.SSEClientTransport{Endpoint: srv.URL}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		fc.markReady() // the event stream is up before Connect returns
		fc.cs, fc.pid = cs, os.Getpid()
		return fc
	}},
	{name: "streamable", connect: func(t *testing.T, opts Options) *fixtureClient {
		srv := httptest.NewServer(StreamableHandler(opts))
		t.Cleanup(srv.Close)
		c, fc := newFixtureClient()
		hc := &http.Client{Transport: getObserver{base: http.DefaultTransport, ok: fc.markReady}}
		cs, err := c.Connect(waitCtx(t), &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		fc.cs, fc.pid = cs, os.Getpid()
		return fc
	}},
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

// text returns the text of a result that must consist of one text content.
func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("got %d content items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("got content %T, want *mcp.TextContent", res.Content[0])
	}
	return tc.Text
}

func okText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected tool error: %q", text(t, res))
	}
	return text(t, res)
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(waitCtx(t), nil) {
		if err != nil {
			t.Fatalf("listing tools: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func TestTransports(t *testing.T) {
	opts := Options{Name: "fx", ExtraTools: 3}
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			fc := tc.connect(t, opts)
			cs := fc.cs

			t.Run("initialize", func(t *testing.T) {
				info := cs.InitializeResult().ServerInfo
				if info == nil || info.Name != "fx" || info.Version != ServerVersion {
					t.Errorf("server info = %+v, want fx %s", info, ServerVersion)
				}
			})

			t.Run("tools", func(t *testing.T) {
				want := append(slices.Clone(builtinTools), "fx_t0000", "fx_t0001", "fx_t0002")
				slices.Sort(want)
				if got := toolNames(t, cs); !slices.Equal(got, want) {
					t.Errorf("tools = %v, want %v", got, want)
				}
			})

			t.Run("echo", func(t *testing.T) {
				const in = "héllo <&> \"quoted\"\nline2"
				if got := okText(t, call(t, cs, "echo", map[string]any{"text": in})); got != in {
					t.Errorf("echo = %q, want %q", got, in)
				}
				// A missing argument is a JSON-RPC invalid-params error.
				_, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("echo without text: err = %v, want JSON-RPC -32602", err)
				}
			})

			t.Run("extra_tool", func(t *testing.T) {
				if got := okText(t, call(t, cs, "fx_t0001", map[string]any{"a": 1})); got != `{"a":1}` {
					t.Errorf("fx_t0001 = %q", got)
				}
			})

			t.Run("rpc_error", func(t *testing.T) {
				res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "rpc_error"})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) {
					t.Fatalf("rpc_error: res = %+v, err = %v; want *jsonrpc.Error", res, err)
				}
				if rpcErr.Code != -32602 || rpcErr.Message != "bad argument x" {
					t.Errorf("error = %d %q, want -32602 %q", rpcErr.Code, rpcErr.Message, "bad argument x")
				}
				var data map[string]any
				if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data) != 1 || data["field"] != "x" {
					t.Errorf("error data = %s (%v), want {\"field\":\"x\"}", rpcErr.Data, err)
				}
			})

			t.Run("tool_error", func(t *testing.T) {
				res := call(t, cs, "tool_error", nil)
				if !res.IsError || text(t, res) != "it failed" {
					t.Errorf("tool_error = isError %v %q", res.IsError, text(t, res))
				}
			})

			t.Run("progress", func(t *testing.T) {
				token := "progress-" + tc.name
				ch := fc.watch(token)
				params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3}}
				params.SetProgressToken(token)
				res, err := cs.CallTool(waitCtx(t), params)
				if err != nil {
					t.Fatal(err)
				}
				if got := okText(t, res); got != "done" {
					t.Errorf("progress = %q, want done", got)
				}
				for i := 1; i <= 3; i++ {
					p := receive(t, ch, fmt.Sprintf("progress notification %d", i))
					if p.Progress != float64(i) || p.Total != 3 {
						t.Errorf("notification %d: progress %v total %v", i, p.Progress, p.Total)
					}
				}
				// Without a progress token, nothing is sent.
				if got := okText(t, call(t, cs, "progress", map[string]any{"steps": 2})); got != "done" {
					t.Errorf("progress = %q, want done", got)
				}
			})

			t.Run("exotic", func(t *testing.T) {
				var tool *mcp.Tool
				for tl, err := range cs.Tools(waitCtx(t), nil) {
					if err != nil {
						t.Fatal(err)
					}
					if tl.Name == "exotic" {
						tool = tl
					}
				}
				if tool == nil {
					t.Fatal("exotic not listed")
				}
				if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Annotations.Title != "Exotic" {
					t.Errorf("annotations = %+v", tool.Annotations)
				}
				if tool.OutputSchema == nil || tool.Meta["big"] == nil {
					t.Errorf("outputSchema %v, _meta %v", tool.OutputSchema, tool.Meta)
				}
				res := call(t, cs, "exotic", map[string]any{"id": "abc"})
				if res.IsError {
					t.Fatal("exotic returned a tool error")
				}
				var kinds []string
				for _, c := range res.Content {
					kinds = append(kinds, fmt.Sprintf("%T", c))
				}
				want := []string{"*mcp.TextContent", "*mcp.ImageContent", "*mcp.AudioContent", "*mcp.ResourceLink", "*mcp.EmbeddedResource"}
				if !slices.Equal(kinds, want) {
					t.Fatalf("content kinds = %v, want %v", kinds, want)
				}
				if a := res.Content[0].(*mcp.TextContent).Annotations; a == nil || a.Priority != 0.5 {
					t.Errorf("text annotations = %+v", a)
				}
				if d := res.Content[1].(*mcp.ImageContent).Data; !bytes.Equal(d, tinyPNG) {
					t.Errorf("image data = %x", d)
				}
				if d := res.Content[2].(*mcp.AudioContent).Data; !bytes.Equal(d, tinyWAV) {
					t.Errorf("audio data = %x", d)
				}
				if r := res.Content[4].(*mcp.EmbeddedResource).Resource; r == nil || r.Text != "embedded text resource" {
					t.Errorf("embedded resource = %+v", r)
				}
				if res.StructuredContent == nil || res.Meta["big"] == nil {
					t.Errorf("structuredContent %v, _meta %v", res.StructuredContent, res.Meta)
				}
			})

			t.Run("slow", func(t *testing.T) {
				if got := okText(t, call(t, cs, "slow", map[string]any{"ms": 1})); got != "slept 1ms" {
					t.Errorf("slow = %q", got)
				}
				before, err := strconv.Atoi(okText(t, call(t, cs, "cancelled_count", nil)))
				if err != nil {
					t.Fatal(err)
				}
				token := "slow-" + tc.name
				started := fc.watch(token)
				ctx, cancel := context.WithCancel(waitCtx(t))
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					params := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 10 * 60 * 1000}}
					params.SetProgressToken(token)
					_, err := cs.CallTool(ctx, params)
					errc <- err
				}()
				if p := receive(t, started, "slow started"); p.Message != "started" {
					t.Errorf("slow progress message = %q", p.Message)
				}
				cancel()
				if err := receive(t, errc, "cancelled slow call"); !errors.Is(err, context.Canceled) {
					t.Errorf("cancelled slow call: err = %v", err)
				}
				res := call(t, cs, "cancelled_count", map[string]any{"atLeast": before + 1})
				after, err := strconv.Atoi(okText(t, res))
				if err != nil || after < before+1 {
					t.Errorf("cancelled_count = %d (%v), want >= %d", after, err, before+1)
				}
			})

			t.Run("crash_on_http", func(t *testing.T) {
				if fc.stdio {
					t.Skip("crash on stdio is covered by TestStdioRawWire")
				}
				res := call(t, cs, "crash", nil)
				if !res.IsError || text(t, res) != "crash only on stdio" {
					t.Errorf("crash = isError %v %q", res.IsError, text(t, res))
				}
			})

			t.Run("pid", func(t *testing.T) {
				if got := okText(t, call(t, cs, "pid", nil)); got != strconv.Itoa(fc.pid) {
					t.Errorf("pid = %s, want %d", got, fc.pid)
				}
			})

			t.Run("env", func(t *testing.T) {
				lines := strings.Split(okText(t, call(t, cs, "env", nil)), "\n")
				if !slices.IsSorted(lines) {
					t.Error("env is not sorted")
				}
				if fc.stdio {
					for _, want := range []string{"MCPTEST_MARKER=" + tc.name, "SWITCHBOARD_FIXTURE=stdio", "SWITCHBOARD_FIXTURE_NAME=fx"} {
						if !slices.Contains(lines, want) {
							t.Errorf("env lacks %s", want)
						}
					}
				} else {
					want := os.Environ()
					slices.Sort(want)
					if !slices.Equal(lines, want) {
						t.Errorf("env differs from this process's environment")
					}
				}
			})

			t.Run("meta", func(t *testing.T) {
				// The client may add _meta entries of its own (protocol
				// 2026-07-28 does): look at traceparent only.
				traceparent := func(res *mcp.CallToolResult) any {
					t.Helper()
					var m map[string]any
					if err := json.Unmarshal([]byte(okText(t, res)), &m); err != nil {
						t.Fatalf("meta is not a JSON object: %v", err)
					}
					return m["traceparent"]
				}
				if got := traceparent(call(t, cs, "meta", nil)); got != nil {
					t.Errorf("traceparent without one sent = %v", got)
				}
				const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
				res, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "meta", Meta: mcp.Meta{"traceparent": tp}})
				if err != nil {
					t.Fatal(err)
				}
				if got := traceparent(res); got != tp {
					t.Errorf("traceparent = %v, want %s", got, tp)
				}
			})

			t.Run("add_remove_tool", func(t *testing.T) {
				receive(t, fc.ready, "list_changed delivery to be possible")
				if got := okText(t, call(t, cs, "add_tool", map[string]any{"name": "dyn_tool"})); got != "added" {
					t.Errorf("add_tool = %q", got)
				}
				receive(t, fc.listChanged, "list_changed after add_tool")
				if names := toolNames(t, cs); !slices.Contains(names, "dyn_tool") {
					t.Errorf("tools after add_tool = %v", names)
				}
				if got := okText(t, call(t, cs, "dyn_tool", map[string]any{"text": "dyn"})); got != "dyn" {
					t.Errorf("dyn_tool = %q", got)
				}
				if got := okText(t, call(t, cs, "remove_tool", map[string]any{"name": "dyn_tool"})); got != "removed" {
					t.Errorf("remove_tool = %q", got)
				}
				receive(t, fc.listChanged, "list_changed after remove_tool")
				if names := toolNames(t, cs); slices.Contains(names, "dyn_tool") {
					t.Errorf("tools after remove_tool = %v", names)
				}
				_, err := cs.CallTool(waitCtx(t), &mcp.CallToolParams{Name: "dyn_tool", Arguments: map[string]any{"text": "x"}})
				var rpcErr *jsonrpc.Error
				if !errors.As(err, &rpcErr) {
					t.Errorf("calling removed tool: err = %v, want JSON-RPC error", err)
				}
			})
		})
	}
}

// checkToolsListWire checks the raw JSON text of a tools/list response.
func checkToolsListWire(t *testing.T, raw []byte) {
	t.Helper()
	for _, want := range []string{
		`"inputSchema":` + string(ExoticSchema),
		`"outputSchema":` + string(ExoticOutputSchema),
		`"_meta":{"big":9007199254740993,`,
		`"readOnlyHint":true,"title":"Exotic"}`,
	} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("tools/list response lacks %s\nresponse: %s", want, raw)
		}
	}
	// The big integer survives a lossless decode at every place it was put.
	var msg struct {
		Result struct {
			Tools []struct {
				Name        string         `json:"name"`
				Meta        map[string]any `json:"_meta"`
				InputSchema struct {
					Properties struct {
						Limit struct {
							Maximum json.Number `json:"maximum"`
						} `json:"limit"`
					} `json:"properties"`
				} `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&msg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range msg.Result.Tools {
		if tool.Name != "exotic" {
			continue
		}
		found = true
		if got := tool.Meta["big"]; got != json.Number(BigInt) {
			t.Errorf("_meta.big = %v", got)
		}
		if got := tool.InputSchema.Properties.Limit.Maximum; got != BigInt {
			t.Errorf("inputSchema limit maximum = %v", got)
		}
	}
	if !found {
		t.Error("exotic not in tools/list")
	}
}

func checkExoticCallWire(t *testing.T, raw []byte) {
	t.Helper()
	for _, want := range []string{
		`"structuredContent":` + string(ExoticStructuredContent),
		`"_meta":{"big":9007199254740993}`,
		`"type":"resource_link"`,
		`"type":"image","mimeType":"image/png","data":"`,
		`"type":"audio","mimeType":"audio/wav","data":"`,
		`"type":"resource","resource":{"uri":"fixture://exotic/readme.txt"`,
	} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("exotic result lacks %s\nresponse: %s", want, raw)
		}
	}
}

const rpcErrorWire = `"error":{"code":-32602,"message":"bad argument x","data":{"field":"x"}}`

// streamableRaw is a hand-rolled streamable HTTP client, to see the bytes.
type streamableRaw struct {
	t         *testing.T
	url       string
	sessionID string
}

// post sends one JSON-RPC message and returns the JSON-RPC response to it
// (nil for a notification).
func (c *streamableRaw) post(body string) []byte {
	c.t.Helper()
	req, err := http.NewRequestWithContext(waitCtx(c.t), http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", c.sessionID)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		c.sessionID = id
	}
	if resp.StatusCode == http.StatusAccepted {
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("POST %s: %s %s", body, resp.Status, b)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			c.t.Fatal(err)
		}
		return b
	}
	br := bufio.NewReader(resp.Body)
	for {
		ev, err := readEvent(br)
		if err != nil {
			c.t.Fatalf("reading response events: %v", err)
		}
		if ev.name == "message" || ev.name == "" {
			if bytes.Contains(ev.data, []byte(`"result"`)) || bytes.Contains(ev.data, []byte(`"error"`)) {
				return ev.data
			}
		}
	}
}

type sseEvent struct {
	name string
	data []byte
}

// readEvent reads one server-sent event, skipping comments.
func readEvent(br *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	var data [][]byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return ev, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if data != nil || ev.name != "" {
				ev.data = bytes.Join(data, []byte("\n"))
				return ev, nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			ev.name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := line[len("data:"):]
			if len(d) > 0 && d[0] == ' ' {
				d = d[1:]
			}
			data = append(data, d)
		}
	}
}

const (
	rawInitialize  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	rawInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`
	rawToolsList   = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	rawCallExotic  = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"exotic","arguments":{"id":"abc"}}}`
	rawCallRPCErr  = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"rpc_error","arguments":{}}}`
	rawCallCrash   = `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash","arguments":{}}}`
)

func TestStreamableRawWire(t *testing.T) {
	srv := httptest.NewServer(StreamableHandler(Options{Name: "raw"}))
	defer srv.Close()
	c := &streamableRaw{t: t, url: srv.URL}
	if init := c.post(rawInitialize); !bytes.Contains(init, []byte(`"serverInfo":{"name":"raw"`)) {
		t.Errorf("initialize response: %s", init)
	}
	if c.sessionID == "" {
		t.Fatal("no Mcp-Session-Id: handler is not stateful")
	}
	if r := c.post(rawInitialized); r != nil {
		t.Errorf("initialized notification got a response: %s", r)
	}
	checkToolsListWire(t, c.post(rawToolsList))
	checkExoticCallWire(t, c.post(rawCallExotic))
	if r := c.post(rawCallRPCErr); !bytes.Contains(r, []byte(rpcErrorWire)) {
		t.Errorf("rpc_error response = %s, want it to contain %s", r, rpcErrorWire)
	}
}

func TestSSERawWire(t *testing.T) {
	srv := httptest.NewServer(SSEHandler(Options{Name: "raw"}))
	defer srv.Close()
	req, err := http.NewRequestWithContext(waitCtx(t), http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	ev, err := readEvent(br)
	if err != nil {
		t.Fatal(err)
	}
	if ev.name != "endpoint" {
		t.Fatalf("first event = %q %s, want endpoint", ev.name, ev.data)
	}
	endpoint, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err = endpoint.Parse(string(ev.data))
	if err != nil {
		t.Fatal(err)
	}
	send := func(body string) {
		t.Helper()
		resp, err := http.Post(endpoint.String(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %s", body, resp.Status)
		}
	}
	next := func() []byte {
		t.Helper()
		ev, err := readEvent(br)
		if err != nil {
			t.Fatal(err)
		}
		if ev.name != "message" {
			t.Fatalf("event %q, want message", ev.name)
		}
		return ev.data
	}
	send(rawInitialize)
	if init := next(); !bytes.Contains(init, []byte(`"serverInfo":{"name":"raw"`)) {
		t.Errorf("initialize response: %s", init)
	}
	send(rawInitialized)
	send(rawToolsList)
	checkToolsListWire(t, next())
	send(rawCallRPCErr)
	if r := next(); !bytes.Contains(r, []byte(rpcErrorWire)) {
		t.Errorf("rpc_error response = %s", r)
	}
}

func TestStdioRawWire(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ChildEnv(Options{Name: "raw"})...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	br := bufio.NewReader(stdout)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	next := func() []byte {
		t.Helper()
		line, err := br.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	send(rawInitialize)
	if init := next(); !bytes.Contains(init, []byte(`"serverInfo":{"name":"raw"`)) {
		t.Errorf("initialize response: %s", init)
	}
	send(rawInitialized)
	send(rawToolsList)
	checkToolsListWire(t, next())
	send(rawCallExotic)
	checkExoticCallWire(t, next())
	send(rawCallRPCErr)
	if r := next(); !bytes.Contains(r, []byte(rpcErrorWire)) {
		t.Errorf("rpc_error response = %s", r)
	}
	// crash makes the child exit with status 3, without a response.
	send(rawCallCrash)
	if line, err := br.ReadBytes('\n'); err != io.EOF {
		t.Errorf("after crash: read %q, %v; want EOF", line, err)
	}
	err = cmd.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("child exit: %v, want status 3", err)
	}
}

func TestStdioExitsOnEOF(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), ChildEnv(Options{})...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	if _, err := io.WriteString(stdin, rawInitialize+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(line, []byte(`"serverInfo":{"name":"fixture"`)) {
		t.Errorf("initialize response = %s", line)
	}
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("child after EOF: %v, want exit status 0", err)
	}
}

func TestExoticSchemaAccepted(t *testing.T) {
	// The raw schemas are compact, valid JSON objects.
	for name, raw := range map[string]json.RawMessage{
		"input": ExoticSchema, "output": ExoticOutputSchema, "structured": ExoticStructuredContent,
	} {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil || !bytes.Equal(buf.Bytes(), raw) {
			t.Errorf("%s: not compact JSON (%v)", name, err)
		}
		for _, kw := range []string{"<", ">", "&"} {
			if bytes.Contains(raw, []byte(kw)) {
				t.Errorf("%s contains %q, which encoding/json would HTML-escape", name, kw)
			}
		}
	}
	for _, kw := range []string{`"$schema"`, `"title"`, `"oneOf"`, `"$defs"`, `"$ref"`, `"pattern"`, `"additionalProperties":false`, `"description"`, BigInt} {
		if !bytes.Contains(ExoticSchema, []byte(kw)) {
			t.Errorf("ExoticSchema lacks %s", kw)
		}
	}
}
