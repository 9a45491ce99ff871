package hosted

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/replicas"
)

// Replicas sharing one store share its hosted servers: each row has one
// owner, the replica holding the lease "hosted/<row id>", which alone
// runs its container; every other replica serves the server's tools
// through the owner. A reconcile loop on every replica (Replication.Tick)
// renews the leases it holds, takes the lease of each row without a live
// owner (removing, on a shared engine, whatever container of that row a
// dead owner left before it starts its own), follows rows registered,
// changed or deleted through other replicas, and tells the project hub
// when a project's specs change. An owner that cannot renew a lease for
// half its time to live stops that container (self-fencing), so the new
// owner, which waits for the lease to expire, never runs a second copy.

// Replication makes a Service share its rows with the replicas on the
// same store (replicas.Replication, one for the whole gateway).
type Replication = replicas.Replication

// InternalPrefix is the path of the inter-replica endpoint of hosted
// servers: POST {prefix}{row id}/mcp relays one JSON-RPC message to the
// row's container, {row id}/restart and {row id}/delete act on it.
const InternalPrefix = "/internal/v1/hosted/"

const (
	leasePrefix = "hosted/"
	// forwardedHeader marks a hop from a replica to the owner it
	// resolved: an owner that no longer is answers 421 instead of
	// forwarding again, and the sender resolves anew.
	forwardedHeader = "X-Switchboard-Forwarded"
	maxRelayBody    = 16 << 20
)

// remoteRow is a row another replica owns (or no replica, during a
// take-over), as this replica serves it.
type remoteRow struct {
	id, project string
	plan        plan
	key         string // the registration as JSON: what a change compares
	holder      string // the lease's holder, "" while none
	row         switchboard.Workspace
}

func regKey(p plan) string {
	b, _ := json.Marshal(p.reg)
	return string(b)
}

// replicated reports whether rows are shared through leases.
func (s *Service) replicated() bool { return s.opts.Replication != nil }

// claim takes the lease of a row this replica just created (a
// registration, a servers-file entry); a new row's lease is free.
func (s *Service) claim(ctx context.Context, rowID string) {
	r := s.opts.Replication
	if r == nil {
		return
	}
	if err := r.Claim(ctx, leasePrefix+rowID); err != nil {
		s.log.Warn("taking the lease of a new hosted server", "hosted_id", rowID, "err", err)
	}
}

