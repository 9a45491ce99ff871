// Package replicas is how gateways sharing one store share what runs on
// them: one lease per thing a replica runs (a hosted server's row, a
// sandbox session), held by "<owner id> <URL>"; the resolution of the
// live replica holding a lease; the hop that hands a request to it (the
// replicas' token, the caller's deadline); and fencing: a replica stops
// what it runs once it can no longer prove it holds the lease (taken by
// another holder, or not renewed for half its time to live), so the next
// holder, which waits for the lease to expire, never runs a second copy.
//
// Hosted servers (hosted/) and sandbox sessions (sandbox/) both use it;
// each decides what running and stopping a thing means.
package replicas

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// Replication is one replica's part in a group of replicas on one store.
// Its exported fields are set before use and not changed after.
type Replication struct {
	Leases switchboard.LeaseStore
	// Owner is this process's owner id (lease.Process.ID); a lease is
	// held by "<owner id> <URL>" (Holder).
	Owner string
	// URL is the base URL other replicas reach this one's internal
	// endpoints at (MCP_SERVER_REPLICA_URL).
	URL string
	// Self is the base URL of this replica's own listener, for what it
	// asks of itself through an internal endpoint.
	Self string
	// Token authenticates replicas to each other (ReplicaTokenHeader).
	Token string
	// TTL of a lease; Tick is the renewal period.
	TTL  time.Duration
	Tick time.Duration
	// Alive reports whether an owner id is a live gateway process (a
	// lease held by a dead one is let go at once).
	Alive func(ctx context.Context, owner string) (bool, error)
	// Client sends the hops; nil is http.DefaultClient.
	Client *http.Client

	mu      sync.Mutex
	renewed map[string]time.Time // the leases this replica holds: last renewed
}

// DefaultHop bounds a hop that carries no deadline.
const DefaultHop = 30 * time.Second

// Holder is this replica's lease holder string, "<owner id> <URL>".
func (r *Replication) Holder() string { return r.Owner + " " + r.URL }

// SplitHolder returns the owner id and the URL of a lease holder string.
func SplitHolder(holder string) (owner, url string) {
	owner, url, _ = strings.Cut(holder, " ")
	return owner, url
}

// live reports whether holder is a live process, or may be (Alive
// failed: the caller must then treat it as alive).
func (r *Replication) live(ctx context.Context, holder string) bool {
	if r.Alive == nil {
		return true
	}
	owner, _ := SplitHolder(holder)
	alive, err := r.Alive(ctx, owner)
	return err != nil || alive
}

