package upstreams

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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

// TestToolsNeverWaitsOnRetry (issue 20, item 16): once a server's first
// connect has failed, tools/list does not wait on its retries: with a
// retry hanging (up to the connect timeout), listing answers at once with
// what is connected, and status says the server is not ready.
func TestToolsNeverWaitsOnRetry(t *testing.T) {
	var hang atomic.Bool
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hang.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	h := newHarness(t, testOptions()) // connect timeout: waitTimeout
	h.apply(switchboard.ServerSpec{Name: "hang", Transport: switchboard.TransportStreamableHTTP, URL: up.URL},
		stdioSpec("ok"))

	h.tools() // the first attempt is waited for
	if st := h.status("hang"); st.State != switchboard.StateFailed {
		t.Fatalf("after the first attempt: state %q, want failed", st.State)
	}
	hang.Store(true)
	h.tools() // starts a retry in the background, which hangs
	select {
	case <-arrived:
	case <-time.After(waitTimeout):
		t.Fatal("no retry reached the server")
	}
	start := time.Now()
	cat := h.tools()
	if d := time.Since(start); d > waitTimeout/4 {
		t.Errorf("tools/list waited %s on a retry (connect timeout %s)", d, waitTimeout)
	}
	if _, ok := cat.Lookup("echo"); !ok {
		t.Error("the connected server's tools are missing from the list")
	}
	if st := h.status("hang"); st.State == switchboard.StateReady {
		t.Errorf("hanging server in state %q", st.State)
	}
}
