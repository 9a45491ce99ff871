package switchboard_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
)

// TestRPCCodes pins the one JSON-RPC error table: the edge's codes (an
// unknown tool is -32601) and the sandbox's documented ones (an unknown
// session -32602, a held workspace or a limit -32600) in one place.
func TestRPCCodes(t *testing.T) {
	upstream := &switchboard.RPCError{Code: -32042, Message: "from upstream", Data: []byte(`{"a":1}`)}
	tests := []struct {
		name string
		err  error
		code int
	}{
		{"unknown tool", switchboard.Errorf(switchboard.ErrNotFound, "unknown tool"), -32601},
		{"argument names nothing", switchboard.Errorf(switchboard.ErrArgNotFound, "session not found"), -32602},
		{"invalid", switchboard.Errorf(switchboard.ErrInvalid, "x"), -32602},
		{"resource limit", switchboard.Errorf(switchboard.ErrResourceLimit, "x"), -32600},
		{"conflict", switchboard.Errorf(switchboard.ErrConflict, "held by another session"), -32600},
		{"unavailable", switchboard.Errorf(switchboard.ErrUnavailable, "x"), -32603},
		{"timeout", switchboard.Errorf(switchboard.ErrTimeout, "x"), -32603},
		{"canceled", switchboard.ErrCanceled, -32603},
		{"config", switchboard.Errorf(switchboard.ErrConfig, "x"), -32603},
		{"forbidden", switchboard.Errorf(switchboard.ErrForbidden, "x"), -32603},
		{"wrapped", fmt.Errorf("ctx: %w", switchboard.Errorf(switchboard.ErrInvalid, "x")), -32602},
		{"upstream error unchanged", fmt.Errorf("wrapped: %w", upstream), -32042},
		{"unknown", errors.New("secret path /etc/x"), -32603},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := switchboard.ToRPCError(tt.err)
			if got.Code != tt.code || switchboard.RPCCode(tt.err) != tt.code {
				t.Errorf("code %d (RPCCode %d), want %d", got.Code, switchboard.RPCCode(tt.err), tt.code)
			}
			if strings.Contains(got.Message, "/etc/x") {
				t.Errorf("internal detail leaked: %q", got.Message)
			}
		})
	}
	if got := switchboard.ToRPCError(upstream); got != upstream {
		t.Errorf("upstream error altered: %+v", got)
	}
	if !errors.Is(switchboard.Errorf(switchboard.ErrArgNotFound, "x"), switchboard.ErrNotFound) {
		t.Error("ErrArgNotFound is not an ErrNotFound: the HTTP table would not make it a 404")
	}
}
