package projects

import (
	"context"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
)

// TestRedactsEveryValueUsed: a project's logs and status keep redacting a
// secret's value after it changed or was deleted; a server started with
// the old value may still report it (this once leaked a value in the
// end-to-end TestSecrets, from a connect attempt in flight during a
// change).
func TestRedactsEveryValueUsed(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Box: box})
	defer h.Close(ctx)
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	put := func(v string) {
		ct, err := box.Seal("p", "KEY", []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.PutSecret(ctx, switchboard.Secret{ProjectID: "p", Name: "KEY", Ciphertext: ct}); err != nil {
			t.Fatal(err)
		}
		if err := h.Reconcile(ctx, "p"); err != nil {
			t.Fatal(err)
		}
	}
	put("first-value")
	put("second-value")
	if err := st.DeleteSecret(ctx, "p", "KEY"); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconcile(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	rt := h.runtime("p", false)
	for _, v := range []string{"first-value", "second-value"} {
		if got := rt.redact.Redact("key " + v + "."); got != "key "+secrets.Redacted+"." {
			t.Errorf("Redact with %q: %q", v, got)
		}
	}
}
