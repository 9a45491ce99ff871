package engine

import (
	"context"
	"io"
	"strings"
	"sync"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/tail"
)

// stderrTail is how much of a container's stderr a Stream keeps.
const stderrTail = 16 << 10

// Stream is a container's stdio while attached: Read gives its stdout
// (demultiplexed from stderr), Write feeds its stdin, Stderr returns the
// last 16 KiB of its stderr. Read returns io.EOF once the process exits or
// the stream is closed. Close detaches without stopping the container (its
// stdin stays open for the next attach).
type Stream struct {
	hj     client.HijackedResponse
	stdout *io.PipeReader
	stderr *tail.Buffer

	wmu       sync.Mutex
	closeOnce sync.Once
	done      chan struct{}
}

// Attach attaches to a container created with Spec.Stdin. Call it before
// Start so nothing the process writes early is lost.
func (e *Engine) Attach(ctx context.Context, id string) (*Stream, error) {
	res, err := e.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		// The client reports a missing container as a refused upgrade.
		if strings.Contains(err.Error(), "received 404") {
			return nil, switchboard.Errorf(switchboard.ErrNotFound, "attach container: no such container %s", shortID(id))
		}
		return nil, e.wrap(err, "attach container")
	}
	pr, pw := io.Pipe()
	s := &Stream{hj: res.HijackedResponse, stdout: pr, stderr: tail.New(stderrTail), done: make(chan struct{})}
	go func() {
		_, err := stdcopy.StdCopy(pw, s.stderr, res.Reader)
		if err == nil {
			err = io.EOF
		}
		// Done first: whoever reads the end of stdout finds Done closed.
		close(s.done)
		pw.CloseWithError(err)
	}()
	return s, nil
}

// Read reads the container's stdout.
func (s *Stream) Read(p []byte) (int, error) { return s.stdout.Read(p) }

// Write writes to the container's stdin. Writes are whole: concurrent
// callers never interleave within one call.
func (s *Stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.hj.Conn.Write(p)
}

// Stderr returns the tail of what the container wrote to stderr while
// attached.
func (s *Stream) Stderr() string { return s.stderr.String() }

// Done is closed when the attach ends (the process exited or Close).
func (s *Stream) Done() <-chan struct{} { return s.done }

// Close detaches. It never half-closes stdin, so the container keeps
// running and can be attached again.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.hj.Close()
		_ = s.stdout.Close()
	})
	return nil
}

// shortID is the 12-character form of a container id people know.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
