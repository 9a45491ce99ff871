package switchboard_test

import (
	"os"
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
	// The root package and the admin API's client (which the CLI, the
	// console and any Go program use) stand on the standard library.
	for _, pkg := range []string{".", "./server/api/apiclient"} {
		for _, d := range deps(pkg) {
			if strings.Contains(strings.Split(d, "/")[0], ".") && d != "github.com/switchboard-mcp/switchboard" && d != "github.com/switchboard-mcp/switchboard/server/api/apiclient" {
				t.Errorf("%s imports non-standard %s", pkg, d)
			}
		}
	}
	const mod = "github.com/switchboard-mcp/switchboard/"
	forbidden := []string{"os/exec", "github.com/jackc/pgx", "github.com/docker/", "github.com/moby/", mod + "upstreams", mod + "config", mod + "engine", mod + "hosted", mod + "catalog", mod + "sandbox"}
	// The admin API is part of the edge: it checks a server entry through
	// the gateway (api.Projects) instead of importing config.
	for _, pkg := range []string{"./server", "./server/api"} {
		for _, d := range deps(pkg) {
			for _, f := range forbidden {
				if strings.HasPrefix(d, f) {
					t.Errorf("%s depends on %s", strings.TrimPrefix(pkg, "./"), d)
				}
			}
		}
	}
	// One package owns the Docker Engine: nothing else imports its client,
	// and the upstream clients know nothing of containers.
	docker := []string{"github.com/docker/", "github.com/moby/"}
	out, err := exec.Command(gobin, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], mod+"engine") {
			continue
		}
		for _, imp := range f[1:] {
			for _, d := range docker {
				if strings.HasPrefix(imp, d) {
					t.Errorf("%s imports %s directly; go through engine/", f[0], imp)
				}
			}
		}
	}
	for _, d := range deps("./upstreams") {
		if strings.HasPrefix(d, mod+"engine") || strings.HasPrefix(d, "github.com/moby/") {
			t.Errorf("upstreams/ depends on %s", d)
		}
	}
}

// TestBinaryWithoutGRPC keeps gRPC out of the gateway: nothing in it
// speaks gRPC, and the SDK's OTLP exporters, which link it (and
// grpc-gateway) even for OTLP/HTTP, once added 8 MB to the binary and
// 4.5 MiB to its idle memory with tracing off. Tests may still use the
// collector types that import it.
func TestBinaryWithoutGRPC(t *testing.T) {
	gobin, err := exec.LookPath("go")
	testenv.Need(t, "go", err == nil, "go toolchain not in PATH")
	out, err := exec.Command(gobin, "list", "-deps", "./cmd/switchboard").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, f := range []string{"google.golang.org/grpc", "github.com/grpc-ecosystem/", "go.opentelemetry.io/otel/exporters/"} {
			if strings.HasPrefix(d, f) {
				t.Errorf("cmd/switchboard depends on %s", d)
			}
		}
	}
}

// TestDockerContextHasEverySource keeps .dockerignore (an allow list) in
// step with the packages the binary is built from: `docker build` from
// source must never miss a directory that a new package added.
func TestDockerContextHasEverySource(t *testing.T) {
	gobin, err := exec.LookPath("go")
	testenv.Need(t, "go", err == nil, "go toolchain not in PATH")
	out, err := exec.Command(gobin, "list", "-deps", "./cmd/switchboard").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	ignore, err := os.ReadFile(".dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, line := range strings.Split(string(ignore), "\n") {
		if dir, ok := strings.CutPrefix(strings.TrimSpace(line), "!"); ok {
			allowed[strings.TrimSuffix(dir, "/")] = true
		}
	}
	const mod = "github.com/switchboard-mcp/switchboard/"
	for _, pkg := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(pkg, mod)
		if !ok {
			continue
		}
		if top := strings.Split(rel, "/")[0]; !allowed[top] {
			t.Errorf(".dockerignore leaves out %s/, which %s needs: add !%s/", top, pkg, top)
		}
	}
}

// TestDockerfilesAlike: Dockerfile (from source) and Dockerfile.prebuilt
// (a binary built outside) make the same image: the same runtime lines
// (ENV through ENTRYPOINT), and neither holds a stage the other's build
// path cannot build (the classic builder builds every stage of a file up
// to the target: the from-source file has no stage that copies dist/, the
// prebuilt one none that needs the golang image).
func TestDockerfilesAlike(t *testing.T) {
	runtime := func(name string) (string, string) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i, j := strings.Index(s, "\nENV "), strings.Index(s, "\nENTRYPOINT ")
		if i < 0 || j < i {
			t.Fatalf("%s: no ENV ... ENTRYPOINT block", name)
		}
		end := j + 1 + strings.IndexByte(s[j+1:], '\n')
		return s[i:end], s
	}
	src, srcAll := runtime("Dockerfile")
	pre, preAll := runtime("Dockerfile.prebuilt")
	if src != pre {
		t.Errorf("the runtime parts differ:\nDockerfile:%s\nDockerfile.prebuilt:%s", src, pre)
	}
	if strings.Contains(srcAll, "COPY dist") || strings.Contains(srcAll, "--chown=65532:65532 dist") {
		t.Error("Dockerfile copies dist/: `docker build .` with the classic builder fails where dist/ does not exist")
	}
	if strings.Contains(preAll, "FROM ${GO_IMAGE}") || strings.Contains(preAll, "FROM golang") {
		t.Error("Dockerfile.prebuilt needs the golang image")
	}
}
