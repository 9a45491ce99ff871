package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The MCP client of `switchboard call`: just enough streamable HTTP for
// one tool call (initialize, notifications/initialized, tools/call,
// DELETE), with the standard library only.

const cliProtocolVersion = "2025-06-18"

// rpcError is a JSON-RPC error answer to a request.
type rpcError struct {
	Method  string
	Code    int
	Message string
	Data    json.RawMessage
}

func (e *rpcError) Error() string {
	s := fmt.Sprintf("%s: JSON-RPC error %d: %s", e.Method, e.Code, e.Message)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += " (data: " + string(e.Data) + ")"
	}
	return s
}

// toolError is a tool call whose result has isError true.
type toolError struct{ Tool string }

func (e *toolError) Error() string {
	return fmt.Sprintf("tool %s reported an error (isError true); its result is printed above", e.Tool)
}

// checkObject accepts exactly one JSON object.
func checkObject(b []byte) error {
	if !json.Valid(b) {
		var v any
		err := json.Unmarshal(b, &v)
		return fmt.Errorf("not valid JSON (%v); want an object such as '{\"text\": \"hi\"}'", err)
	}
	if b = bytes.TrimSpace(b); len(b) == 0 || b[0] != '{' {
		return fmt.Errorf("got %s, want a JSON object such as '{\"text\": \"hi\"}'", snippet(b))
	}
	return nil
}

// mcpSession is one session with a project's MCP endpoint.
type mcpSession struct {
	c        *cli
	endpoint string
	id       string // Mcp-Session-Id
	version  string // negotiated protocol version
	nextID   int
	progress bool // print progress notifications on stderr
}

func (c *cli) call(cmd cliCommand, args []string) error {
	fs := c.flags(cmd.name)
	progress := fs.Bool("progress", false, "ask for progress notifications and print them on stderr")
	pos, err := c.parse(fs, cmd, args, 1, 1+maxKeyValues)
	if err != nil {
		return err
	}
	arguments := json.RawMessage(`{}`)
	if len(pos) > 2 || (len(pos) == 2 && isKeyValue(pos[1])) {
		if arguments, err = keyValueArgs(pos[1:]); err != nil {
			return &usageError{cmd: cmd.name, msg: err.Error()}
		}
	} else if len(pos) == 2 {
		in := []byte(pos[1])
		if pos[1] == "-" {
			if in, err = io.ReadAll(io.LimitReader(c.stdin, maxReplyBytes)); err != nil {
				return fmt.Errorf("%s: reading the arguments from stdin: %w", cmd.name, err)
			}
		}
		in = bytes.TrimSpace(in)
		if err := checkObject(in); err != nil {
			return &usageError{cmd: cmd.name, msg: "JSON-ARGS: " + err.Error()}
		}
		arguments = in // verbatim: big integers stay exact
	}
	s := &mcpSession{c: c, endpoint: c.mcpEndpoint(c.project), progress: *progress}
	err = s.initialize()
	if s.id != "" {
		defer s.close()
	}
	if err != nil {
		return err
	}
	params := map[string]any{"name": pos[0], "arguments": arguments}
	if *progress {
		params["_meta"] = map[string]any{"progressToken": "switchboard-cli"}
	}
	result, err := s.request("tools/call", params)
	if err != nil {
		return err
	}
	if err := c.printJSON(result); err != nil {
		return err
	}
	var res struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(result, &res) == nil && res.IsError {
		return &toolError{Tool: pos[0]}
	}
	return nil
}

// maxKeyValues bounds the KEY=VALUE arguments of one call.
const maxKeyValues = 64

