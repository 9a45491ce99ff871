package sandbox

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
	"github.com/switchboard-mcp/switchboard/replicas"
)

// Sandbox sessions across replicas: a session lives in the replica that
// made it (its home), which holds the lease "sandbox/<project>/<session
// id>" (replicas.Replication) while the session runs, and stops it
// (Fence) once it can no longer prove it does. A call naming a session
// this replica does not run goes to the home's internal endpoint
// (CallPath, the replicas' token, the call's deadline); get_sessions
// lists the project's sessions of every live replica, and stop_session
// stops one wherever it runs. The home's own rules apply there unchanged
// (the caller's MCP session id travels as the actor), so a workspace held
// by one agent session is refused to others whichever replica they call.
// A session whose home ended goes on in the first replica a call naming
// it reaches (Resume).

// CallPath is the inter-replica endpoint of sandbox calls (Homes.Handler).
const CallPath = "/internal/v1/sandbox/call"

const (
	sessionLeasePrefix = "sandbox/"
	// handOverWait bounds how long a call waits for a session's home
	// that no longer answers to let it go.
	handOverWait = 30 * time.Second
)

// Homes shares a Service's sessions with the replicas on the same store:
// it keeps the leases of the sessions this replica runs, fences those it
// loses, and hands calls for other replicas' sessions to their homes.
type Homes struct {
	svc  *Service
	repl *replicas.Replication
	log  *slog.Logger

	mu       sync.Mutex
	held     map[string]bool // lease names of the sessions renewed last
	claiming map[string]int  // lease names claimed for a session not yet running
	fencing  map[string]bool // lease names lost whose sessions are stopping

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewHomes shares svc's sessions through repl; it starts nothing (Start).
func NewHomes(svc *Service, repl *replicas.Replication) *Homes {
	ctx, cancel := context.WithCancel(context.Background())
	return &Homes{svc: svc, repl: repl, log: svc.log, held: map[string]bool{}, claiming: map[string]int{}, fencing: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// errNotDelivered: the home's listener refused the connection (it is
// stopping, or gone); nothing ran.
var errNotDelivered = switchboard.Errorf(switchboard.ErrUnavailable, "sandbox: the replica running this session is stopping")

func sessionLease(project, id string) string { return sessionLeasePrefix + project + "/" + id }

// Start renews the leases of this replica's sessions every tick (letting
// go of those of ended sessions, fencing those lost) until Close.
func (h *Homes) Start() {
	h.wg.Go(func() {
		t := time.NewTicker(h.repl.Tick)
		defer t.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
			}
			c, cancel := context.WithTimeout(h.ctx, h.repl.TTL/3)
			h.renew(c)
			cancel()
		}
	})
}

// renew is one pass of Start's loop.
func (h *Homes) renew(ctx context.Context) {
	now := map[string]bool{}
	byName := map[string]switchboard.SandboxSession{}
	var names []string
	for _, x := range h.svc.Sessions("") {
		name := sessionLease(x.Project, x.SessionID)
		now[name], byName[name] = true, x
		names = append(names, name)
	}
	lost, failed := h.repl.Renew(ctx, names)
	for name, err := range lost {
		x := byName[name]
		h.mu.Lock()
		again := h.fencing[name]
		h.fencing[name] = true
		h.mu.Unlock()
		if again {
			continue
		}
		h.log.Error("sandbox: session's lease lost or not renewed in time; stopping it so no second copy runs", "project", x.Project, "sandbox_session", x.SessionID, "err", err)
		// In the background: the other renewals go on.
		h.wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), 30*time.Second)
			defer cancel()
			err := h.svc.Fence(ctx, x.Project, x.SessionID)
			if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
				h.log.Warn("sandbox: stopping a session whose lease was lost failed; retried next tick", "sandbox_session", x.SessionID, "err", switchboard.Message(err))
			}
			h.mu.Lock()
			delete(h.fencing, name)
			h.mu.Unlock()
		})
	}
	for name, err := range failed {
		h.log.Debug("sandbox: renewing a session's lease failed; retried next tick", "sandbox_session", byName[name].SessionID, "err", err)
	}
	h.mu.Lock()
	var gone []string
	for name := range h.held {
		if !now[name] && h.claiming[name] == 0 {
			gone = append(gone, name)
		}
	}
	for name := range h.claiming {
		now[name] = true
	}
	h.held = now
	h.mu.Unlock()
	for _, name := range gone {
		_ = h.repl.Release(ctx, name)
	}
}

