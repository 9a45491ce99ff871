package calllog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard"
)

// The spool makes a record survive the death of the process between the
// call's answer and the batched insert: ObserveCall copies it, before the
// response is sent, into the spool file mapped shared into memory
// (mmap). The mapped pages are the kernel's page cache, so once the copy
// is done the bytes are the file's: kill -9 loses nothing, and no system
// call is made per record (a write(2) per call cost 3-5 µs here, the
// largest part of the log's work before the answer). A machine crash may
// lose records, as there is no fsync per record.
//
// Each Writer owns one file, spool-<random>.jsonl, and holds an exclusive
// flock on it for as long as it lives, so replicas can share a data
// directory: a file whose lock can be taken belongs to a dead process,
// and Recover replays it. The file has a fixed size (SpoolMaxBytes, a
// sparse file whose blocks the kernel allocates as records reach them):
// records are lines from its start, the rest is zero bytes. It is
// emptied (zeroed up to its last record, in order, so a process killed
// meanwhile leaves only records already stored) whenever every record in
// it is settled (stored, or counted as dropped). Under load that never
// lets the queue run dry, a full file is left for the spare: the older
// file, emptied once its last record was settled, so two files take
// turns and their pages stay in memory (a new file's pages each cost a
// fault and a block allocation on first touch, about as much as the
// write(2) the mapping saves); a new file is made only when the spare is
// not settled yet. A page the kernel cannot back (disk full) faults the
// copy: that record is counted as unspooled, never a crash.

// spoolPattern matches spool files; the random part keeps replicas apart.
const spoolPattern = "spool-*.jsonl"

// spool is a Writer's own spool file, and the older ones it rotated away
// from that still hold unsettled records.
type spool struct {
	dir      string
	maxBytes int64

	mu  sync.Mutex
	cur *segment
	// spare is a settled file, zeroed, that the next rotation reuses: its
	// pages are in memory and on disk already, where a new file's would
	// each cost a page fault and a block allocation on first touch.
	spare  *segment
	closed bool
}

// segment is one spool file, mapped.
type segment struct {
	f       *os.File
	path    string
	mem     []byte // the whole file, mapped shared
	size    int    // bytes of records from the start of mem
	pending int    // records written and not yet settled
}

