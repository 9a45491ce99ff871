package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/hosted"
	"github.com/switchboard-mcp/switchboard/sandbox"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// Sandbox sessions across replicas (issue 27): a session lives in the
// replica that made it (its home), which holds the lease
// "sandbox/<project>/<session id>" while the session runs. A call naming
// a session this replica does not run goes to the home's internal
// endpoint (/internal/v1/sandbox/call, the replicas' token, the call's
// deadline); get_sessions lists the project's sessions of every live
// replica, and stop_session stops one wherever it runs. The home's own
// rules apply there unchanged (the caller's MCP session id travels as
// the actor), so a workspace held by one agent session is refused to
// others whichever replica they call.

const (
	sandboxLeasePrefix = "sandbox/"
	sandboxCallPath    = "/internal/v1/sandbox/call"
	// handOverWait bounds how long a call waits for a session's home
	// that no longer answers to let it go.
	handOverWait = 30 * time.Second
)

// sandboxHomes keeps this replica's sessions' leases and hands calls for
// other replicas' sessions to their homes.
type sandboxHomes struct {
	svc  *sandbox.Service
	eng  *engine.Engine
	st   switchboard.WorkspaceStore
	repl *hosted.Replication // the leases, this replica's holder, token, TTL and tick
	log  *slog.Logger

	mu   sync.Mutex
	held map[string]bool // lease names this replica holds

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// errNotDelivered: the home's listener refused the connection (it is
// stopping, or gone); nothing ran.
var errNotDelivered = switchboard.Errorf(switchboard.ErrUnavailable, "sandbox: the replica running this session is stopping")

func sessionLease(project, id string) string { return sandboxLeasePrefix + project + "/" + id }

// start renews the leases of this replica's sessions every tick (and
// lets go of those of ended sessions) until close.
func (h *sandboxHomes) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() {
		t := time.NewTicker(h.repl.Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(ctx, h.repl.TTL/3)
			h.renew(c)
			cancel()
		}
	})
}

func (h *sandboxHomes) renew(ctx context.Context) {
	now := map[string]bool{}
	for _, x := range h.svc.Sessions("") {
		name := sessionLease(x.Project, x.SessionID)
		now[name] = true
		if _, err := h.repl.Leases.AcquireLease(ctx, name, h.repl.Holder(), h.repl.TTL); err != nil {
			h.log.Debug("sandbox: renewing a session's lease", "sandbox_session", x.SessionID, "err", err)
		}
	}
	h.mu.Lock()
	var gone []string
	for name := range h.held {
		if !now[name] {
			gone = append(gone, name)
		}
	}
	h.held = now
	h.mu.Unlock()
	for _, name := range gone {
		_ = h.repl.Leases.ReleaseLease(ctx, name, h.repl.Holder())
	}
}

// claim takes a new session's lease at once (not at the next tick).
func (h *sandboxHomes) claim(ctx context.Context, project, id string) {
	name := sessionLease(project, id)
	if _, err := h.repl.Leases.AcquireLease(ctx, name, h.repl.Holder(), h.repl.TTL); err == nil {
		h.mu.Lock()
		h.held[name] = true
		h.mu.Unlock()
	}
}

// close stops renewing and releases every lease (the sessions ended with
// the sandbox service, which closes first).
func (h *sandboxHomes) close(ctx context.Context) error {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	h.mu.Lock()
	held := h.held
	h.held = map[string]bool{}
	h.mu.Unlock()
	for name := range held {
		_ = h.repl.Leases.ReleaseLease(ctx, name, h.repl.Holder())
	}
	return nil
}

// home is the base URL of the live replica running project's session
// id, "" when this one does or none does.
func (h *sandboxHomes) home(ctx context.Context, project, id string) string {
	name := sessionLease(project, id)
	list, err := h.repl.Leases.ListLeases(ctx, name)
	if err != nil {
		return ""
	}
	for _, l := range list {
		if l.Name != name || l.Holder == h.repl.Holder() {
			continue
		}
		owner, u := hosted.SplitHolder(l.Holder)
		if alive, err := h.repl.Alive(ctx, owner); err == nil && !alive {
			return ""
		}
		return u
	}
	return ""
}

// remote lists the homes of project's sessions other replicas run.
func (h *sandboxHomes) remote(ctx context.Context, project string) map[string]string {
	prefix := sandboxLeasePrefix + project + "/"
	list, err := h.repl.Leases.ListLeases(ctx, prefix)
	out := map[string]string{}
	if err != nil {
		return out
	}
	for _, l := range list {
		if l.Holder == h.repl.Holder() {
			continue
		}
		owner, u := hosted.SplitHolder(l.Holder)
		if alive, err := h.repl.Alive(ctx, owner); err == nil && !alive {
			continue
		}
		out[strings.TrimPrefix(l.Name, prefix)] = u
	}
	return out
}

