package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestPlainJSONRPCPost: the two-line curl of docs/clients.md works: a POST with
// no session calls a tool, under the same auth, and the call is logged
// with no session; a GET stream or DELETE without a session is still 400.
func TestPlainJSONRPCPost(t *testing.T) {
	g := startGateway(t, [][2]any{{"up", stdioServer("up")}}, nil)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(g.url+"/mcp", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`); st != 200 || !strings.Contains(body, `"name":"echo"`) {
		t.Fatalf("plain tools/list: %d %s", st, body)
	}
	st, body := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`)
	if st != 200 || !strings.Contains(body, `"text":"plain"`) {
		t.Fatalf("plain tools/call: %d %s", st, body)
	}
	// Two scripts may both use id 1 at once: no session, no id clash.
	done := make(chan string, 2)
	for range 2 {
		go func() {
			_, b := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":200}}}`)
			done <- b
		}()
	}
	for range 2 {
		if b := <-done; strings.Contains(b, `"error"`) {
			t.Errorf("concurrent sessionless calls with the same id: %s", b)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, g.url+"/mcp", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("DELETE without a session: %d, want 400", resp.StatusCode)
	}
	g.stop(t)

	// The calls are in the log, with no session.
	store, err := sqlite.Open(context.Background(), g.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	page, err := store.ListToolCalls(context.Background(), switchboard.ToolCallFilter{ProjectID: "default", Tool: "echo", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Calls) != 1 || page.Calls[0].Session != "" || page.Calls[0].Outcome != switchboard.OutcomeOK {
		t.Errorf("call log after a plain call: %+v", page.Calls)
	}
}