// spoolLine is a record as the spool holds it. Arguments are a string so
// the replayed bytes are the logged ones (a RawMessage would be
// compacted); the duration keeps its nanoseconds.
type spoolLine struct {
	RecordID  string    `json:"record_id"`
	ProjectID string    `json:"project"`
	Session   string    `json:"session,omitempty"`
	Server    string    `json:"server,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Arguments *string   `json:"arguments,omitempty"`
	Outcome   string    `json:"outcome"`
	Code      int       `json:"code,omitempty"`
	Duration  int64     `json:"duration_ns"`
	StartedAt time.Time `json:"started_at"`

	Principal     string `json:"principal,omitempty"`
	PrincipalName string `json:"principal_name,omitempty"`
}

// encodeLine is a record's spool line: a spoolLine as encoding/json
// writes it (what decodeLine reads), built by hand because it is made on
// every call before the answer (about a microsecond and five allocations
// less than json.Marshal). A string that is not valid UTF-8, or a start
// time json.Marshal refuses, takes json.Marshal's path, for its exact
// behaviour.
func encodeLine(rec switchboard.ToolCallRecord) ([]byte, error) {
	return appendLine(nil, rec)
}

// appendLine appends rec's spool line, with its newline, to b.
func appendLine(b []byte, rec switchboard.ToolCallRecord) ([]byte, error) {
	if y := rec.StartedAt.Year(); y < 0 || y > 9999 ||
		!utf8.ValidString(rec.RecordID) || !utf8.ValidString(rec.ProjectID) || !utf8.ValidString(rec.Session) ||
		!utf8.ValidString(rec.Server) || !utf8.ValidString(rec.Tool) || !utf8.Valid(rec.Arguments) ||
		!utf8.ValidString(rec.Principal) || !utf8.ValidString(rec.PrincipalName) {
		return marshalLine(b, rec)
	}
	b = append(b, `{"record_id":`...)
	b = appendString(b, rec.RecordID)
	b = append(b, `,"project":`...)
	b = appendString(b, rec.ProjectID)
	for _, f := range [...]struct{ name, v string }{{`,"session":`, rec.Session}, {`,"server":`, rec.Server}, {`,"tool":`, rec.Tool}, {`,"kind":`, rec.Kind}} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, f.v)
		}
	}
	if rec.Arguments != nil {
		b = append(b, `,"arguments":`...)
		b = appendString(b, rec.Arguments)
	}
	b = append(b, `,"outcome":`...)
	b = appendString(b, rec.Outcome)
	if rec.Code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(rec.Code), 10)
	}
	b = append(b, `,"duration_ns":`...)
	b = strconv.AppendInt(b, int64(rec.Duration), 10)
	b = append(b, `,"started_at":"`...)
	b = rec.StartedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	for _, f := range [...]struct{ name, v string }{{`,"principal":`, rec.Principal}, {`,"principal_name":`, rec.PrincipalName}} {
		if f.v != "" {
			b = append(b, f.name...)
			b = appendString(b, f.v)
		}
	}
	return append(b, "}\n"...), nil
}

// marshalLine is appendLine by encoding/json.
func marshalLine(b []byte, rec switchboard.ToolCallRecord) ([]byte, error) {
	l := spoolLine{RecordID: rec.RecordID, ProjectID: rec.ProjectID, Session: rec.Session, Server: rec.Server, Tool: rec.Tool, Kind: rec.Kind,
		Outcome: rec.Outcome, Code: rec.Code, Duration: int64(rec.Duration), StartedAt: rec.StartedAt,
		Principal: rec.Principal, PrincipalName: rec.PrincipalName}
	if rec.Arguments != nil {
		a := string(rec.Arguments)
		l.Arguments = &a
	}
	j, err := json.Marshal(l)
	if err != nil {
		return b, err
	}
	b = append(b, j...)
	return append(b, '\n'), nil
}

// appendString appends s, valid UTF-8, as a JSON string: quotes,
// backslashes and control characters escaped; everything else as it is,
// which any JSON decoder reads back as s.
func appendString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func decodeLine(b []byte) (switchboard.ToolCallRecord, error) {
	var l spoolLine
	if err := json.Unmarshal(b, &l); err != nil {
		return switchboard.ToolCallRecord{}, err
	}
	rec := switchboard.ToolCallRecord{RecordID: l.RecordID, ProjectID: l.ProjectID, Session: l.Session, Server: l.Server, Tool: l.Tool, Kind: l.Kind,
		Outcome: l.Outcome, Code: l.Code, Duration: time.Duration(l.Duration), StartedAt: l.StartedAt,
		Principal: l.Principal, PrincipalName: l.PrincipalName}
	if l.Arguments != nil {
		rec.Arguments = json.RawMessage(*l.Arguments)
	}
	if rec.RecordID == "" {
		return rec, errors.New("no record id")
	}
	return rec, rec.Validate()
}

func openSpool(dir string, maxBytes int64) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	seg, err := newSegment(dir, maxBytes)
	if err != nil {
		return nil, err
	}
	return &spool{dir: dir, maxBytes: maxBytes, cur: seg}, nil
}

// newSegment creates a spool file of size bytes, locks it and maps it.
// Between the create and the lock, a starting replica's Recover may take
// the empty file for a dead process's and delete it; then the lock fails,
// or succeeds on a file no longer in the directory, and a new name is
// tried.
func newSegment(dir string, size int64) (*segment, error) {
	for range 5 {
		p := filepath.Join(dir, "spool-"+randomHex(8)+".jsonl")
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				continue
			}
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if !linked(f, p) {
			f.Close()
			continue
		}
		seg := &segment{f: f, path: p}
		if err := seg.mmap(size); err != nil {
			return nil, errors.Join(err, os.Remove(p), f.Close())
		}
		return seg, nil
	}
	return nil, fmt.Errorf("spool files in %s keep being taken by another process", dir)
}

