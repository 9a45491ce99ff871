package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// ProjectTools are the sandbox tools of one project: an
// upstreams.Builtin.
type ProjectTools struct {
	s       *Service
	project string
}

// Tools returns project's sandbox tools, to register as a builtin server.
func (s *Service) Tools(project string) *ProjectTools {
	return &ProjectTools{s: s, project: project}
}

// Tools lists the sandbox tools as tools/list returns them.
func (p *ProjectTools) Tools() []json.RawMessage { return p.s.toolDefs() }

// CallTool runs one sandbox tool. Failures to run the request are
// *switchboard.RPCError with the codes of the one error table
// (switchboard.RPCCode): what a call's arguments name and is not found
// (a session or workspace id) is ErrArgNotFound, -32602; a program's
// non-zero exit is a normal result.
func (p *ProjectTools) CallTool(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	res, err := p.call(ctx, req)
	if err != nil {
		if errors.Is(err, switchboard.ErrCanceled) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, switchboard.ErrNotFound) {
			// The catalog routes only the sandbox's own tools here, so
			// whatever is not found was named by an argument.
			err = &switchboard.Error{Kind: switchboard.ErrArgNotFound, Msg: switchboard.Message(err)}
		}
		return nil, switchboard.ToRPCError(err)
	}
	return res, nil
}

