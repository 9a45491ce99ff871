package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// protocolVersion is the MCP version the console's calls speak.
const protocolVersion = "2025-06-18"

// rpcAnswer is one JSON-RPC response.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// callTool calls tool on project's MCP endpoint as a client would
// (initialize, notifications/initialized, tools/call, then DELETE of the
// session), in process and with the browser's token, so the call is
// authorized, counted and logged like any other. A refusal of the
// session itself (401, 403) comes back in Denied.
func (c *Console) callTool(r *http.Request, project, tool string, args json.RawMessage) *tryResult {
	path := mcpPath(project)
	hdr := http.Header{"Accept": {"application/json, text/event-stream"}}
	init := c.call(r, http.MethodPost, path, json.RawMessage(fmt.Sprintf(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"switchboard-console","version":%q}}}`,
		protocolVersion, c.opts.Version)), hdr)
	sid := init.header.Get("Mcp-Session-Id")
	if init.status == http.StatusUnauthorized || init.status == http.StatusForbidden {
		return &tryResult{Denied: init, Error: init.message()}
	}
	if !init.ok() || sid == "" {
		return &tryResult{Error: fmt.Sprintf("the MCP endpoint did not open a session (HTTP %d): %s", init.status, init.message())}
	}
	hdr = http.Header{"Accept": hdr["Accept"], "Mcp-Session-Id": {sid}, "Mcp-Protocol-Version": {protocolVersion}}
	defer c.call(r, http.MethodDelete, path, nil, hdr)
	c.call(r, http.MethodPost, path, json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), hdr)
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	rp := c.call(r, http.MethodPost, path, json.RawMessage(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+string(params)+`}`), hdr)
	ans, err := decodeRPC(rp)
	if err != nil {
		return &tryResult{Error: err.Error()}
	}
	if ans.Error != nil {
		return &tryResult{Error: ans.Error.Message, Code: ans.Error.Code}
	}
	res := &tryResult{OK: true}
	var body struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(ans.Result, &body)
	res.IsError = body.IsError
	res.OK = !body.IsError
	for _, ct := range body.Content {
		if ct.Type == "text" {
			res.Text = append(res.Text, newTextItem(ct.Text))
		}
	}
	var b bytes.Buffer
	if json.Indent(&b, ans.Result, "", "  ") == nil {
		res.JSON = b.String()
	}
	return res
}

// decodeRPC reads the response of a POST: plain JSON, or an event stream
// whose last message event is the response (progress events come first).
func decodeRPC(rp reply) (rpcAnswer, error) {
	var ans rpcAnswer
	body := rp.body
	if mt, _, _ := mime.ParseMediaType(rp.header.Get("Content-Type")); mt == "text/event-stream" {
		body = nil
		for _, ev := range strings.Split(string(rp.body), "\n\n") {
			var data []string
			for _, line := range strings.Split(ev, "\n") {
				if d, ok := strings.CutPrefix(line, "data:"); ok {
					data = append(data, strings.TrimPrefix(d, " "))
				}
			}
			if len(data) > 0 && strings.Contains(strings.Join(data, "\n"), `"id"`) {
				body = []byte(strings.Join(data, "\n"))
			}
		}
	}
	if err := json.Unmarshal(body, &ans); err != nil || (ans.Result == nil && ans.Error == nil) {
		return ans, fmt.Errorf("the MCP endpoint answered HTTP %d without a JSON-RPC response: %s", rp.status, rp.message())
	}
	return ans, nil
}
