package hosted

import (
	"context"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// spec is the upstream spec the project's manager gets for this server.
func (s *supervisor) spec() switchboard.ServerSpec {
	return switchboard.ServerSpec{Name: s.plan.reg.Name, Transport: switchboard.TransportHosted,
		ToolPrefix: s.plan.reg.ToolPrefix, CallTimeout: s.plan.callTimeout}
}

// Opener returns project's stream opener for its upstreams manager.
func (s *Service) Opener(project string) upstreams.StreamOpener { return opener{s, project} }

type opener struct {
	s       *Service
	project string
}

// OpenStream waits (bounded by ctx) for the current container of hosted
// server spec.Name and returns its attach stream.
func (o opener) OpenStream(ctx context.Context, spec switchboard.ServerSpec) (upstreams.Stream, error) {
	sup := o.s.byName(o.project, spec.Name)
	if sup == nil {
		return nil, switchboard.Errorf(switchboard.ErrNotFound, "hosted server %q not found in project %q", spec.Name, o.project)
	}
	st, gen, err := sup.waitStream(ctx)
	if err != nil {
		return nil, err
	}
	return &stream{Stream: st, sup: sup, gen: gen}, nil
}

// stream is a container's attach stream as the manager sees it.
type stream struct {
	*engine.Stream
	sup *supervisor
	gen int
}

// Initialized is called by the manager once initialize and tools/list
// succeeded: the server is running.
func (st *stream) Initialized() { st.sup.initialized(st.gen) }

// Stderr is the container's stderr tail, secrets redacted.
func (st *stream) Stderr() string {
	st.sup.mu.Lock()
	defer st.sup.mu.Unlock()
	return st.sup.redact(st.Stream.Stderr())
}
