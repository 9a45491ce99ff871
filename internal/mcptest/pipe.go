package mcptest

import (
	"context"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Pipe is the client's end of an MCP server served in process over a pair
// of pipes, the way a hosted container's attach stream carries its stdio:
// Read is the server's stdout, Write its stdin (newline-delimited
// JSON-RPC). Close ends the server and waits for it.
type Pipe struct {
	r    *io.PipeReader // server's stdout
	w    *io.PipeWriter // server's stdin
	done chan struct{}
	once sync.Once
}

// NewPipe serves a new fixture server (see [NewServer]) over a Pipe.
func NewPipe(opts Options) *Pipe { return ServePipe(NewServer(opts)) }

// ServePipe serves s over a Pipe (for a fixture with tools a test added).
func ServePipe(s *mcp.Server) *Pipe {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &Pipe{r: outR, w: inW, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_ = s.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW})
		_ = outW.Close()
		_ = inR.Close()
	}()
	return p
}

// Read reads what the server wrote.
func (p *Pipe) Read(b []byte) (int, error) { return p.r.Read(b) }

// Write sends bytes to the server's stdin.
func (p *Pipe) Write(b []byte) (int, error) { return p.w.Write(b) }

// Close ends the server's stdin and stdout, then waits for the server to
// stop. It is safe to call more than once and concurrently with Read and
// Write, which it unblocks.
func (p *Pipe) Close() error {
	p.once.Do(func() {
		_ = p.w.Close()
		_ = p.r.Close()
	})
	<-p.done
	return nil
}