// argKey is the KEY of a KEY=VALUE or KEY:=JSON argument.
var argKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*:?$`)

// isKeyValue reports whether arg reads as KEY=VALUE or KEY:=JSON (KEY a
// name) rather than JSON or '-'.
func isKeyValue(arg string) bool {
	k, _, ok := strings.Cut(arg, "=")
	return ok && argKey.MatchString(k)
}

// keyValueArgs builds the arguments object from KEY=VALUE (a string) and
// KEY:=JSON (any JSON value) pairs, as Docker's `docker mcp tools call`
// takes them.
func keyValueArgs(pairs []string) (json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	for _, p := range pairs {
		if !isKeyValue(p) {
			return nil, fmt.Errorf("%q: give either one JSON object or KEY=VALUE pairs (KEY:=JSON for numbers, booleans, lists)", snippet([]byte(p)))
		}
		k, v, _ := strings.Cut(p, "=")
		var raw json.RawMessage
		if key, isJSON := strings.CutSuffix(k, ":"); isJSON {
			k = key
			if !json.Valid([]byte(v)) {
				return nil, fmt.Errorf("%s:=%s: the value is not valid JSON (write %s=%s for a string)", k, snippet([]byte(v)), k, snippet([]byte(v)))
			}
			raw = json.RawMessage(v)
		} else {
			raw, _ = json.Marshal(v)
		}
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("%s is given twice", k)
		}
		obj[k] = raw
	}
	return json.Marshal(obj)
}

func (s *mcpSession) initialize() error {
	res, err := s.request("initialize", map[string]any{
		"protocolVersion": cliProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "switchboard-cli", "version": version},
	})
	if err != nil {
		return err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(res, &init)
	s.version = init.ProtocolVersion
	if s.id == "" {
		return fmt.Errorf("POST %s: initialize answered without an Mcp-Session-Id header", s.endpoint)
	}
	resp, err := s.post(s.c.ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// close ends the session, even when the command was interrupted.
func (s *mcpSession) close() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.c.ctx), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.endpoint, nil)
	if err != nil {
		return
	}
	s.headers(req)
	if resp, err := s.c.http.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (s *mcpSession) headers(req *http.Request) {
	s.c.authorize(req)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	if s.version != "" {
		req.Header.Set("Mcp-Protocol-Version", s.version)
	}
}

// post sends one message and returns a 2xx response; anything else is an
// error naming the status and the server's message.
func (s *mcpSession) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	s.headers(req)
	resp, err := s.c.http.Do(req)
	if err != nil {
		return nil, s.c.transportError(http.MethodPost, s.endpoint, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, decodeHTTPError(http.MethodPost, s.endpoint, resp.StatusCode, raw)
	}
	return resp, nil
}

// request sends a JSON-RPC request and returns its result, reading the
// answer as plain JSON or as an SSE stream.
func (s *mcpSession) request(method string, params any) (json.RawMessage, error) {
	s.nextID++
	id := strconv.Itoa(s.nextID)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.timeout)
	defer cancel()
	resp, err := s.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if method == "initialize" {
		s.id = resp.Header.Get("Mcp-Session-Id")
	}
	var msg *rpcMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg, err = s.readStream(resp.Body, id)
	} else {
		msg = &rpcMessage{}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxReplyBytes)).Decode(msg)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.c.transportError(http.MethodPost, s.endpoint, ctx.Err())
		}
		return nil, fmt.Errorf("%s: reading the answer from %s: %w", method, s.endpoint, err)
	}
	if msg.Error != nil {
		return nil, &rpcError{Method: method, Code: msg.Error.Code, Message: msg.Error.Message, Data: msg.Error.Data}
	}
	if len(msg.Result) == 0 {
		return nil, fmt.Errorf("%s: the answer from %s has neither result nor error", method, s.endpoint)
	}
	return msg.Result, nil
}

// rpcMessage is any JSON-RPC message the server sends.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// readStream reads SSE events until the response with id; notifications
// (progress, list changes, logs) and requests from the server on the way
// are skipped, progress printed when asked for.
func (s *mcpSession) readStream(r io.Reader, id string) (*rpcMessage, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxReplyBytes)
	var data []string
	for {
		more := sc.Scan()
		line := sc.Text()
		if more && line != "" {
			// One event: "data:" lines joined by newlines; "event:",
			// "id:", "retry:" and ":" comments do not matter here.
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
			continue
		}
		if len(data) > 0 {
			var m rpcMessage
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
				return nil, fmt.Errorf("an event is not JSON-RPC: %w", err)
			}
			data = data[:0]
			if m.Method == "" && string(bytes.TrimSpace(m.ID)) == id {
				return &m, nil
			}
			if s.progress && m.Method == "notifications/progress" {
				s.printProgress(m.Params)
			}
		}
		if !more {
			if err := sc.Err(); err != nil {
				return nil, err
			}
			return nil, errors.New("the event stream ended before the response")
		}
	}
}

func (s *mcpSession) printProgress(params json.RawMessage) {
	var p struct {
		Progress json.Number `json:"progress"`
		Total    json.Number `json:"total"`
		Message  string      `json:"message"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	line := "progress " + p.Progress.String()
	if p.Total != "" {
		line += "/" + p.Total.String()
	}
	if p.Message != "" {
		line += ": " + p.Message
	}
	fmt.Fprintln(s.c.stderr, line)
}
