package projects

import (
	"context"
	"errors"

	"github.com/switchboard-mcp/switchboard"
)

// SecretValues returns project id's decrypted secrets, for `${NAME}` in a
// hosted server's environment.
func (h *Hub) SecretValues(ctx context.Context, id string) (map[string]string, error) {
	return h.secretValues(ctx, id)
}

// NameTaken reports whether project id already has a server called name
// in the servers file or the store (hosted servers aside), or whether the
// store cannot tell.
func (h *Hub) NameTaken(ctx context.Context, id, name string) bool {
	if h.FileServer(id, name) {
		return true
	}
	_, err := h.st.GetServer(ctx, id, name)
	return !errors.Is(err, switchboard.ErrNotFound)
}

// HostedServer reports whether project id has a hosted server called
// name (registered, or in the servers file).
func (h *Hub) HostedServer(id, name string) bool {
	if h.opts.HostedSpecs == nil {
		return false
	}
	for _, s := range h.opts.HostedSpecs(id) {
		if s.Name == name {
			return true
		}
	}
	return false
}

// HostedChanged applies project id's hosted servers now.
func (h *Hub) HostedChanged(ctx context.Context, id string) {
	if err := h.Reconcile(ctx, id); err != nil && !errors.Is(err, switchboard.ErrNotFound) {
		h.log.Warn("hosted servers changed but the project could not be applied yet; the periodic sync will retry", "project", id, "err", err)
	}
}

// hostedSpecs appends project id's hosted servers (Options.HostedSpecs)
// to specs, skipping names already configured: a file or stored server
// keeps its name, and the hosted one is reported.
func (h *Hub) hostedSpecs(id string, specs []switchboard.ServerSpec) []switchboard.ServerSpec {
	if h.opts.HostedSpecs == nil {
		return specs
	}
	taken := make(map[string]bool, len(specs))
	for _, s := range specs {
		taken[s.Name] = true
	}
	for _, s := range h.opts.HostedSpecs(id) {
		if taken[s.Name] {
			h.log.Warn("hosted server not served: another server of the project has its name", "project", id, "server", s.Name)
			continue
		}
		specs = append(specs, s)
	}
	return specs
}
