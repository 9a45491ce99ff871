package projects

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/mcptest"
	"github.com/switchboard-mcp/switchboard/secrets"
	"github.com/switchboard-mcp/switchboard/store/sqlite"
	"github.com/switchboard-mcp/switchboard/upstreams"
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

// TestCallErrorsRedacted: when a remote server whose URL holds a secret
// goes away, the errors clients and status see name the cause but never
// the value (upstreams drop URLs from errors; runtime.Call and Status
// redact whatever else might quote one).
func TestCallErrorsRedacted(t *testing.T) {
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
	h := New(Options{Store: st, Box: box, Upstreams: upstreams.Options{ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second}})
	defer h.Close(ctx)
	if _, err := st.CreateProject(ctx, switchboard.Project{ID: "p"}); err != nil {
		t.Fatal(err)
	}
	const value = "sk-live-0123456789"
	ct, err := box.Seal("p", "KEY", []byte(value))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSecret(ctx, switchboard.Secret{ProjectID: "p", Name: "KEY", Ciphertext: ct}); err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(mcptest.StreamableHandler(mcptest.Options{Name: "r"}))
	cfg, _ := json.Marshal(map[string]string{"url": up.URL + "/mcp?key=${KEY}", "transport": "streamable-http"})
	if _, err := st.CreateServer(ctx, switchboard.ServerRecord{ProjectID: "p", Name: "r", Transport: switchboard.TransportStreamableHTTP, Config: cfg, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reconcile(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	rt := h.runtime("p", false)
	if _, ok := rt.mgr.Tools(ctx).Lookup("echo"); !ok {
		t.Fatalf("the upstream's tools are not listed: %+v", rt.Status())
	}
	up.CloseClientConnections()
	up.Close()
	// The first call finds the server gone; the next reconnects and fails
	// with the transport's error, which quotes the URL.
	var msgs []string
	for i := 0; i < 3; i++ {
		_, err := rt.Call(ctx, switchboard.CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
		if err == nil {
			t.Fatal("call to a closed upstream succeeded")
		}
		if !errors.Is(err, switchboard.ErrUnavailable) {
			t.Errorf("call %d: kind lost: %v", i, err)
		}
		msgs = append(msgs, switchboard.Message(err))
	}
	msgs = append(msgs, rt.Status()[0].LastError)
	for _, m := range msgs {
		if strings.Contains(m, value) {
			t.Errorf("secret value in %q", m)
		}
	}
	if last := msgs[len(msgs)-1]; !strings.Contains(last, "connection refused") {
		t.Errorf("status does not say why the server is down: %q", last)
	}
}
