package upstreams

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Stream is the byte pipe of a server speaking newline-delimited JSON-RPC
// that is not our own child process: a hosted container's attach stream.
// Read is the server's stdout, Write its stdin, Close detaches. Read and
// Write are each called from one goroutine; Close may be called while
// they block and must unblock them.
//
// Optional methods, found by type assertion:
//
//	Stderr() string  // the tail of the server's stderr, shown in status
//	Initialized()    // called once initialize and the first tools/list succeeded on this stream
//
// It is an alias, not a named interface, so hosted/ implements
// StreamOpener without importing this package (adapters never import each
// other; cmd wires them).
type Stream = io.ReadWriteCloser

// StreamOpener opens the streams of hosted servers (specs with Transport
// == switchboard.TransportHosted). It is declared here, where it is used;
// hosted/ implements it.
type StreamOpener interface {
	// OpenStream returns the stream of hosted server spec.Name, waiting
	// (bounded by ctx) while it starts. Errors should be *switchboard.Error
	// with a client-safe message; anything else is reported as the server
	// being unavailable.
	OpenStream(ctx context.Context, spec switchboard.ServerSpec) (Stream, error)
}

// streamConn runs the shared framer over a Stream. Its upstream writes
// one request at a time, in arrival order (upstream.takeTurn): a hosted
// server's stdio is one pipe, and servers written for stdio commonly
// handle one request at a time.
type streamConn struct {
	*framer
	st        Stream
	stopWait  time.Duration
	log       *slog.Logger
	wg        sync.WaitGroup
	closeOnce sync.Once
}

func newStreamConn(st Stream, stopWait time.Duration, lim lineLimits, onNote func(string, json.RawMessage), log *slog.Logger) *streamConn {
	c := &streamConn{framer: newFramer(st, true, lim, onNote, log), st: st, stopWait: stopWait, log: log}
	c.wg.Go(func() {
		c.readLoop(st)
		c.markDone()
	})
	c.wg.Go(c.writeLoop)
	return c
}

// close detaches from the stream and waits for the reader and writer. A
// Stream whose Close blocks or does not unblock Read is waited for at most
// stopWait (and logged), so a broken stream cannot hold a reload or
// shutdown. Its error is the stream's business (hosted/ logs it).
func (c *streamConn) close() error {
	c.closeOnce.Do(func() {
		c.markDone()
		stopped := make(chan struct{})
		go func() {
			_ = c.st.Close()
			c.wg.Wait()
			close(stopped)
		}()
		t := time.NewTimer(c.stopWait)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			c.log.Warn("hosted stream did not close within the stop timeout; abandoning it")
		}
	})
	return nil
}

// stderr returns the stream's stderr tail, if it offers one.
func (c *streamConn) stderr() string {
	if s, ok := c.st.(interface{ Stderr() string }); ok {
		return s.Stderr()
	}
	return ""
}

// initialized tells the stream that the handshake succeeded, if it asks.
func (c *streamConn) initialized() {
	if s, ok := c.st.(interface{ Initialized() }); ok {
		s.Initialized()
	}
}
