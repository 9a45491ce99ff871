package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/mcpclient"
)

// rpcError is a JSON-RPC error answer to a request.
type rpcError = mcpclient.RPCError

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
	endpoint := c.mcpEndpoint(c.project)
	s := &mcpclient.Session{
		Endpoint: endpoint,
		Do: func(req *http.Request) (*http.Response, error) {
			resp, err := c.http.Do(req)
			if err != nil {
				return nil, c.transportError(req.Method, endpoint, err)
			}
			return resp, nil
		},
		Header:        c.authorize,
		Client:        "switchboard-cli",
		ClientVersion: version,
	}
	if *progress {
		s.Notified = func(method string, params json.RawMessage) {
			if method == "notifications/progress" {
				c.printProgress(params)
			}
		}
	}
	// mcpError shows an error as the admin API's are shown.
	mcpError := func(err error) error {
		var he *mcpclient.HTTPError
		if errors.As(err, &he) {
			return decodeHTTPError(http.MethodPost, endpoint, he.Status, he.Body)
		}
		if err == context.DeadlineExceeded || err == context.Canceled {
			return c.transportError(http.MethodPost, endpoint, err)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
	err = s.Initialize(ctx)
	cancel()
	if s.ID != "" {
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
			defer cancel()
			s.Close(ctx)
		}()
	}
	if err != nil {
		return mcpError(err)
	}
	params := map[string]any{"name": pos[0], "arguments": arguments}
	if *progress {
		params["_meta"] = map[string]any{"progressToken": "switchboard-cli"}
	}
	ctx, cancel = context.WithTimeout(c.ctx, c.timeout)
	defer cancel()
	result, err := s.Request(ctx, "tools/call", params)
	if err != nil {
		return mcpError(err)
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

func (c *cli) printProgress(params json.RawMessage) {
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
	fmt.Fprintln(c.stderr, line)
}