// resume takes over project's session id when its lease is free (its
// replica died or stopped): this replica takes the lease, removes what
// container of the session the dead replica left on a shared engine, and
// starts the session again on its workspace (sandbox.Resume). It returns
// the base URL of another replica that took it first, "" when this one
// runs it now, or when no workspace names it (the call then fails as
// for any unknown session).
func (h *sandboxHomes) resume(ctx context.Context, project, id string) (string, error) {
	name := sessionLease(project, id)
	if h.sessionWorkspace(ctx, project, id) == "" {
		return "", nil
	}
	// A lease a dead process of this host holds is let go at once.
	if list, err := h.repl.Leases.ListLeases(ctx, name); err == nil {
		for _, l := range list {
			owner, _ := hosted.SplitHolder(l.Holder)
			if l.Name == name && l.Holder != h.repl.Holder() {
				if alive, err := h.repl.Alive(ctx, owner); err == nil && !alive {
					_ = h.repl.Leases.ReleaseLease(ctx, name, l.Holder)
				}
			}
		}
	}
	if _, err := h.repl.Leases.AcquireLease(ctx, name, h.repl.Holder(), h.repl.TTL); err != nil {
		if errors.Is(err, switchboard.ErrConflict) {
			return h.home(ctx, project, id), nil
		}
		return "", err
	}
	h.mu.Lock()
	h.held[name] = true
	h.mu.Unlock()
	if h.eng != nil {
		if _, err := h.eng.TakeOver(ctx, map[string]string{engine.LabelKind: sandbox.KindSession, engine.LabelRef: id}); err != nil {
			h.log.Warn("sandbox: removing the container a replica that ended left", "sandbox_session", id, "err", err)
		}
	}
	if err := h.svc.Resume(ctx, project, id); err != nil {
		_ = h.repl.Leases.ReleaseLease(context.WithoutCancel(ctx), name, h.repl.Holder())
		return "", err
	}
	return "", nil
}

// sessionWorkspace is the workspace whose row names session id, "" when
// none does.
func (h *sandboxHomes) sessionWorkspace(ctx context.Context, project, id string) string {
	if h.st == nil {
		return ""
	}
	rows, err := h.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		return ""
	}
	for _, w := range rows {
		if sandbox.SessionOf(w) == id {
			return w.ID
		}
	}
	return ""
}

// sessionOn is the session the workspace row id names (its running
// session, as the store has it), "" when none.
func (h *sandboxHomes) sessionOn(ctx context.Context, project, id string) string {
	if h.st == nil {
		return ""
	}
	w, err := h.st.GetWorkspace(ctx, id)
	if err != nil || w.ProjectID != project || w.ContainerType != switchboard.ContainerWorkspace {
		return ""
	}
	return sandbox.SessionOf(w)
}

// hopCall is one sandbox tool call handed to a session's home.
type hopCall struct {
	Project   string          `json:"project"`
	Session   string          `json:"session"` // the caller's MCP session: the actor
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type hopAnswer struct {
	Result json.RawMessage       `json:"result,omitempty"`
	Error  *switchboard.RPCError `json:"error,omitempty"`
}

// forward runs req at base (a home replica), bounded by ctx.
func (h *sandboxHomes) forward(ctx context.Context, base string, req switchboard.CallRequest) (json.RawMessage, error) {
	body, _ := json.Marshal(hopCall{Project: req.Project, Session: req.Session, Tool: req.Tool, Arguments: req.Arguments})
	resp, err := h.repl.Post(ctx, base+sandboxCallPath, body, http.Header{"Content-Type": {"application/json"}})
	if errors.Is(err, hosted.ErrNotDelivered) {
		return nil, errNotDelivered
	}
	if err != nil {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "sandbox: the replica running this session did not answer: %v", err)
	}
	defer resp.Body.Close()
	var ans hopAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&ans); err != nil || resp.StatusCode != http.StatusOK {
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "sandbox: the replica running this session answered HTTP %d", resp.StatusCode)
	}
	if ans.Error != nil {
		return nil, ans.Error
	}
	return ans.Result, nil
}