func (p *ProjectTools) call(ctx context.Context, req switchboard.CallRequest) (json.RawMessage, error) {
	s := p.s
	// actor is who acts, for the holder checks: a call without an MCP
	// session holds nothing, and is not the admin ("").
	actor := req.Session
	if actor == "" {
		actor = sessionless
	}
	switch req.Tool {
	case ToolExecuteCode, ToolExecuteCommand:
		r, err := s.parseExec(req.Tool, req.Arguments)
		if err != nil {
			return nil, err
		}
		res, err := s.execute(ctx, p.project, actor, req.Person, r, progressSender(req))
		if err != nil {
			return nil, err
		}
		return switchboard.StructuredResult(res)
	case ToolGetSessions:
		id, err := parseSession(req.Tool, req.Arguments, false)
		if err != nil {
			return nil, err
		}
		// A person lists its own sessions and the project's unbound
		// ones: what it may name (lookupAs).
		list := s.sessionsOf(p.project, req.Person)
		if id != "" {
			x, err := s.lookupAs(p.project, req.Person, id)
			if err != nil {
				return nil, err
			}
			list = []switchboard.SandboxSession{x.describe()}
			s.used(ctx, x.workspaceID)
		}
		if list == nil {
			list = []switchboard.SandboxSession{}
		}
		return switchboard.StructuredResult(map[string]any{"sessions": list})
	case ToolStopSession:
		id, err := parseSession(req.Tool, req.Arguments, true)
		if err != nil {
			return nil, err
		}
		if _, err := s.lookupAs(p.project, req.Person, id); err != nil {
			return nil, err
		}
		info, kept, err := s.StopSession(ctx, p.project, actor, id)
		if err != nil {
			return nil, err
		}
		return switchboard.StructuredResult(map[string]any{"session_id": info.SessionID, "stopped": true, "workspace_id": info.WorkspaceID, "workspace_retained": kept})
	case ToolGetVolumePath:
		id, err := parseSession(req.Tool, req.Arguments, false)
		if err != nil {
			return nil, err
		}
		type vol struct {
			Source        string `json:"source"` // the host path of a bind, else the volume name
			Type          string `json:"type"`   // "bind" or "volume"
			ContainerPath string `json:"container_path"`
			ReadOnly      bool   `json:"read_only"`
			Kind          string `json:"kind"`
		}
		out := map[string]any{}
		vols := []vol{}
		if id != "" {
			x, err := s.lookupAs(p.project, req.Person, id)
			if err != nil {
				return nil, err
			}
			out["session_id"] = x.id
			out["workspace_id"] = x.workspaceID
			s.used(ctx, x.workspaceID)
			vols = append(vols, vol{Source: x.volume, Type: "volume", ContainerPath: "/workspace", Kind: "workspace"})
		}
		for _, v := range s.opts.Volumes {
			typ := "volume"
			if v.Bind {
				typ = "bind"
			}
			vols = append(vols, vol{Source: v.Source, Type: typ, ContainerPath: v.Target, ReadOnly: v.ReadOnly, Kind: "configured"})
		}
		out["volumes"] = vols
		return switchboard.StructuredResult(out)
	}
	if s.opts.Store != nil {
		switch req.Tool {
		case ToolListWorkspaces, ToolAttachWorkspace, ToolDetachWorkspace, ToolSnapshotWorkspace, ToolRestoreSnapshot, ToolDeleteWorkspace:
			a, err := parseWorkspace(req.Tool, req.Arguments)
			if err != nil {
				return nil, err
			}
			// A person's workspaces and snapshots (those of its
			// sessions, and their copies) are its own, as its sessions
			// are (lookupAs); unbound ones stay the project's.
			switch req.Tool {
			case ToolRestoreSnapshot:
				err = s.workspaceRowAs(ctx, p.project, req.Person, a.SnapshotID, WorkspaceSnapshot)
			case ToolDeleteWorkspace:
				err = s.workspaceRowAs(ctx, p.project, req.Person, a.WorkspaceID, kindAny)
			case ToolAttachWorkspace, ToolDetachWorkspace, ToolSnapshotWorkspace:
				err = s.workspaceRowAs(ctx, p.project, req.Person, a.WorkspaceID, "")
			}
			if err != nil {
				return nil, err
			}
			var v any
			switch req.Tool {
			case ToolListWorkspaces:
				list, err := s.workspacesOf(ctx, p.project, func(cfg workspaceConfig) bool { return cfg.Person == "" || cfg.Person == req.Person })
				if err != nil {
					return nil, err
				}
				v = map[string]any{"workspaces": list}
			case ToolAttachWorkspace:
				v, err = s.Attach(ctx, p.project, req.Session, a.WorkspaceID, a.Template, a.Flavor)
			case ToolDetachWorkspace:
				v, err = s.Detach(ctx, p.project, actor, a.WorkspaceID)
			case ToolSnapshotWorkspace:
				v, err = s.Snapshot(ctx, p.project, actor, a.WorkspaceID)
			case ToolRestoreSnapshot:
				v, err = s.Restore(ctx, p.project, a.SnapshotID)
			case ToolDeleteWorkspace:
				v, err = s.Delete(ctx, p.project, actor, a.WorkspaceID)
			}
			if err != nil {
				return nil, err
			}
			return switchboard.StructuredResult(v)
		}
	}
	return nil, switchboard.Errorf(switchboard.ErrNotFound, "unknown tool %q", req.Tool)
}

// progressSender returns what streams an execution's output as progress
// notifications, or nil when the client sent no progress token.
func progressSender(req switchboard.CallRequest) func(stream, chunk string) {
	token := req.ProgressToken()
	if token == nil {
		return nil
	}
	var mu sync.Mutex
	n := 0
	return func(stream, chunk string) {
		mu.Lock()
		defer mu.Unlock()
		n++
		b, err := json.Marshal(map[string]any{"progressToken": token, "progress": n, "message": chunk, "_meta": map[string]string{"stream": stream}})
		if err == nil {
			req.OnProgress(b)
		}
	}
}

// Status is the sandbox's part of the gateway status.
type Status struct {
	Enabled bool   `json:"enabled"`
	Engine  string `json:"engine"` // "reachable" or why not
	// Runtime is what new sessions run under ("runc", "runsc");
	// RuntimeWarning why not gVisor, or why none (a chosen runtime that
	// failed its probe); Runtimes the setting and each runtime's probe.
	Runtime        string               `json:"runtime,omitempty"`
	RuntimeWarning string               `json:"runtime_warning,omitempty"`
	Runtimes       engine.RuntimeReport `json:"runtimes"`
	Images         map[string]string    `json:"images"` // template -> "present: ref" or what to do
	Sessions       int                  `json:"sessions"`
	// Warm counts the warm containers ready for new sessions.
	Warm int `json:"warm"`
	// SessionRuntimes counts the containers of open sessions and warm
	// ones by what they run under: a runtime passed over (or added) after
	// they started shows here beside Runtime.
	SessionRuntimes map[string]int `json:"session_runtimes,omitempty"`
}

