package httpbody

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A body that never arrives in full is answered once Timeout passes, and
// the connection is closed rather than drained forever; a body that does
// arrive is read whole, and a too-large one is reported as such.
func TestRead(t *testing.T) {
	Timeout = 200 * time.Millisecond
	t.Cleanup(func() { Timeout = 30 * time.Second })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := Read(w, r, 16)
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		case err != nil:
			w.WriteHeader(http.StatusBadRequest)
		default:
			_, _ = w.Write(body)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		name, request string
		status        string
		closed        bool
	}{
		{"body cut short", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{", "400", true},
		{"whole body", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok", "200", false},
		{"too large", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n01234567890123456789", "413", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Far beyond Timeout: a connection held past it is the bug.
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tt.request); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if !strings.HasPrefix(resp.Status, tt.status) {
				t.Fatalf("status %s, want %s", resp.Status, tt.status)
			}
			if !tt.closed {
				return
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Fatalf("connection left open after a failed body (read: %v)", err)
			}
		})
	}
}
