// Package pgtest gives tests a real PostgreSQL: a throwaway cluster started
// from the installed binaries on first use, private to one test binary, with
// an empty database per test. A missing PostgreSQL skips the test, or fails
// it when SWITCHBOARD_TEST_REQUIRE names "postgres" (or "all").
//
// Use it from TestMain so the cluster is stopped when the package is done:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
//
//	func TestSomething(t *testing.T) {
//		dsn := pgtest.NewDB(t)
//		...
//	}
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchboard-mcp/switchboard/internal/testenv"
)

// startTimeout bounds initdb plus the server becoming ready.
const startTimeout = 60 * time.Second

var (
	mu       sync.Mutex
	inMain   bool     // Run is running the tests
	tried    bool     // a start was attempted (it is never retried)
	cur      *cluster // the running cluster, if any
	startErr error    // why the cluster could not start
	dbSeq    atomic.Int64
)

// Run runs the package's tests, then stops the cluster if a test started
// one, and returns the exit code for os.Exit.
func Run(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	c := cur
	cur, inMain = nil, false
	mu.Unlock()
	if c != nil {
		if err := c.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping PostgreSQL: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// NewDB creates an empty database in the package's cluster, starting the
// cluster on first use, and returns a connection string for it (a Unix
// socket, user postgres, no password). The database is dropped when t
// ends.
func NewDB(t testing.TB) string {
	t.Helper()
	c, err := get()
	if errors.Is(err, errNoMain) {
		t.Fatal(err)
	}
	testenv.Need(t, "postgres", err == nil, fmt.Sprint(err))

	name := fmt.Sprintf("test_%d", dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := c.admin.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return c.dsn(name)
}

var errNoMain = errors.New("pgtest.NewDB needs the package's TestMain to call os.Exit(pgtest.Run(m))")

// get returns the running cluster, starting it on first call.
func get() (*cluster, error) {
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		return nil, errNoMain
	}
	if !tried {
		tried = true
		cur, startErr = start()
	}
	return cur, startErr
}

type cluster struct {
	dir   string // temp dir: data/, the socket, the log
	port  int
	cmd   *exec.Cmd
	exit  chan struct{} // closed when the postmaster has exited
	admin *pgxpool.Pool // to the postgres database, for CREATE/DROP DATABASE
}

func (c *cluster) dsn(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.dir, c.port, db)
}

// binDir finds the directory of initdb and postgres: PATH first, then the
// newest /usr/lib/postgresql/*/bin (Debian keeps them off PATH).
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		_, e1 := os.Stat(filepath.Join(d, "initdb"))
		_, e2 := os.Stat(filepath.Join(d, "postgres"))
		if e1 == nil && e2 == nil {
			return d, nil
		}
	}
	return "", errors.New("no initdb and postgres binaries on PATH or in /usr/lib/postgresql/*/bin")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// start initializes and starts a cluster in a new temp dir. PostgreSQL
// refuses to run as root, so as root its processes run as the postgres
// user (set directly on the child, which also lets the parent-death signal
// stop the server if the test binary is killed).
func start() (*cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and PostgreSQL needs a non-root user: %v", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// A cluster in memory creates databases ten times faster than one on
	// disk; fall back to the temp dir where there is no /dev/shm.
	base := "/dev/shm"
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		base = os.TempDir()
		if dir, err = os.MkdirTemp(base, dirPrefix); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sweep(base)
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", filepath.Join(dir, "data"), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, bytes.TrimSpace(out))
	}

	// A free port can be taken between picking and binding it; try again
	// with another one when that happens.
	for attempt := 0; ; attempt++ {
		c, err := launch(ctx, bin, dir, cred)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortTaken) || attempt == 3 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

var errPortTaken = errors.New("port taken")

// launch starts the postmaster and waits until it accepts connections.
func launch(ctx context.Context, bin, dir string, cred *syscall.Credential) (*cluster, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// Durability is worthless for a throwaway cluster; speed is not.
	cmd := exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(dir, "data"), "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "log_min_messages=warning")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %v", err)
	}
	c := &cluster{dir: dir, port: port, cmd: cmd, exit: make(chan struct{})}
	go func() { // owned by stop, which waits for exit
		cmd.Wait()
		close(c.exit)
	}()

	if err := c.waitReady(ctx); err != nil {
		c.kill()
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("could not bind")) || bytes.Contains(log, []byte("could not create any TCP/IP sockets")) {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("%v; server log:\n%s", err, tail(log))
	}
	cfg, err := pgxpool.ParseConfig(c.dsn("postgres"))
	if err != nil {
		c.kill()
		return nil, err
	}
	cfg.MaxConns = 4
	if c.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

// waitReady retries a connection until one succeeds, the server exits or
// ctx ends.
func (c *cluster) waitReady(ctx context.Context) error {
	delay := 5 * time.Millisecond
	for {
		conn, err := pgconn.Connect(ctx, c.dsn("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.exit:
			return fmt.Errorf("postgres exited while starting: %v", c.cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("postgres not ready after %v: %v", startTimeout, err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// kill stops the postmaster at once (immediate shutdown) and waits for it.
func (c *cluster) kill() {
	c.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-c.exit:
	case <-time.After(30 * time.Second):
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.exit
	}
}

// stop closes the admin pool, stops the server and removes its files.
func (c *cluster) stop() error {
	c.admin.Close()
	c.kill()
	return os.RemoveAll(c.dir)
}

const (
	dirPrefix = "sbpg-"
	ownerFile = "owner.pid" // the test binary that made the cluster
)

// sweep removes the clusters of test binaries that died without stopping
// theirs (killed, or timed out); the parent-death signal has already
// stopped their servers. Clusters of live binaries are left alone.
func sweep(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue // not ours, or still being created
		}
		pid, err := strconv.Atoi(string(b))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		os.RemoveAll(d)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of a server log.
func tail(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}
