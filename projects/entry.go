package projects

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/config"
)

// ParseServer reads a stored server entry as Reconcile will, so the admin
// API checks an entry by the gateway's own rule without importing config.
// See config.ParseServer.
func (h *Hub) ParseServer(name string, entry json.RawMessage, getenv func(string) string) (*switchboard.ServerSpec, error) {
	return config.ParseServer(name, entry, getenv)
}
