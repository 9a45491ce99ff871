package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/switchboard-mcp/switchboard/internal/mcpclient"
)

// mcpSession is a client of project's MCP endpoint, served in process
// with the token of r's browser.
func (c *Console) mcpSession(r *http.Request, project string) *mcpclient.Session {
	return &mcpclient.Session{
		Endpoint:      mcpPath(project),
		Do:            func(req *http.Request) (*http.Response, error) { return c.do(r, req), nil },
		Client:        "switchboard-console",
		ClientVersion: c.opts.Version,
	}
}

// callTool calls tool on project's MCP endpoint as a client would
// (initialize, notifications/initialized, tools/call, then DELETE of the
// session), in process and with the browser's token, so the call is
// authorized, counted and logged like any other. A refusal of the
// session itself (401, 403) comes back in Denied.
func (c *Console) callTool(r *http.Request, project, tool string, args json.RawMessage) *tryResult {
	s := c.mcpSession(r, project)
	err := s.Initialize(r.Context())
	if s.ID != "" {
		defer s.Close(r.Context())
	}
	var he *mcpclient.HTTPError
	if errors.As(err, &he) {
		rp := reply{status: he.Status, header: he.Header, body: he.Body}
		if he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden {
			return &tryResult{Denied: rp, Error: rp.message()}
		}
		return &tryResult{Error: fmt.Sprintf("the MCP endpoint did not open a session (HTTP %d): %s", rp.status, rp.message())}
	}
	if err != nil {
		return &tryResult{Error: "the MCP endpoint did not open a session: " + err.Error()}
	}
	result, err := s.Request(r.Context(), "tools/call", map[string]any{"name": tool, "arguments": args})
	var re *mcpclient.RPCError
	switch {
	case errors.As(err, &re):
		return &tryResult{Error: re.Message, Code: re.Code}
	case errors.As(err, &he):
		if re := he.RPC("tools/call"); re != nil {
			return &tryResult{Error: re.Message, Code: re.Code}
		}
		rp := reply{status: he.Status, body: he.Body}
		return &tryResult{Error: fmt.Sprintf("the MCP endpoint answered HTTP %d without a JSON-RPC response: %s", rp.status, rp.message())}
	case err != nil:
		return &tryResult{Error: err.Error()}
	}
	res := &tryResult{OK: true}
	var body struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(result, &body)
	res.IsError = body.IsError
	res.OK = !body.IsError
	for _, ct := range body.Content {
		if ct.Type == "text" {
			res.Text = append(res.Text, newTextItem(ct.Text))
		}
	}
	var b bytes.Buffer
	if json.Indent(&b, result, "", "  ") == nil {
		res.JSON = b.String()
	}
	return res
}

// do serves an MCP request in process, as call does, as the browser that
// sent r.
func (c *Console) do(r, req *http.Request) *http.Response {
	var body any // nil, not an empty json.RawMessage, for DELETE
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		body = json.RawMessage(b)
	}
	rp := c.call(r, req.Method, req.URL.RequestURI(), body, req.Header)
	return &http.Response{StatusCode: rp.status, Header: rp.header, Body: io.NopCloser(bytes.NewReader(rp.body))}
}
