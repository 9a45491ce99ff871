package hosted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// SetFile makes project's hosted servers of the servers file exactly regs
// (each with Origin "file"): new ones are stored and started, changed ones
// get a new container (their volumes stay), and file servers no longer
// listed are stopped and deleted, keeping their volumes (removing a line
// from a file must not destroy data). Servers registered through the API
// are never touched; a file entry whose name one of them holds is an
// error. Unlike Register it does not refuse a missing image, an
// unreachable engine or a CPU or memory limit above what the engine's
// host has: the server's status says what is wrong, and the supervisor
// retries.
func (s *Service) SetFile(ctx context.Context, project string, regs []switchboard.HostedRegistration) error {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	var errs []error
	var started []*supervisor
	want := map[string]bool{}
	for _, reg := range regs {
		reg.Origin = "file"
		p, err := newPlan(reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want[p.reg.Name] = true
		cfg, err := json.Marshal(p.reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		old := s.byName(project, p.reg.Name)
		if rem := s.remoteRef(project, p.reg.Name); old == nil && rem != nil {
			// Another replica owns it: the row is shared; a changed entry
			// is written to it, and its owner restarts it at its next tick.
			if err := s.setRemoteFile(ctx, rem, p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		switch {
		case old != nil && old.plan.reg.Origin != "file":
			errs = append(errs, switchboard.Errorf(switchboard.ErrConflict, "servers file: hosted server %q is already registered through the API; rename one", p.reg.Name))
			continue
		case old == nil && (s.reserved(project, p.reg.Name) || s.opts.NameTaken(ctx, project, p.reg.Name)):
			errs = append(errs, switchboard.Errorf(switchboard.ErrConflict, "servers file: the name %q of a hosted server is taken by another server", p.reg.Name))
			continue
		case old != nil:
			oldCfg, _ := json.Marshal(old.plan.reg)
			if bytes.Equal(oldCfg, cfg) {
				continue
			}
			if cfg, err = encodeRow(s.opts.Box, project, p.reg); err != nil {
				errs = append(errs, err)
				continue
			}
			row, err := s.st.GetWorkspace(ctx, old.id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			row.Config, row.Image = cfg, p.reg.Image
			if row, err = s.st.UpdateWorkspace(ctx, row); err != nil {
				errs = append(errs, err)
				continue
			}
			old.close(s.timing.StopTimeout)
			started = append(started, s.install(row, p))
			s.log.Info("hosted server of the servers file changed; new container", "server", p.reg.Name)
		default:
			if cfg, err = encodeRow(s.opts.Box, project, p.reg); err != nil {
				errs = append(errs, err)
				continue
			}
			row, err := s.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: project, ContainerType: switchboard.ContainerMCPServer,
				Image: p.reg.Image, Config: cfg, Status: switchboard.HostedStarting, Provider: engine.ProviderName})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.claim(ctx, row.ID)
			started = append(started, s.install(row, p))
			s.log.Info("hosted server of the servers file added", "server", p.reg.Name)
		}
	}
	// File servers gone from the file.
	s.mu.Lock()
	var gone []*supervisor
	for _, sup := range s.sups {
		if sup.project == project && sup.plan.reg.Origin == "file" && !want[sup.plan.reg.Name] {
			gone = append(gone, sup)
			delete(s.sups, sup.id)
		}
	}
	s.mu.Unlock()
	for _, sup := range gone {
		sup.close(s.timing.StopTimeout)
		s.cleanup(ctx, sup.id, sup.plan, true)
		if err := s.st.DeleteWorkspace(ctx, sup.id); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
			errs = append(errs, err)
		}
		s.release(ctx, sup.id)
		s.log.Info("hosted server removed from the servers file; its volumes are kept", "server", sup.plan.reg.Name)
	}
	s.opts.Changed(ctx, project)
	for _, sup := range started {
		if sup == nil {
			continue
		}
		if s.eng == nil {
			sup.fail(s.errNoEngine())
			continue
		}
		sup.start("", nil)
	}
	if len(errs) > 0 {
		return fmt.Errorf("hosted servers of the servers file: %w", errors.Join(errs...))
	}
	return nil
}

// install puts a supervisor for row in place (a new one, or the
// successor of a closed one) without starting it; nil after Close.
func (s *Service) install(row switchboard.Workspace, p plan) *supervisor {
	sup := newSupervisor(s, row, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.sups[row.ID] = sup
	return sup
}

// setRemoteFile applies a servers-file entry to a row another replica
// owns: nothing when it is unchanged, else the row's new registration.
func (s *Service) setRemoteFile(ctx context.Context, rem *remoteRow, p plan) error {
	if rem.plan.reg.Origin != "file" {
		return switchboard.Errorf(switchboard.ErrConflict, "servers file: hosted server %q is already registered through the API; rename one", p.reg.Name)
	}
	if rem.key == regKey(p) {
		return nil
	}
	cfg, err := encodeRow(s.opts.Box, rem.project, p.reg)
	if err != nil {
		return err
	}
	row, err := s.st.GetWorkspace(ctx, rem.id)
	if err != nil {
		return err
	}
	row.Config, row.Image = cfg, p.reg.Image
	_, err = s.st.UpdateWorkspace(ctx, row)
	return err
}
