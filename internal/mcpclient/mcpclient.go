// Package mcpclient is the one JSON-RPC client codec of Switchboard's own
// MCP clients (the CLI's `switchboard call` and the console's try-it
// form): just enough streamable HTTP for a session (initialize,
// notifications/initialized, requests, DELETE), with the standard
// library only. The gateway's side of the protocol is server/.
package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// ProtocolVersion is the MCP version a session asks for.
const ProtocolVersion = "2025-06-18"

// maxReply bounds one answer (a JSON body or one SSE event).
const maxReply = 64 << 20

// RPCError is a JSON-RPC error answer to a request.
type RPCError struct {
	Method  string
	Code    int
	Message string
	Data    json.RawMessage
}

func (e *RPCError) Error() string {
	s := fmt.Sprintf("%s: JSON-RPC error %d: %s", e.Method, e.Code, e.Message)
	if len(e.Data) > 0 && string(e.Data) != "null" {
		s += " (data: " + string(e.Data) + ")"
	}
	return s
}

// HTTPError is an answer other than 2xx; the caller decodes Body (an API
// or JSON-RPC error object, or anything else) as it shows errors.
type HTTPError struct {
	Status int
	Header http.Header
	Body   []byte
}

func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d", e.Status) }

// RPC returns the JSON-RPC error that Body holds (the gateway answers
// some with an error status), or nil when Body is not one.
func (e *HTTPError) RPC(method string) *RPCError {
	var m message
	if json.Unmarshal(e.Body, &m) != nil || m.Error == nil {
		return nil
	}
	return &RPCError{Method: method, Code: m.Error.Code, Message: m.Error.Message, Data: m.Error.Data}
}

// Session is one session with an MCP endpoint. Set the exported fields
// before Initialize.
type Session struct {
	Endpoint string
	// Do sends one request: an *http.Client's Do, or the gateway's own
	// handler in process. Its errors are returned unchanged.
	Do func(*http.Request) (*http.Response, error)
	// Header, when set, adds the caller's headers (authorization, user
	// agent) to every request.
	Header func(*http.Request)
	// Client names the client in initialize's clientInfo.
	Client, ClientVersion string
	// Notified, when set, sees the notifications that an event stream
	// carries before the response (progress, logs, list changes).
	Notified func(method string, params json.RawMessage)

	ID      string // Mcp-Session-Id, set by Initialize
	Version string // the negotiated protocol version
	nextID  int
}

// Initialize opens the session: initialize, then
// notifications/initialized. ID is set as soon as the endpoint gives one,
// so a caller closes the session when ID is not empty, even after an
// error. It returns an *HTTPError, an *RPCError, the errors of Do, or an
// error when the endpoint gave no session id.
func (s *Session) Initialize(ctx context.Context) error {
	res, err := s.Request(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": s.Client, "version": s.ClientVersion},
	})
	if err != nil {
		return err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(res, &init)
	s.Version = init.ProtocolVersion
	if s.ID == "" {
		return fmt.Errorf("POST %s: initialize answered without an Mcp-Session-Id header", s.Endpoint)
	}
	resp, err := s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Close ends the session with DELETE; ctx should outlive a cancelled
// command (context.WithoutCancel) so an interrupted call still ends it.
func (s *Session) Close(ctx context.Context) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.Endpoint, nil)
	if err != nil {
		return
	}
	s.headers(req)
	if resp, err := s.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (s *Session) headers(req *http.Request) {
	if s.Header != nil {
		s.Header(req)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.ID != "" {
		req.Header.Set("Mcp-Session-Id", s.ID)
	}
	if s.Version != "" {
		req.Header.Set("Mcp-Protocol-Version", s.Version)
	}
}

// post sends one message and returns a 2xx response, or an *HTTPError.
func (s *Session) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	s.headers(req)
	resp, err := s.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, &HTTPError{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	}
	return resp, nil
}

// Request sends a JSON-RPC request and returns its result, reading the
// answer as plain JSON or as an SSE stream up to the response with its
// id. It returns an *RPCError for an error answer, an *HTTPError, the
// errors of Do, ctx's error when ctx ended while reading, or an error
// for an answer that is not JSON-RPC.
func (s *Session) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	s.nextID++
	id := strconv.Itoa(s.nextID)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.nextID, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	resp, err := s.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if method == "initialize" {
		s.ID = resp.Header.Get("Mcp-Session-Id")
	}
	var msg *message
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg, err = s.readStream(resp.Body, id)
	} else {
		msg = &message{}
		err = json.NewDecoder(io.LimitReader(resp.Body, maxReply)).Decode(msg)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: reading the answer from %s: %w", method, s.Endpoint, err)
	}
	if msg.Error != nil {
		return nil, &RPCError{Method: method, Code: msg.Error.Code, Message: msg.Error.Message, Data: msg.Error.Data}
	}
	if len(msg.Result) == 0 {
		return nil, fmt.Errorf("%s: the answer from %s has neither result nor error", method, s.Endpoint)
	}
	return msg.Result, nil
}

// message is any JSON-RPC message the server sends.
type message struct {
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
// and requests from the server on the way are skipped, notifications
// passed to Notified.
func (s *Session) readStream(r io.Reader, id string) (*message, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxReply)
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
			var m message
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
				return nil, fmt.Errorf("an event is not JSON-RPC: %w", err)
			}
			data = data[:0]
			if m.Method == "" && string(bytes.TrimSpace(m.ID)) == id {
				return &m, nil
			}
			if s.Notified != nil && m.Method != "" && len(m.ID) == 0 {
				s.Notified(m.Method, m.Params)
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
