package upstreams

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// An SSE server that accepts the stream and never answers is bounded by
// the connect timeout; tools/list does not hang on it.
func TestSSEBlackHoleBoundedByConnectTimeout(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer up.Close()
	defer close(release)
	m := New(Options{ConnectTimeout: 300 * time.Millisecond})
	defer m.Close(context.Background())
	m.Apply(context.Background(), []switchboard.ServerSpec{{Name: "bh", Transport: switchboard.TransportSSE, URL: up.URL + "/sse"}})
	start := time.Now()
	m.Tools(context.Background()) // no deadline of its own
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("tools waited %s on a black-holed server (connect timeout 300ms)", d)
	}
	if st := m.Status()[0]; st.State == switchboard.StateConnecting || st.State == switchboard.StateReady {
		t.Fatalf("state %s after the connect timeout", st.State)
	}
}

// A secret in an upstream URL never reaches status (served without auth).
func TestURLSecretNotInStatus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // connection refused from now on
	m := New(Options{ConnectTimeout: time.Second})
	defer m.Close(context.Background())
	for _, tr := range []switchboard.Transport{switchboard.TransportSSE, switchboard.TransportStreamableHTTP} {
		m.Apply(context.Background(), []switchboard.ServerSpec{{Name: "z", Transport: tr, URL: "http://" + addr + "/mcp/sk-SECRET123/sse?api_key=SECRET456"}})
		m.Tools(context.Background())
		st := m.Status()[0]
		if st.LastError == "" || strings.Contains(st.LastError, "SECRET") {
			t.Errorf("%s: lastError %q", tr, st.LastError)
		}
	}
}