// startReplicas reconciles once, then runs two loops until Close, each
// every Tick: the renewer, which nothing else may delay (a lease not
// renewed for half its time to live stops its container), and the
// reconciler.
func (s *Service) startReplicas(ctx context.Context) {
	s.reconcile(ctx)
	every := func(fn func(context.Context), bound time.Duration) {
		t := time.NewTicker(s.opts.Replication.Tick)
		defer t.Stop()
		for {
			select {
			case <-s.loopCtx.Done():
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(s.loopCtx, bound)
			fn(ctx)
			cancel()
		}
	}
	s.loopWG.Go(func() { every(s.renew, s.opts.Replication.TTL/3) })
	s.loopWG.Go(func() { every(s.reconcile, s.opts.Replication.TTL) })
}

// changedProject tells the hub in the background, on a context of its
// own (not a tick's): applying a changed spec may connect it, which waits
// for the container this replica is about to start.
// It returns the change's generation: applied[project] reaches it once
// the hub has applied the project's specs.
func (s *Service) changedProject(project string) uint64 {
	s.mu.Lock()
	s.chGen++
	gen := s.chGen
	s.mu.Unlock()
	s.loopWG.Go(func() {
		ctx, cancel := context.WithTimeout(s.loopCtx, 30*time.Second)
		defer cancel()
		s.opts.Changed(ctx, project)
		s.mu.Lock()
		if s.applied[project] < gen {
			s.applied[project] = gen
		}
		s.mu.Unlock()
	})
	return gen
}

// renew renews the lease of every row this replica runs; a lease it can
// no longer prove it holds (replicas.Replication.Renew) stops the row's
// container (in the background: the other renewals go on).
func (s *Service) renew(ctx context.Context) {
	s.mu.Lock()
	owned := make(map[string]*supervisor, len(s.sups))
	names := make([]string, 0, len(s.sups))
	for id, sup := range s.sups {
		owned[leasePrefix+id] = sup
		names = append(names, leasePrefix+id)
	}
	s.mu.Unlock()
	lost, failed := s.opts.Replication.Renew(ctx, names)
	for name, err := range lost {
		sup := owned[name]
		s.loopWG.Go(func() { s.fence(sup, err) })
	}
	for name, err := range failed {
		s.log.Warn("renewing a hosted server's lease failed; retried next tick", "hosted_id", strings.TrimPrefix(name, leasePrefix), "err", err)
	}
}

// reconcile is one pass of the reconciler: take over, follow changes.
func (s *Service) reconcile(ctx context.Context) {
	changed := map[string]bool{}
	defer func() {
		for p := range changed {
			s.changedProject(p)
		}
	}()
	take := s.reconcileRows(ctx, changed)
	// The take-overs' engine work is done without regMu: registrations
	// and deletions of this replica do not wait for it, nor it for them.
	for _, t := range take {
		if _, err := s.st.GetWorkspace(ctx, t.row.ID); errors.Is(err, switchboard.ErrNotFound) {
			// Deleted since it was listed (a registration that failed, a
			// delete through another replica).
			s.release(context.WithoutCancel(ctx), t.row.ID)
		} else if s.takeOver(ctx, t.row, t.p, t.prev) {
			changed[t.row.ProjectID] = true
		}
		s.unreserve(t.row.ProjectID, t.p.reg.Name)
	}
}

// takeItem is a row whose lease reconcileRows took, to take over.
type takeItem struct {
	row  switchboard.Workspace
	p    plan
	prev string // the lease's holder before ("" when it was free)
}

// reconcileRows is reconcile's pass over the rows, under regMu: it
// follows changes and returns the rows whose lease it took.
func (s *Service) reconcileRows(ctx context.Context, changed map[string]bool) []takeItem {
	var take []takeItem
	r := s.opts.Replication
	me := r.Holder()
	// Deletions and servers-file changes of this replica hold regMu from
	// the row's write to its supervisor's, and a registration reserves
	// its name for as long: a row seen here is either theirs, done, or
	// not begun.
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	before := make(map[string]*supervisor, len(s.sups))
	for id, sup := range s.sups {
		before[id] = sup
	}
	s.mu.Unlock()
	rows, err := s.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerMCPServer})
	if err != nil {
		s.log.Debug("listing hosted servers", "err", err)
		return nil
	}
	leases, err := r.Leases.ListLeases(ctx, leasePrefix)
	if err != nil {
		s.log.Debug("listing hosted servers' leases", "err", err)
		return nil
	}
	holders := map[string]string{}
	for _, l := range leases {
		holders[strings.TrimPrefix(l.Name, leasePrefix)] = l.Holder
	}
	live := map[string]string{} // holder -> URL, for live replicas other than this one
	for name, u := range r.HolderURLs(ctx, leasePrefix) {
		live[holders[strings.TrimPrefix(name, leasePrefix)]] = u
	}
	s.mu.Lock()
	remoteBefore := make(map[string]bool, len(s.remote))
	for id := range s.remote {
		remoteBefore[id] = true
	}
	s.mu.Unlock()
	seen := map[string]bool{}
	for _, row := range rows {
		seen[row.ID] = true
		p, _, err := decodeRow(s.opts.Box, row)
		if err != nil {
			continue // logged by the replica that stored it
		}
		key := regKey(p)
		s.mu.Lock()
		sup, closed, registering := s.sups[row.ID], s.closed, s.registering[regName{row.ProjectID, p.reg.Name}]
		s.mu.Unlock()
		if closed {
			return take // their leases are let go by takeOver
		}
		if sup == nil && registering {
			continue // a registration of this replica in progress: its row
		}
		if sup != nil {
			if before[row.ID] == sup && regKey(sup.plan) != key {
				s.replace(sup, row, p)
				changed[row.ProjectID] = true
			}
			continue
		}
		holder := holders[row.ID]
		if holder == "" || holder == me || live[holder] == "" {
			// Free, this replica's, or a dead process's (Claim lets it go).
			if err := r.Claim(ctx, leasePrefix+row.ID); err == nil {
				// Its name is the take-over's until the supervisor is
				// installed: no registration or servers-file entry of this
				// replica makes a second row of it meanwhile.
				s.reserve(row.ProjectID, p.reg.Name)
				take = append(take, takeItem{row, p, holder})
				continue
			}
			holder = ""
		}
		s.mu.Lock()
		rem := s.remote[row.ID]
		switch {
		case rem == nil:
			rem = &remoteRow{id: row.ID, project: row.ProjectID, plan: p, key: key}
			s.remote[row.ID] = rem
			changed[row.ProjectID] = true
		case rem.key != key:
			rem.plan, rem.key = p, key
			changed[row.ProjectID] = true
		}
		rem.holder, rem.row = holder, row
		s.mu.Unlock()
	}
	// Rows deleted elsewhere (or with their project).
	var gone []*supervisor
	s.mu.Lock()
	for id, sup := range before {
		if !seen[id] && s.sups[id] == sup {
			delete(s.sups, id)
			gone = append(gone, sup)
		}
	}
	for id := range remoteBefore {
		if rem := s.remote[id]; rem != nil && !seen[id] {
			delete(s.remote, id)
			changed[rem.project] = true
		}
	}
	s.mu.Unlock()
	for _, sup := range gone {
		s.changedProject(sup.project)
		sup.close(s.timing.StopTimeout)
		s.cleanup(context.WithoutCancel(ctx), sup.id, sup.plan, false)
		s.release(context.WithoutCancel(ctx), sup.id)
		s.log.Info("hosted server deleted through another replica; its container and volumes are removed", "project", sup.project, "server", sup.plan.reg.Name)
	}
	return take
}

