// Package lease is how a gateway process proves that the containers it
// labelled are still its own: it holds a lease "gateway/<owner id>" in
// the store, renewed while it runs and released when it stops, and its
// owner id names the process (boot, PID namespace, PID and start time,
// and a random tag).
//
// On the same host (the same boot and PID namespace) the process table
// decides, lease or not: a process that no longer exists is dead at once
// (a gateway restarted after kill -9 removes what its predecessor left
// without waiting out the lease), and one that runs is alive whatever
// store it keeps its lease in (a gateway on another data dir or database
// with the same instance name). Elsewhere an owner is alive while its
// lease in this store is unexpired. A second gateway started on the same
// data dir, or a replica sharing the database, sees the first one alive
// and leaves its containers alone.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Store is what a Process needs from the gateway's store.
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (switchboard.Lease, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	ListLeases(ctx context.Context, prefix string) ([]switchboard.Lease, error)
}

// Prefix is the name prefix of gateway processes' own leases.
const Prefix = "gateway/"

// DefaultTTL is how long an owner is taken to be alive after its last
// renewal when nothing on this host can tell sooner; renewals run every
// third of it.
const DefaultTTL = 30 * time.Second

// Options configure a Process.
type Options struct {
	TTL    time.Duration // default DefaultTTL; tests shorten it
	Logger *slog.Logger
}

// Process is this gateway process's lease.
type Process struct {
	st   Store
	id   string
	self ident
	ttl  time.Duration
	log  *slog.Logger

	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// Start takes this process's lease and keeps renewing it until Close.
// Errors: the store's.
func Start(ctx context.Context, st Store, opts Options) (*Process, error) {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	self := current()
	p := &Process{st: st, id: self.String(), self: self, ttl: opts.TTL, log: opts.Logger}
	if _, err := st.AcquireLease(ctx, Prefix+p.id, p.id, p.ttl); err != nil {
		return nil, fmt.Errorf("taking this gateway process's lease: %w", err)
	}
	openOwners.add(p.id)
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.stop = cancel
	p.wg.Go(func() { p.renew(rctx) })
	return p, nil
}

// ID is this process's owner id, the value of the owner label on every
// container it creates.
func (p *Process) ID() string { return p.id }

// TTL is the lease's time to live.
func (p *Process) TTL() time.Duration { return p.ttl }

func (p *Process) renew(ctx context.Context) {
	t := time.NewTicker(p.ttl / 3)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, p.ttl/3)
		_, err := p.st.AcquireLease(cctx, Prefix+p.id, p.id, p.ttl)
		cancel()
		switch {
		case err != nil && !failing:
			failing = true
			p.log.Error("renewing this gateway's lease failed; past its expiry, replicas may take this process's containers for leftovers", "ttl", p.ttl, "err", err)
		case err == nil && failing:
			failing = false
			p.log.Info("this gateway's lease is renewed again")
		}
	}
}

// Close stops renewing and releases the lease, so no process waits for
// it to expire. It is idempotent.
func (p *Process) Close(ctx context.Context) error {
	var err error
	p.closed.Do(func() {
		p.stop()
		p.wg.Wait()
		openOwners.remove(p.id)
		err = p.st.ReleaseLease(ctx, Prefix+p.id, p.id)
	})
	return err
}

// Alive reports whether owner (an owner id, or any label value left by
// an older gateway) is a live gateway process. Errors: the store's; the
// caller must then treat the owner as alive.
func (p *Process) Alive(ctx context.Context, owner string) (bool, error) {
	if owner == p.id {
		return true, nil
	}
	o, ok := parse(owner)
	if !ok {
		return false, nil // no gateway process of this kind labels so
	}
	if o.sameHost(p.self) {
		// Here /proc decides, whatever store the owner uses: a gateway on
		// another data dir or database holds its lease in its own store,
		// where ours cannot see it, and a live one must never be taken for
		// gone (issue 33). In this very process (tests run several
		// gateways in one), the owners still open are known.
		if o.pid == p.self.pid && o.start == p.self.start {
			return openOwners.has(owner), nil
		}
		return o.running(), nil
	}
	list, err := p.st.ListLeases(ctx, Prefix+owner)
	if err != nil {
		return true, err
	}
	for _, l := range list {
		if l.Name == Prefix+owner {
			return true, nil
		}
	}
	return false, nil
}

// openOwners holds the owner ids of this process's Processes not yet closed.
var openOwners = &owners{ids: map[string]bool{}}

type owners struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (o *owners) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids[id] = true
}

func (o *owners) remove(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.ids, id)
}

func (o *owners) has(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids[id]
}

// ident names one gateway in one process for as long as its host runs:
// the kernel's boot id, the PID namespace, the PID, the start time in
// clock ticks since boot (which tells a reused PID from the original),
// and a random tag (two gateways in one process, as tests run them).
type ident struct {
	boot  string
	pidNS uint64
	pid   int
	start uint64
	tag   string
}

func (i ident) String() string {
	return fmt.Sprintf("%s-%d-%d-%d-%s", i.boot, i.pidNS, i.pid, i.start, i.tag)
}

func parse(s string) (ident, bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 5 || len(parts[0]) != 8 || parts[4] == "" {
		return ident{}, false
	}
	ns, err1 := strconv.ParseUint(parts[1], 10, 64)
	pid, err2 := strconv.Atoi(parts[2])
	start, err3 := strconv.ParseUint(parts[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || pid <= 0 {
		return ident{}, false
	}
	return ident{boot: parts[0], pidNS: ns, pid: pid, start: start, tag: parts[4]}, true
}

// sameHost: the PID and start time of o mean something here.
func (i ident) sameHost(self ident) bool {
	return i.boot == self.boot && i.pidNS == self.pidNS && self.boot != "00000000"
}

// running reports whether the process i names still runs.
func (i ident) running() bool {
	st, ok := startTime(i.pid)
	return ok && st == i.start
}

// current is this process's ident. Where /proc cannot tell (not Linux),
// the boot id is zeros and only the lease decides.
func current() ident {
	id := ident{boot: "00000000", pid: os.Getpid()}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil && len(b) >= 8 {
		id.boot = string(b[:8])
	}
	if l, err := os.Readlink("/proc/self/ns/pid"); err == nil {
		// "pid:[4026531836]"
		id.pidNS, _ = strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(l, "pid:["), "]"), 10, 64)
	}
	id.start, _ = startTime(id.pid)
	var b [3]byte
	_, _ = rand.Read(b[:])
	id.tag = hex.EncodeToString(b[:])
	return id
}

// startTime reads field 22 of /proc/pid/stat (after the parenthesized
// command, which may hold spaces and parentheses).
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 is f[19]. A zombie has ended.
	if len(f) < 20 || f[0] == "Z" {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}
