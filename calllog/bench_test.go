package calllog

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// BenchmarkObserveCall is the call log's whole cost per call: 8
// goroutines on 2 cores record calls (redact, spool write) into a Writer
// over the embedded store with its spool, and Close writes what is left;
// cpu-us/call is this process's CPU (user + system) per record.
func BenchmarkObserveCall(b *testing.B) {
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	w := New(st, Options{SpoolDir: filepath.Join(dir, "spool"), QueueSize: 1 << 15})
	cpu0 := rusage()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			w.ObserveCall(record(i, `{"text":"hello"}`))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64((rusage()-cpu0).Microseconds())/float64(b.N), "cpu-us/call")
	if w.Dropped() > 0 {
		b.Fatalf("%d records dropped", w.Dropped())
	}
}

func rusage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkParts is the call log's cost per record, part by part, each
// alone on one goroutine: preparing the record (redaction check,
// validation, record id), encoding its spool line, the spool write (one
// write per record, as at low load), and the embedded store's insert,
// per record in batches of 1024 (the Writer's default).
func BenchmarkParts(b *testing.B) {
	args := `{"text":"hello"}`
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if _, err := prepare(record(i, args)); err != nil {
				b.Fatal(err)
			}
		}
	})
	rec, err := prepare(record(1, args))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var line []byte
		for range b.N {
			if line, err = appendLine(line[:0], rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	line, _ := encodeLine(rec)
	b.Run("spool", func(b *testing.B) {
		sp, err := openSpool(b.TempDir(), 16<<20)
		if err != nil {
			b.Fatal(err)
		}
		defer sp.close()
		// Settled every 1024 records, as the Writer does after a batch.
		batch := make([]queued, 0, 1024)
		b.ReportAllocs()
		for range b.N {
			seg, err := sp.append(line)
			if err != nil {
				b.Fatal(err)
			}
			if batch = append(batch, queued{seg: seg}); len(batch) == cap(batch) {
				if err := sp.settle(batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		if err := sp.settle(batch); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("insert", func(b *testing.B) {
		dir := b.TempDir()
		st, err := sqlite.Open(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		batch := make([]switchboard.ToolCallRecord, 1024)
		b.ReportAllocs()
		cpu0 := rusage()
		for i := 0; i < b.N; i += len(batch) {
			n := min(len(batch), b.N-i)
			for j := range n {
				batch[j], _ = prepare(record(i+j, args))
			}
			if err := st.InsertToolCalls(context.Background(), batch[:n]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((rusage()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/record")
	})
}
