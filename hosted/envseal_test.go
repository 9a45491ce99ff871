package hosted_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
	"github.com/switchboard-mcp/switchboard/secrets"
)

// TestLiteralEnvironmentSealedInTheStore: literal environment values of a
// hosted server reach its container but never its row in clear; a row
// stored before values were sealed keeps working and is rewritten sealed
// at start.
func TestLiteralEnvironmentSealedInTheStore(t *testing.T) {
	e := newEnv(t, nil, nil, fastTiming())
	box, err := secrets.NewBox(bytes.Repeat([]byte{3}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	e.opts.Box = box
	e.secrets["API_TOKEN"] = "s3cret-value-123"
	ctx := context.Background()
	legacy, _ := json.Marshal(switchboard.HostedRegistration{Name: "old", Image: e.image,
		Environment: map[string]string{"PLAIN": "legacy-literal-1", "TOKEN": "${API_TOKEN}"}})
	if _, err := e.st.CreateWorkspace(ctx, switchboard.Workspace{ProjectID: "default", ContainerType: switchboard.ContainerMCPServer,
		Image: e.image, Config: legacy, Status: switchboard.HostedStopped, Provider: engine.ProviderName}); err != nil {
		t.Fatal(err)
	}
	svc := e.start()
	file := []switchboard.HostedRegistration{{Name: "filed", Image: e.image, ToolPrefix: "f_", Environment: map[string]string{"PLAIN": "file-literal-3"}}}
	if err := svc.SetFile(ctx, "default", file); err != nil {
		t.Fatal(err)
	}
	e.register(switchboard.HostedRegistration{Name: "fresh", ToolPrefix: "n_", Environment: map[string]string{"PLAIN": "new-literal-2", "AUTH": "Bearer ${API_TOKEN}"}})
	old := e.wait("old", "running", running)
	fresh := e.wait("fresh", "running", running)
	filed := e.wait("filed", "running", running)
	if out := e.mustCall("f_env", nil); !strings.Contains(out, "PLAIN=file-literal-3") {
		t.Errorf("a servers-file server lacks its value:\n%s", out)
	}
	// The same file again changes nothing (sealing draws a fresh nonce, so
	// what is compared is the registration, not its sealed form).
	if err := svc.SetFile(ctx, "default", file); err != nil {
		t.Fatal(err)
	}
	if again := e.wait("filed", "running", running); again.ContainerID != filed.ContainerID {
		t.Errorf("an unchanged servers-file entry got a new container")
	}

	if out := e.mustCall("env", nil); !strings.Contains(out, "PLAIN=legacy-literal-1") || !strings.Contains(out, "TOKEN=s3cret-value-123") {
		t.Errorf("the server of an old row lacks its values:\n%s", out)
	}
	if out := e.mustCall("n_env", nil); !strings.Contains(out, "PLAIN=new-literal-2") || !strings.Contains(out, "AUTH=Bearer s3cret-value-123") {
		t.Errorf("a new server lacks its values:\n%s", out)
	}
	rows, err := e.st.ListWorkspaces(ctx, switchboard.WorkspaceFilter{ContainerType: switchboard.ContainerMCPServer})
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows = %d, %v", len(rows), err)
	}
	for _, r := range rows {
		for _, lit := range []string{"legacy-literal-1", "new-literal-2", "file-literal-3", "s3cret"} {
			if bytes.Contains(r.Config, []byte(lit)) {
				t.Errorf("row %s holds %q in clear: %s", r.ID, lit, r.Config)
			}
		}
	}
	for _, st := range []switchboard.HostedStatus{old, fresh, filed} {
		if s := mustJSON(t, st); strings.Contains(s, "literal-") || strings.Contains(s, "s3cret") {
			t.Errorf("status shows a value: %s", s)
		}
	}
}