// claim takes a new session's lease at once (not at the next tick).
func (h *Homes) claim(ctx context.Context, project, id string) {
	name := sessionLease(project, id)
	if err := h.repl.Claim(ctx, name); err == nil {
		h.mu.Lock()
		h.held[name] = true
		h.mu.Unlock()
	}
}

// Close stops renewing and releases every lease (the sessions end with
// the Service, which closes first).
func (h *Homes) Close(ctx context.Context) error {
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	held := h.held
	h.held = map[string]bool{}
	h.mu.Unlock()
	for name := range held {
		_ = h.repl.Release(ctx, name)
	}
	return nil
}

// home is the base URL of the live replica running project's session
// id, "" when this one does or none does.
func (h *Homes) home(ctx context.Context, project, id string) string {
	return h.repl.HolderURL(ctx, sessionLease(project, id))
}

// remote lists the homes of project's sessions other replicas run.
func (h *Homes) remote(ctx context.Context, project string) map[string]string {
	prefix := sessionLeasePrefix + project + "/"
	out := map[string]string{}
	for name, u := range h.repl.HolderURLs(ctx, prefix) {
		out[strings.TrimPrefix(name, prefix)] = u
	}
	return out
}

// takeOverer is the engine's take-over (engine.Engine.TakeOver).
type takeOverer interface {
	TakeOver(ctx context.Context, labels map[string]string) ([]string, error)
}

// resume takes over project's session id when its lease is free (its
// replica died or stopped): this replica takes the lease, removes what
// container of the session the dead replica left on a shared engine, and
// starts the session again on its workspace (Resume). It returns the
// base URL of another replica that took it first, "" when this one runs
// it now, or when no workspace names it (the call then fails as for any
// unknown session).
//
// A session bound to another person than the caller's is not resumed (the
// call fails as for any unknown session): presenting someone else's
// session id must not restart their container.
func (h *Homes) resume(ctx context.Context, project, id, person string) (string, error) {
	name := sessionLease(project, id)
	ws, owner := h.sessionWorkspace(ctx, project, id)
	if ws == "" || (owner != "" && owner != person) {
		return "", nil
	}
	h.mu.Lock()
	h.claiming[name]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if h.claiming[name]--; h.claiming[name] <= 0 {
			delete(h.claiming, name)
		}
		h.mu.Unlock()
	}()
	if err := h.repl.Claim(ctx, name); err != nil {
		if errors.Is(err, switchboard.ErrConflict) {
			return h.home(ctx, project, id), nil
		}
		return "", err
	}
	h.mu.Lock()
	h.held[name] = true
	h.mu.Unlock()
	if t, ok := h.svc.opts.Engine.(takeOverer); ok {
		if _, err := t.TakeOver(ctx, map[string]string{engine.LabelKind: KindSession, engine.LabelRef: id}); err != nil {
			h.log.Warn("sandbox: removing the container a replica that ended left", "sandbox_session", id, "err", err)
		}
	}
	if err := h.svc.Resume(ctx, project, id); err != nil {
		_ = h.repl.Release(context.WithoutCancel(ctx), name)
		return "", err
	}
	return "", nil
}

// sessionWorkspace is the workspace whose row names session id, and the
// person the session is bound to ("" for none); "" when no row names it.
func (h *Homes) sessionWorkspace(ctx context.Context, project, id string) (ws, person string) {
	if h.svc.opts.Store == nil {
		return "", ""
	}
	rows, err := h.svc.opts.Store.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ProjectID: project, ContainerType: switchboard.ContainerWorkspace})
	if err != nil {
		return "", ""
	}
	for _, w := range rows {
		if SessionOf(w) == id {
			var cfg workspaceConfig
			_ = json.Unmarshal(w.Config, &cfg)
			return w.ID, cfg.Person
		}
	}
	return "", ""
}

