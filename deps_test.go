package switchboard_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// TestDependenciesPointInward keeps the architecture visible: the domain
// imports only the standard library, and the HTTP edge never reaches for
// processes, containers or SQL drivers.
func TestDependenciesPointInward(t *testing.T) {
	gobin, err := exec.LookPath("go")
	testenv.Need(t, "go", err == nil, "go toolchain not in PATH")
	deps := func(pkg string) []string {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	for _, d := range deps(".") {
		if strings.Contains(strings.Split(d, "/")[0], ".") && d != "github.com/switchboard-mcp/switchboard" {
			t.Errorf("root package imports non-standard %s", d)
		}
	}
	forbidden := []string{"os/exec", "github.com/jackc/pgx", "github.com/docker/", "github.com/moby/", "github.com/switchboard-mcp/switchboard/upstreams", "github.com/switchboard-mcp/switchboard/config"}
	for _, d := range deps("./server") {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("server/ depends on %s", d)
			}
		}
	}
}