// regName is a project's server name.
type regName struct{ project, name string }

// reserve marks name as a registration's or a take-over's in progress;
// unreserve ends it.
func (s *Service) reserve(project, name string) {
	s.mu.Lock()
	s.registering[regName{project, name}] = true
	s.mu.Unlock()
}

func (s *Service) unreserve(project, name string) {
	s.mu.Lock()
	delete(s.registering, regName{project, name})
	s.mu.Unlock()
}

// reserved reports whether a registration or take-over of name is in
// progress.
func (s *Service) reserved(project, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registering[regName{project, name}]
}

// takeOver starts the container of a row whose lease this replica just
// took, after removing any container of the row a previous owner left on
// this engine (removed, not adopted: the MCP session on a container's
// stdio belongs to the attach stream that initialized it). It reports
// false when the service is closing (the lease is let go).
// prev, the lease's holder before, says which it was: a replica that
// ended, or an earlier run of this very gateway (same address: a
// restart, which is not a take-over to whoever runs one gateway).
func (s *Service) takeOver(ctx context.Context, row switchboard.Workspace, p plan, prev string) bool {
	if s.eng != nil {
		ids, err := s.eng.TakeOver(ctx, map[string]string{engine.LabelKind: KindMCPServer, engine.LabelRef: row.ID})
		if err != nil {
			s.log.Warn("removing the container a previous owner left; the start removes it again", "hosted_id", row.ID, "err", err)
		}
		if len(ids) > 0 {
			s.log.Info("removed the container of a hosted server left by its previous owner", "project", row.ProjectID, "server", p.reg.Name, "containers", len(ids))
		}
	}
	sup := s.install(row, p)
	if sup == nil {
		s.release(context.WithoutCancel(ctx), row.ID)
		return false
	}
	s.mu.Lock()
	delete(s.remote, row.ID)
	s.mu.Unlock()
	_, prevURL := replicas.SplitHolder(prev)
	switch r := s.opts.Replication; {
	case prev == "" || r == nil || prevURL == r.URL:
		s.log.Info("hosted server started again: this gateway's previous run ended", "project", row.ProjectID, "server", p.reg.Name, "hosted_id", row.ID)
	default:
		s.log.Info("hosted server taken over: the replica that ran it ended; this one runs it now", "project", row.ProjectID, "server", p.reg.Name, "hosted_id", row.ID, "previous_replica", prevURL)
	}
	gen := s.changedProject(row.ProjectID)
	s.mu.Lock()
	s.need[row.ID] = gen
	s.mu.Unlock()
	if s.eng == nil {
		sup.fail(s.errNoEngine())
	} else {
		sup.start("", nil)
	}
	return true
}

