package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

func TestParseMessage(t *testing.T) {
	tests := []struct {
		body string
		code int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0},
		{``, -32700},
		{`{`, -32700},
		{"\xff\xfe", -32700},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, -32600},
		{`"just a string"`, -32600},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
		{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`, -32600},
		{`{"jsonrpc":"2.0","id":"` + strings.Repeat("x", 300) + `","method":"ping"}`, -32600},
		{`{"jsonrpc":"2.0","id":1}`, -32600},
	}
	for _, tt := range tests {
		_, err := parseMessage([]byte(tt.body))
		got := 0
		if err != nil {
			got = err.Code
		}
		if got != tt.code {
			t.Errorf("parseMessage(%.40q) code %d, want %d", tt.body, got, tt.code)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := parseMessage(body)
		if err == nil && (m == nil || m.JSONRPC != "2.0") {
			t.Fatalf("accepted %q as %+v", body, m)
		}
		if err == nil && len(m.ID) > 0 && !validID(m.ID) {
			t.Fatalf("accepted invalid id %s", m.ID)
		}
	})
}

func TestSessionsExpire(t *testing.T) {
	s := newSessions(time.Minute, nil)
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	idle, busy, streaming := s.Generate(), s.Generate(), s.Generate()
	s.streamOpened(streaming)
	now = now.Add(50 * time.Second)
	if _, err := s.Validate(busy); err != nil {
		t.Fatal(err)
	}
	now = now.Add(30 * time.Second)
	got := s.expired()
	if len(got) != 1 || got[0] != idle {
		t.Fatalf("expired %v, want only %s", got, idle)
	}
	_, _ = s.Terminate(idle)
	if term, _ := s.Validate(idle); !term {
		t.Errorf("terminated session still valid")
	}
	if _, err := s.Validate("sb-unknown"); err == nil {
		t.Errorf("unknown session accepted")
	}
}

// fakeGateway is a working in-memory Gateway.
type fakeGateway struct{ cat *switchboard.Catalog }

func (f fakeGateway) Tools(context.Context) *switchboard.Catalog { return f.cat }
func (f fakeGateway) Catalog() *switchboard.Catalog              { return f.cat }
func (f fakeGateway) Call(_ context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	if _, ok := f.cat.Lookup(req.Tool); !ok {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q", req.Tool)
	}
	return json.RawMessage(`{"content":[{"type":"text","text":` + strconv.Quote(string(req.Arguments)) + `}]}`), nil
}
func (f fakeGateway) Status() []switchboard.ServerStatus { return nil }

func TestCORSAndOrigin(t *testing.T) {
	s := New(fakeGateway{cat: switchboard.NewCatalog(1, nil)}, Options{CORS: true, CORSOrigins: []string{"https://app.example.com"}})
	defer s.Shutdown(context.Background())
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/mcp", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,mcp-session-id")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("preflight from allowed origin: headers %v", resp.Header)
	}
	// A browser client reads the session id and a 401's challenge (the
	// sign-in's resource metadata).
	get, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
	get.Header.Set("Origin", "https://app.example.com")
	if resp, err := http.DefaultClient.Do(get); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		exposed := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
		if !strings.Contains(exposed, "mcp-session-id") || !strings.Contains(exposed, "www-authenticate") {
			t.Errorf("exposed headers %q: want Mcp-Session-Id and WWW-Authenticate", exposed)
		}
	}
	for origin, want := range map[string]int{"https://app.example.com": 200, "http://127.0.0.1:5173": 200, "https://evil.example": 403, "null": 403} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/healthz", nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Origin %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

func TestToolsListRenderedOncePerCatalog(t *testing.T) {
	cat := switchboard.NewCatalog(1, []switchboard.Tool{
		{Name: "a", Raw: json.RawMessage(`{"name":"a","inputSchema":{"type":"object","x-big":9007199254740993}}`)},
		{Name: "b", Raw: json.RawMessage(`{"inputSchema":{"type":"object"},"name":"b"}`)},
	})
	s := New(fakeGateway{cat: cat}, Options{})
	defer s.Shutdown(context.Background())
	got := s.renderTools(cat)
	want := `{"tools":[{"name":"a","inputSchema":{"type":"object","x-big":9007199254740993}},{"inputSchema":{"type":"object"},"name":"b"}]}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	if &s.renderTools(cat)[0] != &got[0] {
		t.Errorf("rendered again for the same catalog")
	}
}
