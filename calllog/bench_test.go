package calllog

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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