// Status asks the engine (bounded by ctx) whether it answers and has the
// images, and counts open sessions.
// The engine's answers are kept for statusTTL, so a status page polled
// often does not poll Docker as often.
func (s *Service) Status(ctx context.Context) Status {
	s.mu.Lock()
	n := len(s.sessions)
	cached, at := s.probe, s.probedAt
	running := slices.Collect(maps.Values(s.sessions))
	for _, l := range s.pool.ready {
		running = append(running, l...)
	}
	s.mu.Unlock()
	if time.Since(at) >= statusTTL {
		cached = s.probeEngine(ctx)
		s.mu.Lock()
		s.probe, s.probedAt = cached, time.Now()
		s.mu.Unlock()
	}
	cached.Sessions = n
	cached.Warm = s.Pooled("")
	for _, x := range running {
		if rt := x.describe().Runtime; rt != "" {
			if cached.SessionRuntimes == nil {
				cached.SessionRuntimes = map[string]int{}
			}
			cached.SessionRuntimes[rt]++
		}
	}
	return cached
}

const statusTTL = 10 * time.Second

// statusBudget bounds each engine question of a status.
const statusBudget = 2 * time.Second

// Refresh probes the engine as Status does and reports whether its
// reachability changed since the last probe: the tools' descriptions say
// when it is unreachable, so their server should be listed again.
//
// It shares Status's probe: within statusTTL of the last one, nothing
// is asked of the engine again.
func (s *Service) Refresh(ctx context.Context) bool {
	s.mu.Lock()
	before := s.probe.Engine
	s.mu.Unlock()
	return (before == "reachable") != (s.Status(ctx).Engine == "reachable")
}

// engineDown is why the engine was unreachable at the last probe; "" when
// it was reachable or has not been probed.
func (s *Service) engineDown() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.probe.Engine; e != "reachable" {
		return e
	}
	return ""
}

func (s *Service) probeEngine(ctx context.Context) Status {
	// Each question gets its own budget, and the runtime choice never
	// waits on the runtime's probe (seconds under gVisor, right after
	// start): waiting spent the images' budget, and present images read
	// "unknown: ... the Docker engine failed: internal error".
	budget := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, statusBudget) }
	st := Status{Enabled: true, Images: map[string]string{}}
	c, cancel := budget()
	err := s.opts.Engine.Ping(c)
	cancel()
	if err != nil {
		st.Engine = switchboard.Message(engineError(err))
		return st
	}
	st.Engine = "reachable"
	c, cancel = budget()
	rt, chosen, err := s.chosenRuntime(c)
	cancel()
	switch {
	case err != nil:
		st.RuntimeWarning = switchboard.Message(err)
	case !chosen:
		st.RuntimeWarning = "the runtime for new sessions is being chosen (its probe is running); new sessions wait for it"
	default:
		st.Runtime, st.RuntimeWarning = rt.Name, rt.Warning
	}
	st.Runtimes = s.opts.Engine.Runtimes()
	for _, t := range Templates {
		ref, variable := s.imageFor(t)
		c, cancel := budget()
		ok, err := s.opts.Engine.ImageExists(c, ref)
		cancel()
		switch {
		case err != nil:
			st.Images[t] = "unknown: " + switchboard.Message(engineError(err))
		case ok:
			st.Images[t] = "present: " + ref
		case FromRegistry(ref) && s.opts.PullPolicy != engine.PullNever:
			st.Images[t] = "to pull: " + ref + " (at the first session)"
		default:
			st.Images[t] = "missing: " + ref + "; run `switchboard sandbox build-image` and set " + variable
		}
	}
	return st
}