// replace restarts an owned row whose registration changed through
// another replica (the container is new, the volumes stay).
func (s *Service) replace(old *supervisor, row switchboard.Workspace, p plan) {
	old.close(s.timing.StopTimeout)
	sup := s.install(row, p)
	if sup == nil {
		return
	}
	s.log.Info("hosted server changed through another replica; new container", "project", row.ProjectID, "server", p.reg.Name)
	if s.eng == nil {
		sup.fail(s.errNoEngine())
		return
	}
	sup.start("", nil)
}

// fence stops a row's container when its lease is lost or could not be
// renewed for half its time to live: another replica may own it soon.
func (s *Service) fence(sup *supervisor, why error) {
	s.log.Error("hosted server's lease lost or not renewed in time; stopping its container so no second copy runs", "project", sup.project, "server", sup.plan.reg.Name, "err", why)
	s.mu.Lock()
	if s.sups[sup.id] == sup {
		delete(s.sups, sup.id)
	}
	s.mu.Unlock()
	s.changedProject(sup.project)
	sup.close(s.timing.StopTimeout)
}

// release lets a row's lease go, so another replica takes it at its next
// tick.
func (s *Service) release(ctx context.Context, rowID string) {
	r := s.opts.Replication
	if r == nil {
		return
	}
	if err := r.Release(ctx, leasePrefix+rowID); err != nil {
		s.log.Warn("releasing a hosted server's lease; it expires by itself", "hosted_id", rowID, "err", err)
	}
}

// remoteSpec is the spec of a row another replica owns: a
// streamable-HTTP upstream at this replica's internal endpoint.
func (s *Service) remoteSpec(rem *remoteRow) switchboard.ServerSpec {
	r := s.opts.Replication
	return switchboard.ServerSpec{Name: rem.plan.reg.Name, Transport: switchboard.TransportStreamableHTTP,
		URL:        r.Self + InternalPrefix + rem.id + "/mcp",
		Headers:    map[string]string{switchboard.ReplicaTokenHeader: r.Token, switchboard.DeadlineHeader: "0"},
		ToolPrefix: rem.plan.reg.ToolPrefix, CallTimeout: rem.plan.callTimeout}
}

// remoteStatus is a row's status as its owner last stored it.
func (s *Service) remoteStatus(rem *remoteRow) switchboard.HostedStatus {
	status := rem.row.Status
	if rem.holder == "" {
		status = switchboard.HostedStarting
	}
	return switchboard.HostedStatus{ID: rem.id, Project: rem.project, Name: rem.plan.reg.Name, Image: rem.plan.reg.Image,
		Status: status, Provider: rem.row.Provider, ContainerID: rem.row.ContainerID,
		Limits: s.limits(rem.plan), Config: rem.plan.summary(), Owner: rem.holder}
}

// remoteRef finds a row another replica owns by row ID or name.
func (s *Service) remoteRef(project, ref string) *remoteRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rem, ok := s.remote[ref]; ok && rem.project == project {
		return rem
	}
	for _, rem := range s.remote {
		if rem.project == project && rem.plan.reg.Name == ref {
			return rem
		}
	}
	return nil
}

// ownStatus marks a status as this replica's own.
func (s *Service) ownStatus(st switchboard.HostedStatus) switchboard.HostedStatus {
	if r := s.opts.Replication; r != nil {
		st.Owner, st.Local = r.Holder(), true
	}
	return st
}

// ownerURL is the base URL of the live replica holding row's lease now;
// "" when none does or this one does.
func (s *Service) ownerURL(ctx context.Context, rowID string) string {
	return s.opts.Replication.HolderURL(ctx, leasePrefix+rowID)
}

