// Package registrytest starts a real image registry for tests: Debian's
// docker-registry (the Distribution registry) on a loopback port, storing
// in a temporary directory, optionally behind htpasswd credentials. A
// missing binary skips the test, or fails it when SWITCHBOARD_TEST_REQUIRE
// names "registry" (or "all").
package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// Binary is the registry program, from Debian's docker-registry package.
const Binary = "docker-registry"

// Registry is one running registry.
type Registry struct {
	// Addr is its host:port on loopback, the registry part of image
	// references pushed to and pulled from it (127.0.0.1:PORT/name:tag).
	Addr string
	// User and Password are the credentials it requires ("" when open).
	User, Password string
	stop           func()
}

// Stop stops the registry before t ends: a registry that went down.
func (r *Registry) Stop() { r.stop() }

// Start starts a registry for t, stopped when t ends; with user set it
// requires user and password (htpasswd, bcrypt).
func Start(t testing.TB, user, password string) *Registry {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		testenv.Need(t, "registry", false, "docker-registry not found (apt-get install docker-registry)")
		return nil
	}
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	auth := ""
	if user != "" {
		h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(user+":"+string(h)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: test\n    path: %s\n", filepath.Join(dir, "htpasswd"))
	}
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n%s", filepath.Join(dir, "data"), addr, auth)
	path := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", path)
	logf, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			<-exited
			logf.Close()
		})
	}
	t.Cleanup(stop)
	// Ready when /v2/ answers (200 open, 401 behind credentials).
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
			t.Fatalf("docker-registry exited: %v\n%s", waitErr, b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer on %s within 30s", addr)
		}
	}
	return &Registry{Addr: addr, User: user, Password: password, stop: stop}
}

// Stalled returns a loopback address that accepts connections and never
// answers: a registry that hangs. It closes when t ends.
func Stalled(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Closed returns a loopback address nothing listens on: a registry that
// is down.
func Closed(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
