// Package mcptest provides a real MCP server fixture, built on the official
// MCP Go SDK (github.com/modelcontextprotocol/go-sdk/mcp), for end-to-end
// tests and benchmarks of the switchboard gateway.
//
// The fixture exposes a fixed set of tools that exercise the interesting
// corners of the protocol (raw schemas with exotic keywords and big integers,
// every content type, JSON-RPC errors, tool errors, cancellation, progress
// notifications, list_changed notifications, process crashes) plus an
// optional number of trivial tools for load tests. It can be served over
// stdio ([ServeStdio], [RunIfChild]), the legacy HTTP+SSE transport
// ([SSEHandler]) and streamable HTTP, stateful ([StreamableHandler]) or
// stateless 2026-07-28 ([StatelessHandler]).
//
// Tools:
//
//   - echo {"text": string}: returns one text content holding text.
//   - exotic {...}: has the raw input schema [ExoticSchema], an output schema,
//     annotations and a tool-level _meta holding the big integer
//     9007199254740993; returns one content item of every kind, structured
//     content and a result _meta {"big": 9007199254740993}.
//   - rpc_error {}: fails with the JSON-RPC error
//     {"code": -32602, "message": "bad argument x", "data": {"field": "x"}}.
//   - tool_error {}: returns a result with isError true and text "it failed".
//   - slow {"ms": int}: waits ms milliseconds or until the request is
//     cancelled, which is counted (see cancelled_count). If the call carries a
//     progress token, one progress notification (progress 0, message
//     "started") is sent as soon as the handler runs, so that callers can
//     cancel deterministically after the handler has started.
//   - cancelled_count {"atLeast"?: int}: returns the decimal number of slow
//     calls cancelled so far in this process. With atLeast, it first waits
//     until that many have been cancelled (or until the call is cancelled).
//   - progress {"steps": int}: sends steps progress notifications (progress
//     1..steps, total steps) if the call carries a progress token, then
//     returns "done".
//   - crash {}: exits the process with status 3 when served by [ServeStdio];
//     otherwise returns a tool error "crash only on stdio".
//   - pid {}: returns the process id in decimal, as /proc names it: the
//     host's pid even in a PID namespace of its own, where os.Getpid is 1.
//   - env {}: returns the process environment, sorted, one KEY=VALUE a line.
//   - meta {}: returns the call's params._meta as JSON text ({} without one),
//     so tests can see what a proxy added (a trace context, say).
//   - add_tool {"name": string}: adds an echo-like tool of that name at
//     runtime (clients get notifications/tools/list_changed); returns "added".
//   - remove_tool {"name": string}: removes a tool; returns "removed".
//   - <Name>_tNNNN {...}: Options.ExtraTools trivial tools returning their
//     raw arguments as text.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a fixture server.
type Options struct {
	// Name is the server name reported in initialize; default "fixture".
	Name string
	// ExtraTools is the number of additional trivial tools, named
	// fmt.Sprintf("%s_t%04d", Name, i) for i in [0, ExtraTools), that return
	// their raw arguments as text (for load tests).
	ExtraTools int
}

// BigInt is the integer larger than 2^53 that the exotic tool carries in its
// input schema, output schema, tool _meta, structured content and result
// _meta. It is not representable as a float64, so it survives only if every
// hop passes JSON numbers through verbatim.
const BigInt = "9007199254740993"

// ServerVersion is the version the fixture reports in initialize.
const ServerVersion = "1.0.0"