// Claim takes name's lease for this replica: free, expired, already its
// own, or held by a dead process (let go first). Errors: ErrConflict (a
// live replica holds it; the message names it), the store's.
func (r *Replication) Claim(ctx context.Context, name string) error {
	_, err := r.Leases.AcquireLease(ctx, name, r.Holder(), r.TTL)
	if errors.Is(err, switchboard.ErrConflict) {
		if holder := r.holderOf(ctx, name); holder != "" && holder != r.Holder() && !r.live(ctx, holder) {
			if rerr := r.Leases.ReleaseLease(ctx, name, holder); rerr == nil {
				_, err = r.Leases.AcquireLease(ctx, name, r.Holder(), r.TTL)
			}
		}
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	if r.renewed == nil {
		r.renewed = map[string]time.Time{}
	}
	r.renewed[name] = time.Now()
	r.mu.Unlock()
	return nil
}

// Release lets name's lease go (when this replica holds it), so another
// replica may take it at once. Errors: the store's (the lease then
// expires by itself).
func (r *Replication) Release(ctx context.Context, name string) error {
	r.mu.Lock()
	delete(r.renewed, name)
	r.mu.Unlock()
	return r.Leases.ReleaseLease(ctx, name, r.Holder())
}

// Renew renews the leases of names, what this replica runs now. lost
// holds those it can no longer prove it holds: another holder has the
// lease, or it was not renewed for half its time to live (the store did
// not answer). The caller must stop running each at once (fencing): the
// next holder starts its own copy once the lease expires. A name stays
// lost at every renewal until the caller stops passing it (or claims it
// again). failed holds
// the renewals that failed and are retried at the next call.
func (r *Replication) Renew(ctx context.Context, names []string) (lost, failed map[string]error) {
	now := time.Now()
	for _, name := range names {
		_, err := r.Leases.AcquireLease(ctx, name, r.Holder(), r.TTL)
		r.mu.Lock()
		if r.renewed == nil {
			r.renewed = map[string]time.Time{}
		}
		last, ok := r.renewed[name]
		if !ok {
			// Running before this replica took note of its lease (claimed
			// elsewhere, or renewed here for the first time).
			last = now
		}
		if err == nil {
			r.renewed[name] = time.Now()
			r.mu.Unlock()
			continue
		}
		late := time.Since(last) > r.TTL/2
		if !ok {
			r.renewed[name] = last
		}
		if errors.Is(err, switchboard.ErrConflict) || late {
			r.mu.Unlock()
			if lost == nil {
				lost = map[string]error{}
			}
			lost[name] = err
			continue
		}
		r.mu.Unlock()
		if failed == nil {
			failed = map[string]error{}
		}
		failed[name] = err
	}
	return lost, failed
}

// holderOf is the holder of name's unexpired lease, "" when none.
func (r *Replication) holderOf(ctx context.Context, name string) string {
	list, err := r.Leases.ListLeases(ctx, name)
	if err != nil {
		return ""
	}
	for _, l := range list {
		if l.Name == name {
			return l.Holder
		}
	}
	return ""
}

// HolderURL is the base URL of the live replica other than this one that
// holds name's lease: "" when this one does, none does, its holder is a
// dead process, or the store cannot tell now.
func (r *Replication) HolderURL(ctx context.Context, name string) string {
	holder := r.holderOf(ctx, name)
	if holder == "" || holder == r.Holder() || !r.live(ctx, holder) {
		return ""
	}
	_, u := SplitHolder(holder)
	return u
}

// HolderURLs maps the names of the leases under prefix that live
// replicas other than this one hold to their base URLs (empty when the
// store cannot tell now).
func (r *Replication) HolderURLs(ctx context.Context, prefix string) map[string]string {
	out := map[string]string{}
	list, err := r.Leases.ListLeases(ctx, prefix)
	if err != nil {
		return out
	}
	for _, l := range list {
		if l.Holder == r.Holder() || !r.live(ctx, l.Holder) {
			continue
		}
		_, u := SplitHolder(l.Holder)
		out[l.Name] = u
	}
	return out
}

// ErrNotDelivered: the replica a hop was sent to refused the connection
// (it is stopping, or gone); nothing ran there.
var ErrNotDelivered = switchboard.Errorf(switchboard.ErrUnavailable, "the replica it was handed to is stopping")

// Post sends one hop to another replica: body to url with hdr, the
// replicas' token and the time left of ctx's deadline, cancelled with
// ctx. A refused connection is ErrNotDelivered.
func (r *Replication) Post(ctx context.Context, url string, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set(switchboard.ReplicaTokenHeader, r.Token)
	if ms, ok := switchboard.DeadlineLeft(ctx); ok {
		req.Header.Set(switchboard.DeadlineHeader, ms)
	}
	client := r.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return nil, ErrNotDelivered
	}
	return resp, err
}

// ReplicaOnly serves h to requests carrying token in ReplicaTokenHeader
// (compared in constant time) and 401 to any other; an empty token
// refuses everything.
func ReplicaOnly(token string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(switchboard.ReplicaTokenHeader)
		if token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// HopContext bounds a request from another replica by the deadline it
// carries (DeadlineHeader), or DefaultHop when it carries none.
func HopContext(r *http.Request) (context.Context, context.CancelFunc) {
	d := DefaultHop
	if ms, err := strconv.ParseInt(r.Header.Get(switchboard.DeadlineHeader), 10, 64); err == nil && ms > 0 {
		d = time.Duration(ms) * time.Millisecond
	}
	return context.WithTimeout(r.Context(), d)
}
