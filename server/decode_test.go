package server

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeRPC and decodeCallParams must read every valid document as
// json.Unmarshal does: the same fields, the same success or failure.
func checkDecoders(t *testing.T, b []byte) {
	t.Helper()
	if !json.Valid(b) {
		return
	}
	var got, want rpcMessage
	gotErr, wantErr := decodeRPC(b, &got), json.Unmarshal(b, &want)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decodeRPC(%q): error %v, encoding/json %v", b, gotErr, wantErr)
	}
	if wantErr == nil {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("decodeRPC(%q) (-encoding/json +got):\n%s", b, diff)
		}
	}
	var gp, wp callParams
	gotErr, wantErr = decodeCallParams(b, &gp), json.Unmarshal(b, &wp)
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decodeCallParams(%q): error %v, encoding/json %v", b, gotErr, wantErr)
	}
	if wantErr == nil {
		if diff := cmp.Diff(wp, gp); diff != "" {
			t.Fatalf("decodeCallParams(%q) (-encoding/json +got):\n%s", b, diff)
		}
	}
}

var decoderSeeds = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`,
	`{"JSONRPC":"2.0","Id":"x","METHOD":"tools\/list","Params":null}`, `{"jsonrpc":"2.0","method":null,"method":"a"}`,
	`{"jsonrpc":"2.0","method":"a","method":null}`, `{"jsonrpc":2,"method":"a"}`, `{"method":["a"]}`, `{"result":{},"error":null}`,
	`{"id":null}`, `{"name":"echo","arguments":null,"_meta":{"progressToken":1}}`, `{"name":null}`, `{"name":"a","name":null}`,
	`{"name":5}`, `{"NAME":"é","_META":{}}`, `{"n\u0061me":"x"}`, `{"paramſ":{}}`, `[]`, `"x"`, `null`, `{}`, `{"name":"\ud800"}`,
}

func TestDecoders(t *testing.T) {
	for _, s := range decoderSeeds {
		checkDecoders(t, []byte(s))
	}
}

func FuzzDecoders(f *testing.F) {
	for _, s := range decoderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkDecoders(t, b) })
}
