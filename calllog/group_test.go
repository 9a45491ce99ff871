package calllog

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Concurrent appends land whole, each exactly once, one after the other
// from the file's start, with the segment counting each as pending.
func TestSpoolConcurrentAppends(t *testing.T) {
	sp, err := openSpool(t.TempDir(), 16<<20)
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 16, 200
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				seg, err := sp.append(fmt.Appendf(nil, "{\"c\":%d,\"i\":%d}\n", c, i))
				if err != nil || seg == nil {
					errs <- fmt.Errorf("append: %v (segment %v)", err, seg)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if sp.cur.pending != callers*each {
		t.Fatalf("pending %d, want %d", sp.cur.pending, callers*each)
	}
	data, err := os.ReadFile(sp.cur.path)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.TrimRight(data, "\x00") // the mapped file's unused end
	seen := map[string]bool{}
	for line := range bytes.Lines(data) {
		if seen[string(line)] {
			t.Fatalf("line %q written twice", line)
		}
		seen[string(line)] = true
	}
	for c := range callers {
		for i := range each {
			if l := fmt.Sprintf("{\"c\":%d,\"i\":%d}\n", c, i); !seen[l] {
				t.Fatalf("line %q missing", l)
			}
		}
	}
	if len(data) != sp.cur.size {
		t.Fatalf("file has %d bytes, segment counts %d", len(data), sp.cur.size)
	}
	sp.cur.pending = 0
	if err := sp.close(); err != nil {
		t.Fatal(err)
	}
}