// forward sends one request to the owner of rowID at path (under
// InternalPrefix), waiting (bounded by ctx) while no replica owns it or
// the owner does not answer the connection. It returns the owner's
// answer, or ok false when this replica became the owner meanwhile.
func (s *Service) forward(ctx context.Context, rowID, path string, body []byte, hdr http.Header) (resp *http.Response, ok bool, err error) {
	r := s.opts.Replication
	t := time.NewTicker(min(r.Tick/4, 100*time.Millisecond) + time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		_, local := s.sups[rowID]
		s.mu.Unlock()
		if local {
			return nil, false, nil
		}
		if base := s.ownerURL(ctx, rowID); base != "" {
			h := hdr.Clone()
			if h == nil {
				h = http.Header{}
			}
			h.Set(forwardedHeader, "1")
			resp, err := r.Post(ctx, base+InternalPrefix+rowID+"/"+path, body, h)
			switch {
			case err == nil && resp.StatusCode == http.StatusMisdirectedRequest:
				_ = resp.Body.Close() // no longer the owner: resolve again
			case err == nil:
				return resp, true, nil
			case errors.Is(err, replicas.ErrNotDelivered):
				// The owner is gone (drained or killed): nothing was sent;
				// wait for the next owner.
			default:
				return nil, true, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, true, switchboard.Errorf(switchboard.ErrTimeout, "hosted server: no replica served it within the call's deadline (its owner is changing)")
		case <-t.C:
		}
	}
}

// Internal is the inter-replica endpoint (mounted at InternalPrefix):
// authenticated with the replicas' shared token, 401 otherwise.
func (s *Service) Internal() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+InternalPrefix+"{id}/mcp", s.serveMCP)
	mux.HandleFunc("GET "+InternalPrefix+"{id}/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusMethodNotAllowed) // no server-to-client stream on the hop
	})
	mux.HandleFunc("DELETE "+InternalPrefix+"{id}/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+InternalPrefix+"{id}/{op}", s.serveOp)
	token := ""
	if s.opts.Replication != nil {
		token = s.opts.Replication.Token
	}
	return replicas.ReplicaOnly(token, mux)
}

