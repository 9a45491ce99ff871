package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// workspaceConfig is what a workspace row's Config holds.
type workspaceConfig struct {
	Volume   string `json:"volume"`
	Template string `json:"template,omitempty"`
	Flavor   string `json:"flavor,omitempty"`
	Session  string `json:"sandbox_session,omitempty"`
	// SnapshotOf names the workspace a snapshot was taken from.
	SnapshotOf string `json:"snapshot_of,omitempty"`
	// LastAgent is the agent session of the workspace's last session,
	// kept when it stops (the row's agent_session_id is cleared then), so
	// the next attach can log whom it follows.
	LastAgent string `json:"last_agent_session,omitempty"`
	// Anonymous marks a workspace an execution without session_id made,
	// which nobody has attached, detached or snapshotted since: the
	// retention rule deletes it once its session has ended.
	Anonymous bool `json:"anonymous,omitempty"`
	// EndedAt is when its last session ended (stopped, idle, the gateway
	// shut down, or found gone after a crash).
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Owner is the gateway process (engine.Owner) that made a pooled
	// workspace, whose end makes it a leftover.
	Owner string `json:"owner,omitempty"`
	// Resumable marks a session that ended with its gateway (a crash found
	// by another process, or a shutdown) rather than by stop_session or
	// idleness: another replica may go on with it (Resume).
	Resumable bool `json:"resumable,omitempty"`
	// Person is the signed-in person its session is bound to
	// (CallRequest.Person), so a replica that resumes the session keeps
	// the binding.
	Person string `json:"person,omitempty"`
	// Attaches are its last maxAttaches attaches, oldest first.
	Attaches []switchboard.AttachEvent `json:"attach_history,omitempty"`
}

// maxAttaches bounds the attach history a row keeps.
const maxAttaches = 20

// recordAttach appends e to the attach history, keeping the last
// maxAttaches.
func (c *workspaceConfig) recordAttach(e switchboard.AttachEvent) {
	c.Attaches = append(c.Attaches, e)
	if n := len(c.Attaches); n > maxAttaches {
		c.Attaches = slices.Clone(c.Attaches[n-maxAttaches:])
	}
}

// volumeFor names the Docker volume of workspace id: "switchboard-ws-"
// and the id, for the ids the store and newID make (letters, digits and
// "-"), as before names were made by engine.Name.
func volumeFor(id string) string { return engine.Name("ws", id) }

// newWorkspace gives x a fresh workspace: a row in the store (when there
// is one) and its volume.
func (s *Service) newWorkspace(ctx context.Context, x *session) error {
	x.workspaceID = newID("ws-")
	if s.opts.Store != nil {
		cfg, _ := json.Marshal(workspaceConfig{Template: x.template, Flavor: x.flavor, Session: x.id, Anonymous: true})
		w, err := s.opts.Store.CreateWorkspace(ctx, switchboard.Workspace{
			ProjectID: x.project, ContainerType: switchboard.ContainerWorkspace, Image: x.image, Config: cfg,
			Status: "creating", Provider: engine.ProviderName, AgentSessionID: x.agentSession, LastUsedAt: time.Now(),
		})
		if err != nil {
			s.log.Error("sandbox: recording a workspace", "project", x.project, "err", err)
			return switchboard.Errorf(switchboard.ErrInternal, "sandbox: the workspace could not be recorded in the store")
		}
		x.workspaceID = w.ID
	}
	x.volume = volumeFor(x.workspaceID)
	if err := s.createVolume(ctx, x.volume, x.workspaceID, x.project); err != nil {
		s.dropWorkspace(x)
		return engineError(err)
	}
	return nil
}

// createVolume creates the volume of workspace id of project: sized
// (WorkspaceBytes) when the engine can, else plain, which is said once.
func (s *Service) createVolume(ctx context.Context, name, id, project string) error {
	labels := map[string]string{engine.LabelKind: KindWorkspace, engine.LabelRef: id, engine.LabelProject: project}
	if s.opts.WorkspaceBytes > 0 {
		err := s.opts.Engine.DiskLimits()
		if err == nil {
			return s.opts.Engine.CreateSizedVolume(ctx, name, labels, engine.Disk{Bytes: s.opts.WorkspaceBytes, UID: SandboxUID, GID: SandboxUID})
		}
		s.plainOnce.Do(func() {
			s.log.Warn("sandbox: workspaces have no size limit (MCP_SERVER_SANDBOX_WORKSPACE_SIZE), only the per-file one", "reason", switchboard.Message(err))
		})
	}
	return s.opts.Engine.CreateVolume(ctx, name, labels)
}

// dropWorkspace undoes newWorkspace after a failed start.
func (s *Service) dropWorkspace(x *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 30*time.Second)
	defer cancel()
	if err := s.removeWorkspace(ctx, x.workspaceID, x.volume); err != nil {
		s.log.Warn("sandbox: removing the workspace of a session that did not start", "workspace", x.workspaceID, "err", err)
	}
}

// touchWorkspace records x's use in its workspace row: last_used_at, the
// container, the agent session, status when not "", and when x has
// stopped, that its session ended. also, when not nil, changes the row
// further. It returns the row's config as stored ({} when there is no
// row).
func (s *Service) touchWorkspace(x *session, status string, also func(w *switchboard.Workspace, cfg *workspaceConfig)) workspaceConfig {
	if s.opts.Store == nil {
		return workspaceConfig{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, cfg, err := s.updateRow(ctx, x.workspaceID, func(w *switchboard.Workspace, cfg *workspaceConfig) bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		if x.stopped && cfg.Session != "" && cfg.Session != x.id {
			return false // a later session runs on it now
		}
		// Keep what the row knows beyond the session (snapshot_of of a
		// restored workspace, the last agent session, the history).
		cfg.Volume, cfg.Template, cfg.Flavor, cfg.Session = x.volume, x.template, x.flavor, x.id
		cfg.Resumable = x.stopped && x.shutdown
		if x.lastUsed.After(w.LastUsedAt) {
			w.LastUsedAt = x.lastUsed
		}
		w.AgentSessionID = x.agent()
		if x.stopped {
			cfg.LastAgent = x.agent()
			cfg.EndedAt = time.Now().UTC()
			// No session, no holder: whoever attaches next starts one.
			w.ContainerID, w.AgentSessionID = "", ""
		} else {
			w.ContainerID = x.containerID
		}
		if status != "" {
			w.Status = status
		}
		if also != nil {
			also(w, cfg)
		}
		return true
	})
	if err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		s.log.Warn("sandbox: updating a workspace row", "workspace", x.workspaceID, "err", err)
	}
	return cfg
}
