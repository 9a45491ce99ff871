package hosted

import (
	"context"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/upstreams"
)

// spec is the upstream spec the project's manager gets for this server.
func (s *supervisor) spec() switchboard.ServerSpec {
	spec := switchboard.ServerSpec{Name: s.plan.reg.Name, Transport: switchboard.TransportHosted,
		ToolPrefix: s.plan.reg.ToolPrefix, CallTimeout: s.plan.callTimeout}
	if !s.plan.stdio {
		// An HTTP server in a container is an ordinary remote upstream at
		// the container's address, known once it runs.
		spec.Transport = switchboard.TransportStreamableHTTP
		s.mu.Lock()
		spec.URL = s.url
		s.mu.Unlock()
		if spec.URL == "" {
			spec.Err = switchboard.Errorf(switchboard.ErrUnavailable, "hosted server %q: its container is not running yet", spec.Name)
		}
	}
	return spec
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
