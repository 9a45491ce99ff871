package sandbox

import (
	"context"
	"encoding/json"
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
}

// volumeFor names the Docker volume of workspace id.
func volumeFor(id string) string { return "switchboard-ws-" + id }

// newWorkspace gives x a fresh workspace: a row in the store (when there
// is one) and its volume.
func (s *Service) newWorkspace(ctx context.Context, x *session) error {
	x.workspaceID = newID("ws-")
	if s.opts.Store != nil {
		cfg, _ := json.Marshal(workspaceConfig{Template: x.template, Flavor: x.flavor, Session: x.id})
		w, err := s.opts.Store.CreateWorkspace(ctx, switchboard.Workspace{
			ProjectID: x.project, ContainerType: switchboard.ContainerWorkspace, Image: x.image, Config: cfg,
			Status: "creating", Provider: "docker", AgentSessionID: x.agentSession, LastUsedAt: time.Now(),
		})
		if err != nil {
			s.log.Error("sandbox: recording a workspace", "project", x.project, "err", err)
			return switchboard.Errorf(switchboard.ErrInternal, "sandbox: the workspace could not be recorded in the store")
		}
		x.workspaceID = w.ID
	}
	x.volume = volumeFor(x.workspaceID)
	if err := s.opts.Engine.CreateVolume(ctx, x.volume, map[string]string{
		engine.LabelKind: KindWorkspace, engine.LabelRef: x.workspaceID, engine.LabelProject: x.project,
	}); err != nil {
		s.dropWorkspace(x)
		return engineError(err)
	}
	return nil
}

// dropWorkspace undoes newWorkspace after a failed start.
func (s *Service) dropWorkspace(x *session) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	if err := s.opts.Engine.RemoveVolume(ctx, x.volume); err != nil {
		s.log.Warn("sandbox: removing the volume of a session that did not start", "volume", x.volume, "err", err)
	}
	if s.opts.Store != nil {
		if err := s.opts.Store.DeleteWorkspace(ctx, x.workspaceID); err != nil {
			s.log.Warn("sandbox: removing the workspace row of a session that did not start", "workspace", x.workspaceID, "err", err)
		}
	}
}

// touchWorkspace records x's use in its workspace row: last_used_at, the
// container, the agent session, and status when not "".
func (s *Service) touchWorkspace(x *session, status string) {
	if s.opts.Store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := s.opts.Store.GetWorkspace(ctx, x.workspaceID)
	if err != nil {
		s.log.Warn("sandbox: reading a workspace row", "workspace", x.workspaceID, "err", err)
		return
	}
	// Keep what the row knows beyond the session (snapshot_of of a
	// restored workspace, the last agent session).
	var cfg workspaceConfig
	_ = json.Unmarshal(w.Config, &cfg)
	cfg.Volume, cfg.Template, cfg.Flavor, cfg.Session = x.volume, x.template, x.flavor, x.id
	x.mu.Lock()
	w.LastUsedAt = x.lastUsed
	w.AgentSessionID = x.agent()
	if x.stopped {
		cfg.LastAgent = x.agent()
		// No session, no holder: whoever attaches next starts one.
		w.ContainerID, w.AgentSessionID = "", ""
	} else {
		w.ContainerID = x.containerID
	}
	x.mu.Unlock()
	if status != "" {
		w.Status = status
	}
	w.Config, _ = json.Marshal(cfg)
	if _, err := s.opts.Store.UpdateWorkspace(ctx, w); err != nil {
		s.log.Warn("sandbox: updating a workspace row", "workspace", x.workspaceID, "err", err)
	}
}
