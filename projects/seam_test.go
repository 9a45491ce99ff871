package projects

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// whoBuiltin answers its one tool with the project and session it got.
type whoBuiltin struct{ tool string }

func (b whoBuiltin) Tools() []json.RawMessage {
	return []json.RawMessage{json.RawMessage(`{"name":"` + b.tool + `","inputSchema":{"type":"object"}}`)}
}

func (b whoBuiltin) CallTool(_ context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	text, _ := json.Marshal(req.Project + " " + req.Session + " " + req.Tool)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`), nil
}

// noStreams is a StreamOpener that refuses, naming its project.
type noStreams struct{ project string }

func (o noStreams) OpenStream(_ context.Context, spec switchboard.ServerSpec) (upstreams.Stream, error) {
	return nil, switchboard.Errorf(switchboard.ErrUnavailable, "no streams in project %s for %s", o.project, spec.Name)
}

func post(t *testing.T, url, sid, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}

// Each project's runtime gets its builtins, its stream opener and its
// session-end hook; calls carry the project and the client's session.
func TestProjectSeam(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ended []string
	endedCh := make(chan struct{}, 8)
	h := New(Options{Store: st, Box: box,
		OnSessionEnd: func(project, session string) {
			mu.Lock()
			ended = append(ended, project+" "+session)
			mu.Unlock()
			endedCh <- struct{}{}
		},
		Streams: func(project string) upstreams.StreamOpener { return noStreams{project} },
		Builtins: func(project string) map[string]upstreams.Builtin {
			return map[string]upstreams.Builtin{"sandbox": whoBuiltin{tool: "who_" + project}}
		},
	})
	defer h.Close(ctx)
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: Default}); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, []switchboard.ServerSpec{{Name: "box", Transport: switchboard.TransportHosted}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(http.NotFoundHandler()))
	defer srv.Close()
	url := srv.URL + "/projects/p/mcp"

	resp, _ := post(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatalf("initialize: %s", resp.Status)
	}
	_, body := post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"who_p"}}`)
	if !strings.Contains(body, `"p `+sid+` who_p"`) {
		t.Fatalf("builtin call answered %s", body)
	}

	m, err := h.Manager(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Manager(ctx, "nope"); !errors.Is(err, switchboard.ErrNotFound) {
		t.Fatalf("Manager(unknown) = %v, want ErrNotFound", err)
	}
	// Each project's stream opener serves its hosted servers.
	dm, err := h.Manager(ctx, Default)
	if err != nil {
		t.Fatal(err)
	}
	if err := dm.Connect(ctx, "box"); err == nil || !strings.Contains(switchboard.Message(err), "no streams in project default for box") {
		t.Fatalf("Connect(box) = %v, want the project's opener's error", err)
	}
	// SetBuiltin replaces the project's builtin; clients see the new tool.
	h.SetBuiltin("p", "sandbox", whoBuiltin{tool: "who2"})
	if _, ok := m.Catalog().Lookup("who2"); !ok {
		t.Fatalf("SetBuiltin: catalog %+v", m.Catalog().Tools)
	}
	h.SetBuiltin("absent", "sandbox", whoBuiltin{tool: "x"}) // no runtime: nothing happens

	req, _ := http.NewRequest(http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	select {
	case <-endedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("OnSessionEnd not called after DELETE")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ended) != 1 || ended[0] != "p "+sid {
		t.Fatalf("OnSessionEnd calls %q, want [%q]", ended, "p "+sid)
	}
}

// pipeOpener serves hosted servers with in-process fixture servers.
type pipeOpener struct{}

func (pipeOpener) OpenStream(context.Context, switchboard.ServerSpec) (upstreams.Stream, error) {
	return mcptest.NewPipe(mcptest.Options{}), nil
}

// A hosted server's call that times out answers the client -32603 naming
// the server and the timeout; the connection stays and serves the next.
func TestHostedTimeoutOverHTTP(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Box: box, Streams: func(string) upstreams.StreamOpener { return pipeOpener{} }})
	defer h.Close(ctx)
	spec := switchboard.ServerSpec{Name: "box", Transport: switchboard.TransportHosted, CallTimeout: time.Second}
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: Default}); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(ctx, []switchboard.ServerSpec{spec}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler(http.NotFoundHandler()))
	defer srv.Close()
	url := srv.URL + "/mcp"
	resp, _ := post(t, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := resp.Header.Get("Mcp-Session-Id")
	_, body := post(t, url, sid, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":60000}}}`)
	var out struct {
		Error *switchboard.RPCError `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.Error == nil {
		t.Fatalf("slow call answered %s", body)
	}
	if out.Error.Code != switchboard.CodeInternalError || !strings.Contains(out.Error.Message, `"box"`) || !strings.Contains(out.Error.Message, "within 1s") {
		t.Fatalf("error = %+v, want -32603 naming the server and the timeout", out.Error)
	}
	_, body = post(t, url, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still here"}}}`)
	if !strings.Contains(body, "still here") {
		t.Fatalf("next call answered %s", body)
	}
	if s, _ := h.Status(ctx, Default); len(s) != 1 || s[0].State != switchboard.StateReady {
		t.Fatalf("status = %+v", s)
	}
}