// mmap sizes the file (sparse) and maps it shared.
func (seg *segment) mmap(size int64) error {
	if size <= 0 || int64(int(size)) != size {
		return fmt.Errorf("spool size %d", size)
	}
	if err := seg.f.Truncate(size); err != nil {
		return err
	}
	mem, err := syscall.Mmap(int(seg.f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map %s: %w", seg.path, err)
	}
	seg.mem = mem
	return nil
}

// put copies line after the records in seg. A fault (the kernel could not
// back the page: disk full) is an error, not a crash.
func (seg *segment) put(line []byte) error {
	return guard(seg.path, func() { copy(seg.mem[seg.size:], line) })
}

// guard runs f, which touches a mapped file, turning a memory fault into
// an error instead of the process's death.
func guard(path string, f func()) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fault, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("spool %s: fault at %#x: %v", path, fault.Addr(), r)
		}
	}()
	f()
	return nil
}

// linked reports whether path still names f's file.
func linked(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// errSpoolClosed is append's answer after close.
var errSpoolClosed = errors.New("spool closed")

// append adds line to the spool and returns the segment that holds it,
// to be settled later. It copies line into the mapped file and makes no
// system call, but when the file is full: then the spool moves to a new
// file (rare: the queue has not run dry for maxBytes of records, so the
// few system calls are paid on a call). A line is copied whole or not
// counted; kill -9 in the middle of one leaves a torn last line, of a
// call not yet answered.
func (s *spool) append(line []byte) (*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSpoolClosed
	}
	if s.cur.size+len(line) > len(s.cur.mem) {
		if err := s.rotate(len(line)); err != nil {
			return nil, err
		}
	}
	seg := s.cur
	if err := seg.put(line); err != nil {
		return nil, err
	}
	seg.size += len(line)
	seg.pending++
	return seg, nil
}

// rotate moves the spool to the spare file, or to a new one when there is
// none or line (need bytes) is larger; s.mu is held. The old file keeps
// its records until they are settled.
func (s *spool) rotate(need int) error {
	next := s.spare
	s.spare = nil
	if next == nil || len(next.mem) < need {
		if next != nil {
			_ = s.retire(next)
		}
		var err error
		if next, err = newSegment(s.dir, max(s.maxBytes, int64(need))); err != nil {
			return err
		}
	}
	old := s.cur
	s.cur = next
	if old.pending == 0 { // empty: the line did not fit in it at all
		s.keep(old)
	}
	return nil
}

// keep makes seg, settled and zeroed, the spare, unless there is one or
// seg has an odd size (a line larger than maxBytes): then it is deleted.
// s.mu is held.
func (s *spool) keep(seg *segment) {
	if s.spare != nil || s.closed || int64(len(seg.mem)) != s.maxBytes {
		_ = s.retire(seg)
		return
	}
	s.spare = seg
}

