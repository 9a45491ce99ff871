package hosted

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/secrets"
)

func testBox(t *testing.T, fill byte) *secrets.Box {
	t.Helper()
	b, err := secrets.NewBox(bytes.Repeat([]byte{fill}, secrets.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRowSealsLiteralEnvironment: a row stores no literal environment
// value in clear, only references; it reads back as registered; a row
// written before sealing still reads, and says it should be rewritten.
func TestRowSealsLiteralEnvironment(t *testing.T) {
	box := testBox(t, 7)
	env := map[string]string{
		"REF":     "${TOKEN}",
		"REFS":    "${A}${B}",
		"LIT":     "literal-pa55word",
		"MIXED":   "Bearer ${BEARER} literal-mixed",
		"DEFAULT": "${OPT:-literal-default}",
		"EMPTY":   "",
	}
	p, err := newPlan(switchboard.HostedRegistration{Name: "db", Image: "img:1", Environment: env})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := encodeRow(box, "acme", p.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, lit := range []string{"literal-pa55word", "literal-mixed", "literal-default"} {
		if bytes.Contains(cfg, []byte(lit)) {
			t.Errorf("the row holds %q in clear: %s", lit, cfg)
		}
	}
	var stored storedRegistration
	if err := json.Unmarshal(cfg, &stored); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"REF": "${TOKEN}", "REFS": "${A}${B}", "EMPTY": ""}, stored.Environment); diff != "" {
		t.Errorf("values kept in clear (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"A", "B", "BEARER", "OPT", "TOKEN"}, stored.SecretRefs); diff != "" {
		t.Errorf("secret_refs (-want +got):\n%s", diff)
	}
	row := switchboard.Workspace{ID: "r1", ProjectID: "acme", Config: cfg}
	got, inClear, err := decodeRow(box, row)
	if err != nil || inClear {
		t.Fatalf("decodeRow = %v, inClear %v", err, inClear)
	}
	if diff := cmp.Diff(env, got.reg.Environment); diff != "" {
		t.Errorf("environment read back (-want +got):\n%s", diff)
	}

	// A row of before: every value in clear. It reads, and is flagged.
	legacy, _ := json.Marshal(p.reg)
	got, inClear, err = decodeRow(box, switchboard.Workspace{ID: "r0", ProjectID: "acme", Config: legacy})
	if err != nil || !inClear || !cmp.Equal(env, got.reg.Environment) {
		t.Errorf("legacy row: err %v, inClear %v, env %v", err, inClear, got.reg.Environment)
	}
	onlyRefs, _ := json.Marshal(switchboard.HostedRegistration{Name: "db", Image: "img:1", Environment: map[string]string{"REF": "${TOKEN}"}})
	if _, inClear, err := decodeRow(box, switchboard.Workspace{ProjectID: "acme", Config: onlyRefs}); err != nil || inClear {
		t.Errorf("a row of references only: err %v, inClear %v; want nothing to rewrite", err, inClear)
	}

	// Sealed values open only with the key, project and server they were
	// sealed for.
	for name, tc := range map[string]struct {
		box     Sealer
		project string
		config  []byte
		kind    error
	}{
		"other key":     {testBox(t, 8), "acme", cfg, secrets.ErrWrongKey},
		"other project": {box, "other", cfg, secrets.ErrCorrupt},
		"renamed":       {box, "acme", bytes.Replace(cfg, []byte(`"name":"db"`), []byte(`"name":"db2"`), 1), secrets.ErrCorrupt},
		"no key":        {nil, "acme", cfg, switchboard.ErrConfig},
	} {
		_, _, err := decodeRow(tc.box, switchboard.Workspace{ProjectID: tc.project, Config: tc.config})
		if !errors.Is(err, tc.kind) || !strings.Contains(switchboard.Message(err), `"db`) {
			t.Errorf("%s: err = %v, want %v naming the server", name, err, tc.kind)
		}
	}
}
