package calllog

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"text":"hi"}`, `{"text":"hi"}`},
		{`{ "text" : "kept as sent" }`, `{ "text" : "kept as sent" }`},
		{`{"api_key":"sk-1","q":"x"}`, `{"api_key":"[REDACTED]","q":"x"}`},
		{`{"nested":{"Password":"p","ok":1},"list":[{"access_token":"t"}]}`, `{"list":[{"access_token":"[REDACTED]"}],"nested":{"Password":"[REDACTED]","ok":1}}`},
		{`{"Authorization":"Bearer x","n":9007199254740993}`, `{"Authorization":"[REDACTED]","n":9007199254740993}`},
		{`not json`, `null`},
		{``, ``},
	}
	for _, tt := range tests {
		if got := string(Redact(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Redact(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func record(i int, args string) switchboard.ToolCallRecord {
	return switchboard.ToolCallRecord{ProjectID: "default", Session: "s", Server: "up", Tool: "echo",
		Arguments: json.RawMessage(args), Outcome: switchboard.OutcomeOK, Duration: time.Duration(i) * time.Millisecond,
		StartedAt: time.Unix(1_700_000_000, int64(i)*1000).UTC()}
}

// Against the real embedded store: everything queued before Close is
// written, redacted, and nothing is dropped.
func TestWriterFlushesOnClose(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	spoolDir := t.TempDir()
	w := New(st, Options{BatchSize: 7, FlushEvery: time.Hour, SpoolDir: spoolDir})
	for i := range 100 {
		w.ObserveCall(record(i, `{"token":"secret-value","i":1}`))
	}
	w.ObserveCall(record(100, `{"bad": `)) // not JSON: stored as null
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 101 || w.Dropped() != 0 {
		t.Fatalf("written %d dropped %d, want 101 and 0", w.Written(), w.Dropped())
	}
	page, err := st.ListToolCalls(ctx, switchboard.ToolCallFilter{ProjectID: "default", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Calls) != 101 {
		t.Fatalf("stored %d records, want 101", len(page.Calls))
	}
	ids := map[string]bool{}
	for _, c := range page.Calls {
		if string(c.Arguments) == `{"token":"secret-value","i":1}` || json.Valid(c.Arguments) == false {
			t.Fatalf("stored arguments %s", c.Arguments)
		}
		ids[c.RecordID] = true
	}
	if len(ids) != 101 {
		t.Errorf("%d distinct record ids, want 101", len(ids))
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool files left after Close: %v", left)
	}
}

// failing is a store that is down.
type failing struct {
	mu    sync.Mutex
	calls int
}

func (f *failing) InsertToolCalls(context.Context, []switchboard.ToolCallRecord) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return switchboard.Errorf(switchboard.ErrUnavailable, "database is down")
}

// A store outage drops records with a count; recording never blocks.
func TestWriterStoreOutage(t *testing.T) {
	spoolDir := t.TempDir()
	w := New(&failing{}, Options{QueueSize: 10, BatchSize: 5, FlushEvery: time.Hour, SpoolDir: spoolDir})
	for i := range 1000 { // far more than the queue holds: must not block
		w.ObserveCall(record(i, `{}`))
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 0 || w.Dropped() != 1000 {
		t.Fatalf("written %d dropped %d, want 0 and 1000", w.Written(), w.Dropped())
	}
	// Dropped records are given up: the spool does not keep them.
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool files left after Close: %v", left)
	}
	w.ObserveCall(record(1, `{}`)) // after Close: dropped, no panic
	if w.Dropped() != 1001 {
		t.Fatalf("record after Close not counted")
	}
	if !errors.Is((&failing{}).InsertToolCalls(context.Background(), nil), switchboard.ErrUnavailable) {
		t.Fatal("fake store misbehaves")
	}
}

// TestNULToolNameRecorded (issue 20, item 18): an answered call to a tool
// whose name (an upstream's choice) holds a NUL is recorded under the
// escaped name, not dropped.
func TestNULToolNameRecorded(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, t.TempDir())
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "default"}); err != nil {
		t.Fatal(err)
	}
	w := New(st, Options{FlushEvery: time.Hour})
	rec := record(0, `{}`)
	rec.Tool = "nul\x00name"
	w.ObserveCall(rec)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 1 || w.Dropped() != 0 {
		t.Fatalf("written %d dropped %d, want 1 and 0", w.Written(), w.Dropped())
	}
	page, err := st.ListToolCalls(ctx, switchboard.ToolCallFilter{ProjectID: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Calls) != 1 || page.Calls[0].Tool != `"nul\x00name"` {
		t.Errorf("records %+v, want one for the tool `\"nul\\x00name\"`", page.Calls)
	}
}