// ExoticSchema is the exact raw input schema bytes of the "exotic" tool (for
// comparisons). It is compact JSON with deliberately non-alphabetical key
// order; the go-sdk server emits it byte for byte in tools/list.
var ExoticSchema json.RawMessage = mustCompact(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Exotic input",
  "description": "Exercises schema passthrough: $defs, $ref, oneOf, pattern, additionalProperties false, a big integer and non-ASCII text (héllo).",
  "type": "object",
  "properties": {
    "id": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,31}$"},
    "target": {"$ref": "#/$defs/target"},
    "limit": {"type": "integer", "minimum": 0, "maximum": 9007199254740993},
    "mode": {"oneOf": [{"const": "fast"}, {"const": "safe"}], "default": "safe"}
  },
  "oneOf": [
    {"required": ["id"]},
    {"required": ["target"]}
  ],
  "additionalProperties": false,
  "$defs": {
    "target": {
      "type": "object",
      "properties": {
        "host": {"type": "string"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535}
      },
      "required": ["host"],
      "additionalProperties": false
    }
  }
}`)

// ExoticOutputSchema is the exact raw output schema bytes of the "exotic"
// tool.
var ExoticOutputSchema json.RawMessage = mustCompact(`{
  "type": "object",
  "properties": {
    "ok": {"type": "boolean"},
    "big": {"type": "integer"},
    "items": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["ok", "big"]
}`)

// ExoticStructuredContent is the exact structuredContent bytes returned by
// the "exotic" tool; it matches [ExoticOutputSchema].
var ExoticStructuredContent json.RawMessage = mustCompact(`{"ok": true, "big": 9007199254740993, "items": ["a", "b"]}`)

// Raw input schemas of the other tools.
var (
	echoSchema      = mustCompact(`{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}`)
	emptySchema     = mustCompact(`{"type": "object", "properties": {}, "additionalProperties": false}`)
	anySchema       = mustCompact(`{"type": "object"}`)
	slowSchema      = mustCompact(`{"type": "object", "properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"]}`)
	cancelledSchema = mustCompact(`{"type": "object", "properties": {"atLeast": {"type": "integer", "minimum": 0}}}`)
	progressSchema  = mustCompact(`{"type": "object", "properties": {"steps": {"type": "integer", "minimum": 0}}, "required": ["steps"]}`)
	nameSchema      = mustCompact(`{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}`)
)

// Small media payloads for the exotic tool's image and audio content.
var (
	// tinyPNG is a valid 1x1 transparent PNG.
	tinyPNG = []byte{
		0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d,
		0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
		0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00,
		0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
		0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
		0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
	}
	// tinyWAV is a valid mono 8 kHz 8-bit PCM WAV file with 4 samples.
	tinyWAV = []byte{
		'R', 'I', 'F', 'F', 40, 0, 0, 0, 'W', 'A', 'V', 'E',
		'f', 'm', 't', ' ', 16, 0, 0, 0, 1, 0, 1, 0,
		0x40, 0x1f, 0, 0, 0x40, 0x1f, 0, 0, 1, 0, 8, 0,
		'd', 'a', 't', 'a', 4, 0, 0, 0, 0x80, 0x80, 0x80, 0x80,
	}
)

// crashEnabled is set by ServeStdio: only a stdio child process may exit on
// the crash tool.
var crashEnabled atomic.Bool

// cancellations counts slow calls whose context was cancelled, process-wide.
var cancellations = struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed and replaced on every increment
}{changed: make(chan struct{})}

func recordCancellation() {
	cancellations.mu.Lock()
	defer cancellations.mu.Unlock()
	cancellations.n++
	close(cancellations.changed)
	cancellations.changed = make(chan struct{})
}

// cancelledCount reports the number of cancelled slow calls and a channel
// that is closed when it next changes.
func cancelledCount() (int, <-chan struct{}) {
	cancellations.mu.Lock()
	defer cancellations.mu.Unlock()
	return cancellations.n, cancellations.changed
}

// NewServer returns a go-sdk *mcp.Server with the fixture tools (see the
// package documentation).
func NewServer(opts Options) *mcp.Server {
	if opts.Name == "" {
		opts.Name = "fixture"
	}
	s := mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: ServerVersion}, nil)

	s.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "Returns its text argument as text content.",
		InputSchema: echoSchema,
	}, echoHandler)

	s.AddTool(&mcp.Tool{
		Name:         "exotic",
		Title:        "Exotic tool",
		Description:  "Has an exotic raw input schema, an output schema, annotations and _meta; returns every content type.",
		InputSchema:  ExoticSchema,
		OutputSchema: ExoticOutputSchema,
		Annotations:  &mcp.ToolAnnotations{Title: "Exotic", ReadOnlyHint: true},
		Meta:         mcp.Meta{"big": json.Number(BigInt), "fixture/kind": "exotic"},
	}, exoticHandler)

	s.AddTool(&mcp.Tool{
		Name:        "rpc_error",
		Description: `Fails with JSON-RPC error -32602 "bad argument x", data {"field":"x"}.`,
		InputSchema: emptySchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{
			Code:    jsonrpc.CodeInvalidParams,
			Message: "bad argument x",
			Data:    json.RawMessage(`{"field":"x"}`),
		}
	})

	s.AddTool(&mcp.Tool{
		Name:        "tool_error",
		Description: `Returns a tool result with isError true and text "it failed".`,
		InputSchema: emptySchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "slow",
		Description: "Waits ms milliseconds or until cancelled (cancellations are counted).",
		InputSchema: slowSchema,
	}, slowHandler)

	s.AddTool(&mcp.Tool{
		Name:        "cancelled_count",
		Description: "Returns the number of slow calls cancelled so far in this process; with atLeast, waits for that many first.",
		InputSchema: cancelledSchema,
	}, cancelledCountHandler)

	s.AddTool(&mcp.Tool{
		Name:        "progress",
		Description: "Sends steps progress notifications to the caller's progress token, then returns \"done\".",
		InputSchema: progressSchema,
	}, progressHandler)

	s.AddTool(&mcp.Tool{
		Name:        "crash",
		Description: "Exits the process with status 3 (stdio only).",
		InputSchema: emptySchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if !crashEnabled.Load() {
			return textResult(true, "crash only on stdio"), nil
		}
		os.Exit(3)
		return nil, nil // unreachable
	})

	s.AddTool(&mcp.Tool{
		Name:        "pid",
		Description: "Returns the server process id.",
		InputSchema: emptySchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return textResult(false, strconv.Itoa(procPid())), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "env",
		Description: "Returns the process environment, sorted, one KEY=VALUE per line.",
		InputSchema: emptySchema,
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		env := os.Environ()
		slices.Sort(env)
		return textResult(false, strings.Join(env, "\n")), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "meta",
		Description: "Returns the call's params._meta as JSON text.",
		InputSchema: emptySchema,
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		meta := req.Params.Meta
		if meta == nil {
			meta = mcp.Meta{}
		}
		b, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		return textResult(false, string(b)), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "add_tool",
		Description: "Adds an echo-like tool with the given name at runtime.",
		InputSchema: nameSchema,
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := nameArg(req)
		if err != nil {
			return nil, err
		}
		s.AddTool(&mcp.Tool{
			Name:        name,
			Description: "Runtime-added tool; returns its text argument as text content.",
			InputSchema: echoSchema,
		}, echoHandler)
		return textResult(false, "added"), nil
	})

	s.AddTool(&mcp.Tool{
		Name:        "remove_tool",
		Description: "Removes the tool with the given name.",
		InputSchema: nameSchema,
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name, err := nameArg(req)
		if err != nil {
			return nil, err
		}
		s.RemoveTools(name)
		return textResult(false, "removed"), nil
	})

	for i := range opts.ExtraTools {
		s.AddTool(&mcp.Tool{
			Name:        fmt.Sprintf("%s_t%04d", opts.Name, i),
			Description: "Trivial load-test tool; returns its raw arguments as text.",
			InputSchema: anySchema,
		}, argsEchoHandler)
	}
	return s
}

// SSEHandler returns an http.Handler serving the legacy HTTP+SSE transport
// (protocol 2024-11-05) for a new fixture server: a GET establishes the event
// stream, whose first event is `endpoint`, and messages are POSTed to that
// endpoint. The same server instance is shared by all connections.
//
// DNS-rebinding (localhost Host header) protection is disabled, so the
// handler accepts whatever Host a proxy under test sends.
func SSEHandler(opts Options) http.Handler {
	s := NewServer(opts)
	return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.SSEOptions{DisableLocalhostProtection: true})
}

// StreamableHandler returns an http.Handler serving the streamable HTTP
// transport with stateful sessions (Mcp-Session-Id) for a new fixture server
// shared by all sessions.
//
// DNS-rebinding (localhost Host header) protection is disabled, so the
// handler accepts whatever Host a proxy under test sends.
func StreamableHandler(opts Options) http.Handler {
	s := NewServer(opts)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
}

// StatelessHandler returns an http.Handler serving the streamable HTTP
// transport in the go-sdk's stateless mode for a new fixture server: it
// speaks MCP 2026-07-28 (server/discover, subscriptions/listen, no
// session) and answers 2025 clients without a session too.
//
// DNS-rebinding (localhost Host header) protection is disabled, so the
// handler accepts whatever Host a proxy under test sends.
func StatelessHandler(opts Options) http.Handler {
	s := NewServer(opts)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true})
}

// ServeStdio runs a fixture server on os.Stdin/os.Stdout until EOF on stdin
// (returning nil) or until ctx is done (returning ctx.Err()). It enables the
// crash tool for this process.
func ServeStdio(ctx context.Context, opts Options) error {
	crashEnabled.Store(true)
	return NewServer(opts).Run(ctx, &mcp.StdioTransport{})
}

// RunIfChild lets a test binary re-exec itself (os.Args[0]) as a stdio MCP
// server child process; call it at the top of TestMain (and of a benchmark
// main).
//
// If the environment variable SWITCHBOARD_FIXTURE is "stdio", RunIfChild runs
// ServeStdio with Options{Name: $SWITCHBOARD_FIXTURE_NAME (default
// "fixture"), ExtraTools: $SWITCHBOARD_FIXTURE_TOOLS (default 0)} and then
// exits the process: status 0 after EOF, 1 on error (including an invalid
// SWITCHBOARD_FIXTURE_TOOLS). With SWITCHBOARD_FIXTURE_STUBBORN set it is
// hard to stop instead (see [EnvFixtureStubborn]). Otherwise it returns
// immediately.
func RunIfChild() {
	switch os.Getenv(EnvFixture) {
	case "stdio":
	case orphanMode:
		runOrphan()
	default:
		return
	}
	stubborn := os.Getenv(EnvFixtureStubborn)
	if stubborn != "" {
		if err := beStubborn(stubborn); err != nil {
			fmt.Fprintf(os.Stderr, "mcptest: %v\n", err)
			os.Exit(1)
		}
	}
	opts := Options{Name: os.Getenv(EnvFixtureName)}
	if v := os.Getenv(EnvFixtureTools); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "mcptest: invalid %s=%q\n", EnvFixtureTools, v)
			os.Exit(1)
		}
		opts.ExtraTools = n
	}
	if err := ServeStdio(context.Background(), opts); err != nil {
		fmt.Fprintf(os.Stderr, "mcptest: %v\n", err)
		os.Exit(1)
	}
	if stubborn != "" {
		sleepForever() // stdin's end is no reason to go
	}
	os.Exit(0)
}

// Environment variables read by [RunIfChild].
const (
	// EnvFixture selects the child mode; "stdio" serves the fixture on stdio.
	EnvFixture = "SWITCHBOARD_FIXTURE"
	// EnvFixtureName sets Options.Name.
	EnvFixtureName = "SWITCHBOARD_FIXTURE_NAME"
	// EnvFixtureTools sets Options.ExtraTools (decimal).
	EnvFixtureTools = "SWITCHBOARD_FIXTURE_TOOLS"
	// EnvFixtureStubborn, set to a file path, makes the stdio fixture as
	// hard to stop as a careless server: it ignores SIGTERM and stays after
	// stdin's end, and before serving it starts a grandchild that leaves
	// its process group (setsid), ignores SIGTERM and SIGHUP, and whose pid
	// (as /proc names it) it writes to that file.
	EnvFixtureStubborn = "SWITCHBOARD_FIXTURE_STUBBORN"
)

// ChildEnv returns the environment entries that make [RunIfChild] serve the
// fixture with opts on stdio; append them to os.Environ() for an exec.Cmd
// running os.Args[0].
func ChildEnv(opts Options) []string {
	env := []string{EnvFixture + "=stdio"}
	if opts.Name != "" {
		env = append(env, EnvFixtureName+"="+opts.Name)
	}
	if opts.ExtraTools != 0 {
		env = append(env, EnvFixtureTools+"="+strconv.Itoa(opts.ExtraTools))
	}
	return env
}

func echoHandler(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Text *string `json:"text"`
	}
	if err := unmarshalArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Text == nil {
		return nil, invalidParams(`missing required argument "text"`)
	}
	return textResult(false, *args.Text), nil
}

func argsEchoHandler(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := string(req.Params.Arguments)
	if args == "" {
		args = "{}"
	}
	return textResult(false, args), nil
}

func exoticHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	size := int64(3)
	return &mcp.CallToolResult{
		Meta: mcp.Meta{"big": json.Number(BigInt)},
		Content: []mcp.Content{
			&mcp.TextContent{
				Text: "exotic text",
				Annotations: &mcp.Annotations{
					Audience:     []mcp.Role{"user", "assistant"},
					Priority:     0.5,
					LastModified: "2025-01-12T15:00:58Z",
				},
			},
			&mcp.ImageContent{Data: tinyPNG, MIMEType: "image/png"},
			&mcp.AudioContent{Data: tinyWAV, MIMEType: "audio/wav"},
			&mcp.ResourceLink{
				URI:         "fixture://exotic/data.bin",
				Name:        "data.bin",
				Title:       "Exotic data",
				Description: "A linked resource.",
				MIMEType:    "application/octet-stream",
				Size:        &size,
			},
			&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI:      "fixture://exotic/readme.txt",
				MIMEType: "text/plain",
				Text:     "embedded text resource",
			}},
		},
		StructuredContent: ExoticStructuredContent,
	}, nil
}

func slowHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		MS *int64 `json:"ms"`
	}
	if err := unmarshalArgs(req, &args); err != nil {
		return nil, err
	}
	if args.MS == nil || *args.MS < 0 {
		return nil, invalidParams(`argument "ms" must be a non-negative integer`)
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		// Tell the caller the handler is running, so a cancellation sent
		// from now on is guaranteed to reach it.
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: tok,
			Progress:      0,
			Message:       "started",
		})
	}
	timer := time.NewTimer(time.Duration(*args.MS) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
		return textResult(false, "slept "+strconv.FormatInt(*args.MS, 10)+"ms"), nil
	case <-ctx.Done():
		recordCancellation()
		return nil, ctx.Err()
	}
}

func cancelledCountHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		AtLeast int `json:"atLeast"`
	}
	if err := unmarshalArgs(req, &args); err != nil {
		return nil, err
	}
	for {
		n, changed := cancelledCount()
		if n >= args.AtLeast {
			return textResult(false, strconv.Itoa(n)), nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func progressHandler(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Steps *int `json:"steps"`
	}
	if err := unmarshalArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Steps == nil || *args.Steps < 0 {
		return nil, invalidParams(`argument "steps" must be a non-negative integer`)
	}
	if tok := req.Params.GetProgressToken(); tok != nil {
		for i := 1; i <= *args.Steps; i++ {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok,
				Progress:      float64(i),
				Total:         float64(*args.Steps),
				Message:       fmt.Sprintf("step %d/%d", i, *args.Steps),
			})
			if err != nil {
				return nil, fmt.Errorf("sending progress: %w", err)
			}
		}
	}
	return textResult(false, "done"), nil
}

func nameArg(req *mcp.CallToolRequest) (string, error) {
	var args struct {
		Name string `json:"name"`
	}
	if err := unmarshalArgs(req, &args); err != nil {
		return "", err
	}
	if args.Name == "" {
		return "", invalidParams(`missing required argument "name"`)
	}
	return args.Name, nil
}

// unmarshalArgs decodes the call's raw arguments into v, reporting a
// JSON-RPC invalid-params error on failure. Absent arguments decode as {}.
func unmarshalArgs(req *mcp.CallToolRequest, v any) error {
	raw := req.Params.Arguments
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return invalidParams("invalid arguments: " + err.Error())
	}
	return nil
}

func invalidParams(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

func textResult(isError bool, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func mustCompact(s string) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		panic(errors.New("mcptest: invalid JSON literal: " + err.Error()))
	}
	return json.RawMessage(buf.Bytes())
}
