// Package httpbody reads request bodies for the MCP endpoint and the admin
// API alike: bounded in size and in time, so a client that sends headers
// and then dribbles (or never sends) its body holds one connection for at
// most Timeout, and then loses it.
package httpbody

import (
	"io"
	"net/http"
	"time"
)

// Timeout is the longest one request body may take to arrive. A variable
// only so tests can shorten it.
var Timeout = 30 * time.Second

// Read reads r's body, at most limit bytes, within Timeout. It returns
// *http.MaxBytesError (via errors.As) when the body is too large, and
// another error when it did not arrive in time or the client went away.
//
// On a read failure the connection is marked to close and the deadline is
// left in place: net/http would otherwise try to drain the rest of a
// declared body before answering, and wait for it forever. On success the
// deadline is lifted, so it cannot cut a long tool call's response.
func Read(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(Timeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}
