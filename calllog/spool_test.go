package calllog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// spoolFiles lists the spool files in dir with the bytes of records each
// holds (a spool file is mapped at a fixed size; the rest is zeros).
func spoolFiles(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, spoolPattern))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = int64(len(bytes.TrimRight(b, "\x00")))
	}
	return out
}

// stored returns the durations (the test's record numbers) of the stored
// records, failing on a repeated RecordID.
func stored(t *testing.T, st *sqlite.Store) map[time.Duration]int {
	t.Helper()
	page, err := st.ListToolCalls(t.Context(), switchboard.ToolCallFilter{ProjectID: "default", Limit: switchboard.MaxToolCallLimit})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	out := map[time.Duration]int{}
	for _, c := range page.Calls {
		if len(c.RecordID) != 32 || ids[c.RecordID] {
			t.Errorf("record %+v: RecordID missing, malformed or repeated", c)
		}
		ids[c.RecordID] = true
		out[c.Duration]++
	}
	return out
}

// once is the stored() of records 0..n-1, each stored once.
func once(n int) map[time.Duration]int {
	out := map[time.Duration]int{}
	for i := range n {
		out[time.Duration(i)*time.Millisecond] = 1
	}
	return out
}

// poll waits until cond holds, failing after a deadline.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in 30s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const helperEnv = "CALLLOG_TEST_SPOOL_HELPER"

// TestSpoolHelper is not a test: TestSpoolSurvivesKill runs the test
// binary as a gateway stand-in that logs records, says so, and waits to
// be killed.
func TestSpoolHelper(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestSpoolSurvivesKill")
	}
	st := openStore(t, dir)
	// Batches of 7 are stored as they fill; the last 2 records are not.
	w := New(st, Options{BatchSize: 7, FlushEvery: time.Hour, SpoolDir: filepath.Join(dir, "calllog")})
	for i := range 100 {
		w.ObserveCall(record(i, `{"token":"on-disk-never","i":1}`))
	}
	fmt.Println("observed")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
}

