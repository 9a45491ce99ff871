package calllog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// Two files take turns while the store keeps up: a full file moves the
// spool to the spare (an older file, emptied once its records were
// settled), not to a new file, whose pages would all be new.
func TestSpoolSpareReused(t *testing.T) {
	dir := t.TempDir()
	sp, err := openSpool(dir, 1000)
	if err != nil {
		t.Fatal(err)
	}
	line := append(bytes.Repeat([]byte("x"), 199), '\n')
	fill := func() []queued { // until the current file is full
		var qs []queued
		for range 5 {
			seg, err := sp.append(line)
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, queued{seg: seg})
		}
		return qs
	}
	a := fill()
	b := fill()
	if a[0].seg == b[0].seg || sp.cur != b[0].seg {
		t.Fatal("a full file did not move the spool to a new one")
	}
	if err := sp.settle(a); err != nil {
		t.Fatal(err)
	}
	if sp.spare != a[0].seg || a[0].seg.size != 0 {
		t.Fatalf("the settled old file is not the spare, emptied (spare %v, size %d)", sp.spare, a[0].seg.size)
	}
	c := fill()
	if c[0].seg != a[0].seg {
		t.Fatal("the spool moved to a new file, not the spare")
	}
	data, err := os.ReadFile(a[0].seg.path)
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimRight(data, "\x00"); !bytes.Equal(got, bytes.Repeat(line, 5)) {
		t.Fatalf("reused file holds %d bytes of records, want its 5 new lines", len(got))
	}
	if err := errors.Join(sp.settle(b), sp.settle(c), sp.close()); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, spoolPattern)); len(left) != 0 {
		t.Fatalf("spool files after close: %v", left)
	}
}