// serve is the home's end of the hop: the call runs here as if made on
// this replica by the same MCP session (not logged again: the replica
// that answered the client logs it).
func (h *sandboxHomes) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := hosted.HopContext(r)
	defer cancel()
	var c hopCall
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&c); err != nil || c.Project == "" || c.Tool == "" {
		http.Error(w, "a sandbox call expected", http.StatusBadRequest)
		return
	}
	var args struct {
		SessionID string `json:"session_id"`
	}
	_ = json.Unmarshal(c.Arguments, &args)
	h.endOutlived(ctx, c.Project, args.SessionID)
	res, err := h.svc.Tools(c.Project).CallTool(ctx, switchboard.CallRequest{Project: c.Project, Session: c.Session, Tool: c.Tool, Arguments: c.Arguments})
	ans := hopAnswer{Result: res}
	if err != nil {
		ans = hopAnswer{Error: switchboard.ToRPCError(err)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// endOutlived ends this replica's sessions of project that outlived it
// (sandbox.Service.ProjectGone) when session id is one of them: deleted
// through another replica and maybe re-created under the same id before
// this one's sync saw it, the project must not reach them. A call naming
// it then answers as for any unknown session.
func (h *sandboxHomes) endOutlived(ctx context.Context, project, id string) {
	if id == "" || !h.svc.Outlived(ctx, project, id) {
		return
	}
	if err := h.svc.ProjectGone(ctx, project); err != nil {
		h.log.Warn("sandbox: ending the sessions of a deleted project", "project", project, "err", switchboard.Message(err))
	}
}

// replicaTools is a project's sandbox tools on a replica that shares
// sessions with the others.
type replicaTools struct {
	inner   upstreams.Builtin
	homes   *sandboxHomes
	project string
}

func (t replicaTools) Tools() []json.RawMessage { return t.inner.Tools() }

func (t replicaTools) CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	var args struct {
		SessionID   string `json:"session_id"`
		WorkspaceID string `json:"workspace_id"`
	}
	_ = json.Unmarshal(req.Arguments, &args)
	t.homes.endOutlived(ctx, t.project, args.SessionID)
	sid := args.SessionID
	if sid == "" && args.WorkspaceID != "" {
		// A workspace another replica's session runs on is that replica's
		// to attach, detach, snapshot or delete (one container per
		// workspace, one holder).
		sid = t.homes.sessionOn(ctx, t.project, args.WorkspaceID)
	}
	// A home that is going (its listener closed, its sessions ending) is
	// waited for, bounded by the call's deadline and handOverWait: it
	// lets the session go, and the session goes on here or elsewhere.
	var waited <-chan time.Time
	for sid != "" && !t.local(sid) {
		base := t.homes.home(ctx, t.project, sid)
		if base == "" && args.SessionID != "" {
			// No live replica runs it: if one that ended did, it goes on
			// here (or where another replica took it first).
			var err error
			base, err = t.homes.resume(ctx, t.project, sid)
			if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
				return nil, switchboard.ToRPCError(err)
			}
		}
		if base == "" {
			break
		}
		res, err := t.homes.forward(ctx, base, req)
		if !errors.Is(err, errNotDelivered) {
			return res, err
		}
		if waited == nil {
			waited = time.After(handOverWait)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-waited:
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	res, err := t.inner.CallTool(ctx, req)
	if err != nil {
		return res, err
	}
	switch {
	case req.Tool == sandbox.ToolGetSessions && args.SessionID == "":
		return t.allSessions(ctx, req, res), nil
	case req.Tool == sandbox.ToolExecuteCode || req.Tool == sandbox.ToolExecuteCommand:
		var out struct {
			StructuredContent struct {
				SessionID string `json:"session_id"`
				Created   bool   `json:"session_created"`
			} `json:"structuredContent"`
		}
		if json.Unmarshal(res, &out) == nil && out.StructuredContent.Created {
			t.homes.claim(ctx, t.project, out.StructuredContent.SessionID)
		}
	}
	return res, nil
}

// local reports whether this replica runs the project's session id.
func (t replicaTools) local(id string) bool {
	for _, x := range t.homes.svc.Sessions(t.project) {
		if x.SessionID == id {
			return true
		}
	}
	return false
}

// allSessions adds to this replica's get_sessions answer the sessions of
// the others, each as its home describes it.
func (t replicaTools) allSessions(ctx context.Context, req switchboard.CallRequest, res json.RawMessage) json.RawMessage {
	others := t.homes.remote(ctx, t.project)
	if len(others) == 0 {
		return res
	}
	var local struct {
		StructuredContent struct {
			Sessions []json.RawMessage `json:"sessions"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(res, &local) != nil {
		return res
	}
	list := local.StructuredContent.Sessions
	for id, base := range others {
		one := req
		one.Arguments, _ = json.Marshal(map[string]string{"session_id": id})
		r, err := t.homes.forward(ctx, base, one)
		if err != nil {
			continue // ended meanwhile, or its home is going
		}
		var got struct {
			StructuredContent struct {
				Sessions []json.RawMessage `json:"sessions"`
			} `json:"structuredContent"`
		}
		if json.Unmarshal(r, &got) == nil {
			list = append(list, got.StructuredContent.Sessions...)
		}
	}
	out, err := switchboard.StructuredResult(map[string]any{"sessions": list})
	if err != nil {
		return res
	}
	return out
}