// serveMCP relays one JSON-RPC message: into the local connection to the
// container when this replica owns the row, else to the owner.
func (s *Service) serveMCP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := replicas.HopContext(r)
	defer cancel()
	id := r.PathValue("id")
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRelayBody+1))
	if err != nil || len(body) > maxRelayBody {
		http.Error(w, "request body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	s.mu.Lock()
	sup := s.sups[id]
	s.mu.Unlock()
	forwarded := r.Header.Get(forwardedHeader) != ""
	if forwarded {
		if !s.enterHop() {
			http.Error(w, "this replica is stopping; its servers go to the next owner", http.StatusMisdirectedRequest)
			return
		}
		defer s.hops.Done()
	}
	if sup == nil && forwarded {
		http.Error(w, "this replica does not own the server", http.StatusMisdirectedRequest)
		return
	}
	if sup != nil && !forwarded && !s.waitApplied(ctx, sup) {
		// This replica's own manager, still on the spec it had before the
		// take-over: relaying into it would come back here.
		writeRPCError(w, body, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q: this replica is taking it over", sup.plan.reg.Name))
		return
	}
	if sup == nil {
		hdr := http.Header{}
		for _, k := range []string{"Content-Type", "Accept", "Mcp-Protocol-Version", "Mcp-Session-Id"} {
			if v := r.Header.Values(k); len(v) > 0 {
				hdr[k] = v
			}
		}
		resp, remote, err := s.forward(ctx, id, "mcp", body, hdr)
		if remote {
			if err != nil {
				writeRPCError(w, body, err)
				return
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != "" {
				w.Header().Set("Content-Type", ct)
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		s.mu.Lock()
		sup = s.sups[id]
		s.mu.Unlock()
		if sup == nil {
			writeRPCError(w, body, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server is changing owner"))
			return
		}
	}
	s.relay(ctx, w, sup, body)
}

// waitApplied waits (bounded by ctx) until the hub has applied the specs
// of sup's project as they were when this replica took sup's row over:
// from then on, the manager's server of that name is the local container,
// and calls made before on its old spec (this replica's hop to the
// previous owner, which came here) drain into it.
func (s *Service) waitApplied(ctx context.Context, sup *supervisor) bool {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		ok := s.applied[sup.project] >= s.need[sup.id]
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// relay answers one JSON-RPC message through this replica's connection
// to sup's container. initialize is answered here (the container's
// session is this replica's manager's); notifications are dropped (a
// cancelled call's hop is cancelled with its HTTP request).
func (s *Service) relay(ctx context.Context, w http.ResponseWriter, sup *supervisor, body []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Method == "" {
		http.Error(w, "one JSON-RPC request object expected", http.StatusBadRequest)
		return
	}
	if len(msg.ID) == 0 || string(msg.ID) == "null" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var res any
	var err error
	switch msg.Method {
	case "initialize":
		var ip struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &ip)
		res = map[string]any{"protocolVersion": ip.ProtocolVersion, "capabilities": s.hopCapabilities(ctx, sup),
			"serverInfo": map[string]any{"name": sup.plan.reg.Name, "version": "switchboard-replica"}}
	case "ping":
		res = map[string]any{}
	case "server/discover":
		err = &switchboard.RPCError{Code: -32601, Message: "method not found"}
	default:
		var up Upstreams
		if up, err = s.upstreams(sup.project); err == nil {
			if err = up.Connect(ctx, sup.plan.reg.Name); err == nil {
				res, err = up.Request(ctx, sup.plan.reg.Name, msg.Method, rawParams(msg.Params))
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": switchboard.ToRPCError(err)})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": res})
}

// hopCapabilities are the capabilities a replica that does not own sup
// is told: the container's own, as it announced them to this replica's
// connection, less what the hop cannot carry: notifications (a
// listChanged, resource subscriptions, logging), since the hop answers
// requests only. So prompts, resources, templates and completion of a
// hosted server work through every replica. Tools only when the
// container cannot be reached now (its calls will say why).
func (s *Service) hopCapabilities(ctx context.Context, sup *supervisor) map[string]any {
	out := map[string]any{"tools": map[string]any{}}
	up, err := s.upstreams(sup.project)
	if err != nil || up.Connect(ctx, sup.plan.reg.Name) != nil {
		return out
	}
	cp, ok := up.(interface {
		Capabilities(name string) json.RawMessage
	})
	if !ok {
		return out
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(cp.Capabilities(sup.plan.reg.Name), &caps) != nil {
		return out
	}
	for _, k := range []string{"prompts", "resources", "completions"} {
		if v, ok := caps[k]; ok && string(v) != "null" {
			out[k] = map[string]any{}
		}
	}
	return out
}

// writeRPCError answers a message with a JSON-RPC error (or 503 for a
// notification).
func writeRPCError(w http.ResponseWriter, body []byte, err error) {
	var msg struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &msg)
	if len(msg.ID) == 0 {
		http.Error(w, switchboard.Message(err), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": switchboard.ToRPCError(err)})
}

// serveOp runs restart or delete on the row this replica owns.
func (s *Service) serveOp(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := replicas.HopContext(r)
	defer cancel()
	id := r.PathValue("id")
	s.mu.Lock()
	sup := s.sups[id]
	s.mu.Unlock()
	if sup == nil || s.draining.Load() {
		http.Error(w, "this replica does not own the server", http.StatusMisdirectedRequest)
		return
	}
	var out any
	var err error
	switch r.PathValue("op") {
	case "restart":
		out, err = s.Restart(ctx, sup.project, id)
	case "delete":
		err = s.Delete(ctx, sup.project, id, r.URL.Query().Get("keep_volumes") == "true")
		out = map[string]any{}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(http.StatusConflict)
		_ = json.NewEncoder(w).Encode(switchboard.ToRPCError(err))
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

// remoteOp runs restart or delete on the owner of a row this replica
// does not own. ok false: this replica owns it now (the caller acts
// locally).
func (s *Service) remoteOp(ctx context.Context, rem *remoteRow, op string, query url.Values) (json.RawMessage, bool, error) {
	path := op
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timing.StopTimeout+replicas.DefaultHop)
		defer cancel()
	}
	resp, remote, err := s.forward(ctx, rem.id, path, nil, nil)
	if !remote || err != nil {
		return nil, remote, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxRelayBody))
	if err != nil {
		return nil, true, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q: its owner replica's answer was cut off", rem.plan.reg.Name)
	}
	if resp.StatusCode != http.StatusOK {
		var rpc switchboard.RPCError
		if json.Unmarshal(b, &rpc) == nil && rpc.Message != "" {
			return nil, true, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q on its owner replica: %s", rem.plan.reg.Name, rpc.Message)
		}
		return nil, true, switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q: its owner replica answered HTTP %d", rem.plan.reg.Name, resp.StatusCode)
	}
	return b, true, nil
}
