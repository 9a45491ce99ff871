package upstreams

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDropProtocolMeta(t *testing.T) {
	mm := map[string]json.RawMessage{
		"io.modelcontextprotocol/protocolVersion":    json.RawMessage(`"2026-07-28"`),
		"io.modelcontextprotocol/clientCapabilities": json.RawMessage(`{}`),
		"progressToken": json.RawMessage(`"t1"`),
		"user/key":      json.RawMessage(`{"big":9007199254740993}`),
		"traceparent":   json.RawMessage(`"00-x"`),
	}
	if n := dropProtocolMeta(mm); n != 2 {
		t.Errorf("dropped %d keys, want 2", n)
	}
	want := map[string]json.RawMessage{
		"progressToken": json.RawMessage(`"t1"`),
		"user/key":      json.RawMessage(`{"big":9007199254740993}`),
		"traceparent":   json.RawMessage(`"00-x"`),
	}
	if d := cmp.Diff(want, mm); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