// sessionOn is the session the workspace row id names (its running
// session, as the store has it), "" when none.
func (h *Homes) sessionOn(ctx context.Context, project, id string) string {
	if h.svc.opts.Store == nil {
		return ""
	}
	w, err := h.svc.opts.Store.GetWorkspace(ctx, id)
	if err != nil || w.ProjectID != project || w.ContainerType != switchboard.ContainerWorkspace {
		return ""
	}
	return SessionOf(w)
}

// hopCall is one sandbox tool call handed to a session's home.
type hopCall struct {
	Project   string          `json:"project"`
	Session   string          `json:"session"`          // the caller's MCP session: the actor
	Person    string          `json:"person,omitempty"` // the caller's person: the home checks its binding
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

type hopAnswer struct {
	Result json.RawMessage       `json:"result,omitempty"`
	Error  *switchboard.RPCError `json:"error,omitempty"`
}

// forward runs req at base (a home replica), bounded by ctx.
func (h *Homes) forward(ctx context.Context, base string, req switchboard.CallRequest) (json.RawMessage, error) {
	body, _ := json.Marshal(hopCall{Project: req.Project, Session: req.Session, Person: req.Person, Tool: req.Tool, Arguments: req.Arguments})
	resp, err := h.repl.Post(ctx, base+CallPath, body, http.Header{"Content-Type": {"application/json"}})
	if errors.Is(err, replicas.ErrNotDelivered) {
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

// Handler is the home's end of the hop, to mount at CallPath: the call
// runs here as if made on this replica by the same MCP session (not
// logged again: the replica that answered the client logs it). It
// answers the replicas' token only.
func (h *Homes) Handler() http.Handler {
	return replicas.ReplicaOnly(h.repl.Token, http.HandlerFunc(h.serve))
}

func (h *Homes) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := replicas.HopContext(r)
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
	res, err := h.svc.Tools(c.Project).CallTool(ctx, switchboard.CallRequest{Project: c.Project, Session: c.Session, Person: c.Person, Tool: c.Tool, Arguments: c.Arguments})
	ans := hopAnswer{Result: res}
	if err != nil {
		ans = hopAnswer{Error: switchboard.ToRPCError(err)}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// endOutlived ends this replica's sessions of project that outlived it
// (ProjectGone) when session id is one of them: deleted through another
// replica and maybe re-created under the same id before this one's sync
// saw it, the project must not reach them. A call naming it then answers
// as for any unknown session.
func (h *Homes) endOutlived(ctx context.Context, project, id string) {
	if id == "" || !h.svc.Outlived(ctx, project, id) {
		return
	}
	if err := h.svc.ProjectGone(ctx, project); err != nil {
		h.log.Warn("sandbox: ending the sessions of a deleted project", "project", project, "err", switchboard.Message(err))
	}
}

// Tools is project's sandbox tools on a replica that shares sessions
// with the others: what Service.Tools serves, with calls naming another
// replica's session run there.
func (h *Homes) Tools(project string) *HomeTools {
	return &HomeTools{inner: h.svc.Tools(project), homes: h, project: project}
}

// HomeTools is Homes.Tools: a builtin server (upstreams.Builtin).
type HomeTools struct {
	inner   *ProjectTools
	homes   *Homes
	project string
}

// Tools is the sandbox's tool list.
func (t *HomeTools) Tools() []json.RawMessage { return t.inner.Tools() }

// CallTool runs one sandbox tool where the session it names runs.
// Errors: ProjectTools.CallTool's, and ErrUnavailable when the session's
// home does not answer.
func (t *HomeTools) CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
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
			base, err = t.homes.resume(ctx, t.project, sid, req.Person)
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
	case req.Tool == ToolGetSessions && args.SessionID == "":
		return t.allSessions(ctx, req, res), nil
	case req.Tool == ToolExecuteCode || req.Tool == ToolExecuteCommand:
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
func (t *HomeTools) local(id string) bool {
	_, err := t.homes.svc.lookup(t.project, id)
	return err == nil
}

// allSessions adds to this replica's get_sessions answer the sessions of
// the others, each as its home describes it.
func (t *HomeTools) allSessions(ctx context.Context, req switchboard.CallRequest, res json.RawMessage) json.RawMessage {
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
