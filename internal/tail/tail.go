// Package tail keeps the end of a stream: the stderr tail of a stdio child
// or a container, shown in status.
package tail

import "sync"

// Buffer keeps the last n bytes written to it. It is safe for concurrent
// use; the zero value keeps nothing, use New.
type Buffer struct {
	mu  sync.Mutex
	buf []byte
	n   int
}

// New returns a Buffer that keeps the last n bytes.
func New(n int) *Buffer { return &Buffer{n: n} }

// Write keeps the tail of everything written so far; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.n {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.n:]...)
	}
	return len(p), nil
}

// String returns the bytes kept.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