// settle marks the records of batch as stored or dropped. A file whose
// records are all settled is emptied: the current one in place, an older
// one outside the lock (no call writes to it any more) to become the
// spare.
func (s *spool) settle(batch []queued) error {
	errs, done := s.settleLocked(batch)
	for _, seg := range done {
		err := guard(seg.path, func() { clear(seg.mem[:seg.size]) })
		s.mu.Lock()
		if err != nil {
			errs = append(errs, err, s.retire(seg))
		} else {
			seg.size = 0
			s.keep(seg)
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// settleLocked counts batch off its files and empties the current one if
// it is done; it returns the older files that are done.
func (s *spool) settleLocked(batch []queued) (errs []error, done []*segment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range batch {
		seg := q.seg
		if seg == nil {
			continue
		}
		if seg.pending--; seg.pending > 0 {
			continue
		}
		switch {
		case seg != s.cur:
			done = append(done, seg)
		case seg.size > 0 && !s.closed:
			// Zeroed from the start: killed meanwhile, the file holds
			// stored records and a zeroed head, which Recover skips.
			if err := guard(seg.path, func() { clear(seg.mem[:seg.size]) }); err != nil {
				errs = append(errs, err)
				continue
			}
			seg.size = 0
		}
	}
	return errs, done
}

// retire deletes a settled file, then lets go of its mapping and lock.
func (s *spool) retire(seg *segment) error {
	err := os.Remove(seg.path)
	return errors.Join(err, seg.release())
}

// release unmaps seg and closes its file, letting go of the lock.
func (seg *segment) release() error {
	var err error
	if seg.mem != nil {
		err = syscall.Munmap(seg.mem)
		seg.mem = nil
	}
	return errors.Join(err, seg.f.Close())
}

// close deletes the current file when every record in it is settled and
// keeps it for Recover otherwise (Close gave up before the last flush).
// Either way the lock goes.
func (s *spool) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.spare != nil {
		err = s.retire(s.spare)
		s.spare = nil
	}
	if s.cur.pending == 0 {
		return errors.Join(err, s.retire(s.cur))
	}
	return errors.Join(err, s.cur.release())
}

// Replayed counts what Recover did.
type Replayed struct {
	Files   int // spool files of dead processes replayed and deleted
	Records int // records sent to the store (some may have been there already)
	Skipped int // torn or unreadable lines
}

// replayBatch is the size of Recover's inserts.
const replayBatch = 256

// Recover replays into st the spool files in dir that belong to no live
// process (their lock can be taken): every complete line, as records the
// store keeps once however often they come, so a record stored before the
// crash is not doubled. A torn last line (the process died inside the
// write) is skipped and counted. A replayed file is deleted. If the store
// fails, Recover stops and returns its error with what it did so far; the
// files left are replayed by the next Recover. A missing dir is not an
// error.
func Recover(ctx context.Context, st Inserter, dir string) (Replayed, error) {
	var done Replayed
	paths, err := filepath.Glob(filepath.Join(dir, spoolPattern))
	if err != nil {
		return done, err
	}
	var errs []error
	for _, p := range paths {
		n, skipped, err := replayFile(ctx, st, p)
		done.Skipped += skipped
		if err != nil {
			errs = append(errs, fmt.Errorf("spool %s: %w", p, err))
			if errors.Is(err, errStore) {
				break
			}
			continue
		}
		if n >= 0 {
			done.Files++
			done.Records += n
		}
	}
	return done, errors.Join(errs...)
}

// errStore marks a replay that failed in the store, not in the file.
var errStore = errors.New("store")

// replayFile replays one spool file if no process holds it; n is -1 when
// one does.
func replayFile(ctx context.Context, st Inserter, path string) (n, skipped int, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1, 0, nil // replayed by another process meanwhile
	}
	if err != nil {
		return -1, 0, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return -1, 0, nil // a live process's
		}
		return -1, 0, err
	}
	if !linked(f, path) {
		return -1, 0, nil // another process replayed and deleted it first
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return -1, 0, err
	}
	var batch []switchboard.ToolCallRecord
	for len(data) > 0 {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		// Zero bytes: a file's unused end, or the head of one that was
		// being emptied (its records stored) when the process died.
		line = bytes.TrimLeft(line, "\x00")
		if !complete {
			if len(line) > 0 {
				skipped++ // torn: the process died inside the copy
			}
			break
		}
		if len(line) == 0 {
			continue // zeros only: no record
		}
		rec, err := decodeLine(line)
		if err != nil {
			skipped++
			continue
		}
		batch = append(batch, rec)
	}
	for b := range slices.Chunk(batch, replayBatch) {
		if err := st.InsertToolCalls(ctx, b); err != nil {
			return -1, skipped, fmt.Errorf("%w: %w", errStore, err)
		}
	}
	if err := os.Remove(path); err != nil {
		return -1, skipped, err
	}
	return len(batch), skipped, nil
}
