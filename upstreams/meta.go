package upstreams

import (
	"encoding/json"
	"strings"
)

// protocolMetaPrefix prefixes the _meta keys MCP reserves for the protocol
// (io.modelcontextprotocol/protocolVersion, clientCapabilities,
// clientInfo, serverInfo, logLevel, subscriptionId...). They describe one
// hop: the client's keys say what the client speaks to the gateway, not
// what the gateway speaks to this upstream, so they are never forwarded.
// Forwarding them made a stateless-capable upstream answer a 2025 hop in
// 2026-07-28's shape whenever the client happened to speak 2026.
const protocolMetaPrefix = "io.modelcontextprotocol/"

// dropProtocolMeta removes the protocol-reserved keys from a client's
// _meta; every other member (progressToken, traceparent, the client's own
// keys) is kept as is. It returns how many keys it removed.
func dropProtocolMeta(mm map[string]json.RawMessage) int {
	n := 0
	for k := range mm {
		if strings.HasPrefix(k, protocolMetaPrefix) {
			delete(mm, k)
			n++
		}
	}
	return n
}