// TestSpoolSurvivesKill: a process that logged records and died of
// SIGKILL right after leaves them in its spool, which no other process
// touches while it lives; Recover then stores each of them exactly once,
// some having been stored before the kill and some not, and deletes the
// spool.
func TestSpoolSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "observed\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	spoolDir := filepath.Join(dir, "calllog")
	st := openStore(t, dir)

	// While the process lives, its spool is its own.
	live := spoolFiles(t, spoolDir)
	if got, err := Recover(t.Context(), st, spoolDir); err != nil || got != (Replayed{}) {
		t.Fatalf("Recover beside a live process = %+v, %v; want nothing done", got, err)
	}
	if diff := cmp.Diff(live, spoolFiles(t, spoolDir)); len(live) != 1 || diff != "" {
		t.Fatalf("spool of the live process %v, then (-before +after):\n%s", live, diff)
	}
	for name := range live {
		b, err := os.ReadFile(filepath.Join(spoolDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "on-disk-never") || !strings.Contains(string(b), "REDACTED") {
			t.Errorf("spool holds arguments unredacted:\n%.300s", b)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	got, err := Recover(t.Context(), st, spoolDir)
	if err != nil || got.Files != 1 || got.Records < 2 || got.Skipped != 0 {
		t.Fatalf("Recover after the kill = %+v, %v; want 1 file, at least the 2 unstored records", got, err)
	}
	if diff := cmp.Diff(once(100), stored(t, st)); diff != "" {
		t.Errorf("stored records after the replay (-want +got):\n%s", diff)
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool files left after the replay: %v", left)
	}
}

// writeSpool writes a dead process's spool file: records from..to-1 and
// then extra bytes.
func writeSpool(t *testing.T, dir string, from, to int, extra string) string {
	t.Helper()
	var b []byte
	for i := from; i < to; i++ {
		rec, err := prepare(record(i, `{"i":1}`))
		if err != nil {
			t.Fatal(err)
		}
		line, err := encodeLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, line...)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("spool-dead%d.jsonl", from))
	if err := os.WriteFile(p, append(b, extra...), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A spool whose process died inside a write ends in a torn line: the
// complete lines are replayed, the torn one and garbage are skipped and
// counted, records keep their arguments byte for byte.
func TestRecoverTornLine(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "calllog")
	writeSpool(t, spoolDir, 0, 3, "not json\n")
	torn := writeSpool(t, spoolDir, 3, 6, "")
	b, _ := os.ReadFile(torn)
	if err := os.WriteFile(torn, b[:len(b)-20], 0o600); err != nil { // record 5 torn
		t.Fatal(err)
	}
	st := openStore(t, dir)
	got, err := Recover(t.Context(), st, spoolDir)
	if want := (Replayed{Files: 2, Records: 5, Skipped: 2}); err != nil || got != want {
		t.Fatalf("Recover = %+v, %v; want %+v", got, err, want)
	}
	if diff := cmp.Diff(once(5), stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	page, _ := st.ListToolCalls(t.Context(), switchboard.ToolCallFilter{Limit: 1})
	if c := page.Calls[0]; string(c.Arguments) != `{"i":1}` || !c.StartedAt.Equal(record(4, "").StartedAt) || c.Tool != "echo" {
		t.Errorf("replayed record %+v", c)
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 {
		t.Errorf("spool files left: %v", left)
	}
	if got, err := Recover(t.Context(), st, filepath.Join(dir, "missing")); err != nil || got != (Replayed{}) {
		t.Errorf("Recover of a missing dir = %+v, %v", got, err)
	}
}

// With the store down, Recover keeps the spool for the next start.
func TestRecoverStoreDown(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "calllog")
	writeSpool(t, spoolDir, 0, 3, "")
	before := spoolFiles(t, spoolDir)
	got, err := Recover(t.Context(), &failing{}, spoolDir)
	if !errors.Is(err, switchboard.ErrUnavailable) || got.Files != 0 {
		t.Fatalf("Recover with the store down = %+v, %v; want ErrUnavailable, no file done", got, err)
	}
	if diff := cmp.Diff(before, spoolFiles(t, spoolDir)); diff != "" {
		t.Fatalf("spool changed by a failed replay (-before +after):\n%s", diff)
	}
	st := openStore(t, dir)
	if got, err := Recover(t.Context(), st, spoolDir); err != nil || got != (Replayed{Files: 1, Records: 3}) {
		t.Fatalf("Recover with the store back = %+v, %v", got, err)
	}
	if diff := cmp.Diff(once(3), stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// gated holds every insert until open is closed.
type gated struct {
	Inserter
	open chan struct{}
}

func (g gated) InsertToolCalls(ctx context.Context, b []switchboard.ToolCallRecord) error {
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Inserter.InsertToolCalls(ctx, b)
}

// Under load that never lets the queue run dry, the spool moves to new
// files past its size limit (none of which Recover takes from the living
// writer), and empties each old one once its records are stored, keeping
// one as the spare for the next move and deleting the others: what is
// left is the current file and the spare, emptied, and gone after Close.
func TestSpoolRotation(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "calllog")
	st := openStore(t, dir)
	g := gated{st, make(chan struct{})}
	w := New(g, Options{BatchSize: 1, FlushEvery: time.Hour, WriteTimeout: time.Minute, SpoolDir: spoolDir, SpoolMaxBytes: 2048})
	release := sync.OnceFunc(func() { close(g.open) })
	t.Cleanup(func() { release(); w.Close(context.Background()) })
	const n = 60
	for i := range n {
		w.ObserveCall(record(i, `{"pad":"`+strings.Repeat("x", 100)+`"}`))
	}
	files := spoolFiles(t, spoolDir)
	if len(files) < 3 {
		t.Fatalf("spool files while the store is held: %v; want several", files)
	}
	for name, size := range files {
		if size > 2048 {
			t.Errorf("spool file %s has %d bytes, limit 2048", name, size)
		}
	}
	if got, err := Recover(t.Context(), st, spoolDir); err != nil || got != (Replayed{}) {
		t.Fatalf("Recover beside the living writer = %+v, %v", got, err)
	}

	release()
	poll(t, "all records written", func() bool { return w.Written() == n })
	left := spoolFiles(t, spoolDir)
	if len(left) == 0 || len(left) > 2 {
		t.Fatalf("spool files after the store caught up: %v; want the current one and at most one spare", left)
	}
	for name, size := range left {
		if _, seen := files[name]; !seen || size != 0 {
			t.Errorf("spool file left: %s (%d bytes); want the current one or the spare, emptied", name, size)
		}
	}
	if diff := cmp.Diff(once(n), stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if left := spoolFiles(t, spoolDir); len(left) != 0 || w.Dropped() != 0 {
		t.Errorf("after Close: spool files %v, %d dropped", left, w.Dropped())
	}
}

// A spool that cannot be written (disk full) costs crash safety, counted,
// never the record or the call.
func TestSpoolWriteFails(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	w := New(st, Options{FlushEvery: time.Hour, SpoolDir: filepath.Join(dir, "calllog")})
	// Make the spool's mapping read-only: the copies fault, as they do
	// when the kernel cannot back a page of the file (disk full).
	if err := syscall.Mprotect(w.spool.cur.mem, syscall.PROT_READ); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		w.ObserveCall(record(i, `{}`))
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w.Unspooled() != 3 || w.Written() != 3 || w.Dropped() != 0 {
		t.Errorf("unspooled %d written %d dropped %d; want 3, 3, 0", w.Unspooled(), w.Written(), w.Dropped())
	}
	if diff := cmp.Diff(once(3), stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// A spool directory that cannot be made leaves the Writer without a
// spool, logging all the same.
func TestSpoolUnavailable(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w := New(st, Options{FlushEvery: time.Hour, SpoolDir: filepath.Join(file, "calllog")})
	if w.spool != nil {
		t.Fatal("spool opened under a regular file")
	}
	w.ObserveCall(record(0, `{}`))
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(once(1), stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}

// A spool line round-trips a record exactly, arguments byte for byte.
func TestSpoolLine(t *testing.T) {
	for name, args := range map[string]json.RawMessage{
		"spaced": json.RawMessage(`{ "text" : "<kept> & as sent" }`),
		"none":   nil,
		"nested": json.RawMessage(`{"a":[1,2,{"b":"\u00e9\n"}]}`),
	} {
		rec := record(7, "")
		rec.Arguments, rec.RecordID, rec.Code, rec.Outcome = args, "0123456789abcdef0123456789abcdef", -32602, switchboard.OutcomeError
		rec.Principal, rec.PrincipalName = "https://id.example.com alice", "alice@example.com"
		line, err := encodeLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeLine(line[:len(line)-1])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(rec, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", name, diff)
		}
	}
}

// The hand-built spool line says what json.Marshal's says: the same
// spoolLine decoded, whatever the strings hold.
func FuzzSpoolLine(f *testing.F) {
	f.Add("sess", "up", "echo", `{"text":"hello"}`, 0)
	f.Add("", "", "nul\\x00\"name\"", `{ "a" : "\u00e9\n\t<&>" }`, -32602)
	f.Add("s\x01\x1f\x7f", "\u2028", "é", "[\"\\\\\"]", 1)
	f.Add("\xff", "ok", "bad\xfe", "null", 0)
	f.Fuzz(func(t *testing.T, session, server, tool, args string, code int) {
		rec := record(3, args)
		rec.RecordID, rec.Session, rec.Server, rec.Tool, rec.Code = "0123456789abcdef0123456789abcdef", session, server, tool, code
		rec.Principal, rec.PrincipalName = "https://id.example.com "+session, tool
		if args == "" {
			rec.Arguments = nil
		}
		got, err := encodeLine(rec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshalLine(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		if got[len(got)-1] != '\n' || bytes.Count(got, []byte("\n")) != 1 {
			t.Fatalf("line %q: want one newline, at the end", got)
		}
		var g, w spoolLine
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("line %q: %v", got, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("decoded line (-json.Marshal +encodeLine):\n%s\n%s\n%s", diff, want, got)
		}
	})
}

// A mapped spool file ends in zero bytes, and one being emptied when its
// process died starts with some, in the middle of a stored record: the
// zeros are no record, the cut record is skipped and counted, the rest
// is replayed.
func TestRecoverZeroBytes(t *testing.T) {
	dir := t.TempDir()
	spoolDir := filepath.Join(dir, "calllog")
	p := writeSpool(t, spoolDir, 0, 4, strings.Repeat("\x00", 4096))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	clear(b[:bytes.IndexByte(b, '\n')]) // record 0 zeroed but for its newline
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := Recover(t.Context(), &failing{}, spoolDir); err == nil || got.Skipped != 0 {
		t.Fatalf("Recover with the store down = %+v, %v; want an error, nothing skipped", got, err)
	}
	clear(b[:bytes.IndexByte(b, '\n')+20]) // record 0 zeroed, record 1 cut
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, dir)
	got, err := Recover(t.Context(), st, spoolDir)
	if want := (Replayed{Files: 1, Records: 2, Skipped: 1}); err != nil || got != want {
		t.Fatalf("Recover = %+v, %v; want %+v", got, err, want)
	}
	want := map[time.Duration]int{2 * time.Millisecond: 1, 3 * time.Millisecond: 1}
	if diff := cmp.Diff(want, stored(t, st)); diff != "" {
		t.Errorf("stored (-want +got):\n%s", diff)
	}
}
