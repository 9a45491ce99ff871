package sandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
	"github.com/switchboard-mcp/switchboard/sandbox"
)

// TestConfiguredVolumes: a host directory from MCP_SERVER_SANDBOX_VOLUMES
// is shared both ways (files written on the host appear in the session,
// and the other way round), :ro cannot be written, a named volume is
// mounted too, and get_volume_path reports the host path, the volume name
// and the session's workspace.
func TestConfiguredVolumes(t *testing.T) {
	host, refs := t.TempDir(), t.TempDir()
	for _, d := range []string{host, refs} {
		if err := os.Chmod(d, 0o777); err != nil { // sessions run as uid 1000
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(host, "in.txt"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(refs, "ref.txt"), []byte("reference\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var named string
	f := newFixture(t, func(o *sandbox.Options) {
		named = o.Engine.(interface{ Instance() string }).Instance() + "-data"
		o.Volumes = []sandbox.Volume{
			{Source: host, Target: "/sandbox/data", Bind: true},
			{Source: refs, Target: "/sandbox/refs", ReadOnly: true, Bind: true},
			{Source: named, Target: "/sandbox/named"},
		}
	})
	if err := f.e.CreateVolume(context.Background(), named, nil); err != nil {
		t.Fatal(err)
	}
	// Like a host directory, a volume must be writable by uid 1000 (the
	// operator's part); Docker makes a fresh one root's.
	v, err := f.e.InspectVolume(context.Background(), named)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(v.Mountpoint, 0o777); err != nil {
		// A remote or rootless engine: a skip, unless CI requires the
		// local engine this test needs.
		testenv.Need(t, "docker", false, "the engine's volumes are not on this host: "+err.Error())
	}

	r := f.exec("p", "execute_command", map[string]any{"command": "cat /sandbox/data/in.txt /sandbox/refs/ref.txt && echo back > /sandbox/data/out.txt && echo kept > /sandbox/named/n.txt"})
	if exitCode(r) != 0 || r.Stdout != "from the host\nreference\n" {
		t.Fatalf("reading the host's files: %+v", r)
	}
	if b, err := os.ReadFile(filepath.Join(host, "out.txt")); err != nil || string(b) != "back\n" {
		t.Fatalf("the session's file on the host: %q %v", b, err)
	}
	// Written on the host while the session runs: seen at once.
	if err := os.WriteFile(filepath.Join(host, "later.txt"), []byte("later\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = f.exec("p", "execute_command", map[string]any{"command": "cat /sandbox/data/later.txt; rm /sandbox/data/in.txt", "session_id": r.SessionID})
	if exitCode(r) != 0 || r.Stdout != "later\n" {
		t.Fatalf("a file written on the host during the session: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(host, "in.txt")); !os.IsNotExist(err) {
		t.Fatalf("a file deleted in the session is still on the host: %v", err)
	}
	r = f.exec("p", "execute_command", map[string]any{"command": "echo x > /sandbox/refs/new.txt", "session_id": r.SessionID})
	if exitCode(r) == 0 || !strings.Contains(r.Stderr, "Read-only") {
		t.Fatalf("writing a read-only directory: %+v", r)
	}
	// Another session sees the named volume's file.
	r2 := f.exec("p", "execute_command", map[string]any{"command": "cat /sandbox/named/n.txt"})
	if r2.Stdout != "kept\n" {
		t.Fatalf("named volume across sessions: %+v", r2)
	}

	raw, rerr := f.call("p", "get_volume_path", map[string]any{"session_id": r.SessionID})
	if rerr != nil {
		t.Fatal(rerr)
	}
	type vol struct {
		Source        string `json:"source"`
		Type          string `json:"type"`
		ContainerPath string `json:"container_path"`
		ReadOnly      bool   `json:"read_only"`
		Kind          string `json:"kind"`
	}
	var got struct {
		SessionID   string `json:"session_id"`
		WorkspaceID string `json:"workspace_id"`
		Volumes     []vol  `json:"volumes"`
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	sessions := f.svc.Sessions("p")
	var wsVolume string
	for _, s := range sessions {
		if s.SessionID == r.SessionID {
			wsVolume = s.Volume
		}
	}
	want := []vol{
		{Source: wsVolume, Type: "volume", ContainerPath: "/workspace", Kind: "workspace"},
		{Source: host, Type: "bind", ContainerPath: "/sandbox/data", Kind: "configured"},
		{Source: refs, Type: "bind", ContainerPath: "/sandbox/refs", ReadOnly: true, Kind: "configured"},
		{Source: named, Type: "volume", ContainerPath: "/sandbox/named", Kind: "configured"},
	}
	if diff := cmp.Diff(want, got.Volumes); diff != "" || wsVolume == "" || got.SessionID != r.SessionID || got.WorkspaceID == "" {
		t.Fatalf("get_volume_path (-want +got)\n%s\n%s", diff, raw)
	}
	// Without session_id: the configured ones only.
	raw, _ = f.call("p", "get_volume_path", map[string]any{})
	if err := json.Unmarshal(raw, &got); err != nil || len(got.Volumes) != 3 {
		t.Fatalf("get_volume_path without a session: %s", raw)
	}
}

// A configured host directory missing on the engine's host is a
// configuration error (-32603) naming the variable; nothing is left over.
func TestConfiguredVolumeMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent")
	f := newFixture(t, func(o *sandbox.Options) {
		o.Volumes = []sandbox.Volume{{Source: missing, Target: "/sandbox/data", Bind: true}}
	})
	_, rerr := f.call("p", "execute_command", map[string]any{"command": "true"})
	wantCode(t, rerr, -32603, "MCP_SERVER_SANDBOX_VOLUMES")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("the engine created %s: %v", missing, err)
	}
	if vols, _ := f.e.ListVolumes(context.Background(), nil); len(vols) != 0 {
		t.Fatalf("workspace volume left after a failed start: %v", vols)
	}
}
