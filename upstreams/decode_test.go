package upstreams

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeMessage must read every line as json.Unmarshal does: the same
// fields, the same success or failure.
func checkDecodeMessage(t *testing.T, b []byte) {
	t.Helper()
	var got, want message
	gotErr, wantErr := decodeMessage(b, &got), json.Unmarshal(b, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decodeMessage(%q): error %v, encoding/json %v", b, gotErr, wantErr)
	}
	if wantErr == nil {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("decodeMessage(%q) (-encoding/json +got):\n%s", b, diff)
		}
	}
}

var messageSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`,
	`{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"bad","data":{"x":1}}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1},"error":{"message":"m"}}`, `{"error":null}`, `{"error":{"code":1},"error":null}`,
	`{"error":5}`, `{"error":{"code":"x"}}`, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`,
	`{"ID":3,"RESULT":{},"Method":null}`, `{"method":1}`, `{"m\u0065thod":"x"}`, `not json`, `{"id":1`, `[]`, `null`, `{}`,
}

func TestDecodeMessage(t *testing.T) {
	for _, s := range messageSeeds {
		checkDecodeMessage(t, []byte(s))
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, s := range messageSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecodeMessage(t, b) })
}
