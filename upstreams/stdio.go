package upstreams

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/internal/tail"
)

// stdioConn speaks newline-delimited JSON-RPC (the shared framer) to a
// child process. On top of the framing it owns the process: its own
// process group (and, where the kernel allows, its own PID namespace; see
// isolation), a clean environment, stderr kept in a ring buffer, SIGTERM
// to the group on close and SIGKILL after stopTimeout.
//
// We run the child ourselves instead of through mcp-go's stdio transport
// because that one inherits the gateway's whole environment unless
// overridden, signals only the direct child (grandchildren of `npx` or
// `uvx` survive), has fixed 2 s + 3 s close timeouts, and offers no signal
// when the child dies.
type stdioConn struct {
	*framer
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *tail.Buffer
	iso    isolation

	exited  chan struct{} // closed after Wait returned
	waitErr error
}

// baseEnv lists the variables a child inherits from the gateway besides
// what its config gives: enough to find programs and a home, nothing that
// could be a secret.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM", "SYSTEMROOT"}

// childEnv builds a child's environment: basics from the gateway, then the
// spec's env, sorted for reproducibility.
func childEnv(spec map[string]string) []string {
	m := map[string]string{}
	for _, k := range baseEnv {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range spec {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func startStdio(spec switchboard.ServerSpec, stopTimeout time.Duration, iso isolation, lim lineLimits, onNote func(string, json.RawMessage), log *slog.Logger) (*stdioConn, error) {
	cmd := exec.Command(spec.Command, spec.Args...)
	cmd.Env = childEnv(spec.Env)
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = sysProcAttr(iso)
	cmd.WaitDelay = stopTimeout
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Our own pipe rather than StdoutPipe: Wait then leaves the read end
	// alone, so the exit is noticed even while a descendant still holds
	// stdout, and no final message is lost to Wait closing the pipe.
	stdout, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	c := &stdioConn{framer: newFramer(stdin, false, lim, onNote, log), cmd: cmd, stdin: stdin,
		stderr: tail.New(16 << 10), iso: iso, exited: make(chan struct{})}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		_ = stdout.Close()
		_ = pw.Close()
		// The message names the command but not its environment.
		return nil, switchboard.Errorf(switchboard.ErrUnavailable, "server %q: cannot start %q: %v", spec.Name, spec.Command, unwrapExec(err))
	}
	_ = pw.Close()
	go c.run(stdout)
	go c.writeLoop()
	return c, nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// run reads until stdout ends while another goroutine reaps the child.
// The connection is marked lost once the exit status is known (so status
// can say how the child ended) and the last messages were read; a child
// that closes stdout but keeps running, or exits while a descendant keeps
// stdout open, is marked lost after a second.
func (c *stdioConn) run(stdout *os.File) {
	readDone := make(chan struct{})
	go func() {
		c.waitErr = c.cmd.Wait()
		close(c.exited)
		select {
		case <-readDone:
		case <-time.After(time.Second):
			_ = stdout.Close() // unblocks the reader
		}
		c.markDone()
	}()
	c.readLoop(stdout)
	close(readDone)
	select {
	case <-c.exited:
	case <-time.After(time.Second):
	}
	c.markDone()
}

// close ends the child: stdin closed, SIGTERM to its process group, and
// SIGKILL to the group if it is still there after the stop timeout. It
// returns once the child has been reaped. A child that is init of its PID
// namespace gets the SIGTERM only if it handles it (the kernel drops
// signals whose default action would kill an init), so one that neither
// handles nor ignores SIGTERM gets the SIGKILL at once, as it would have
// died of the SIGTERM; one that ignores it lasts until the stop timeout.
// Its death takes the whole namespace with it.
func (c *stdioConn) close() error {
	// Closing stdin also unblocks a writeLoop stuck on a full pipe.
	_ = c.stdin.Close()
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if c.iso != isolationGroup && termIgnoredAsInit(pgid) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what SIGTERM would have done
	}
	select {
	case <-c.exited:
	case <-time.After(c.cmd.WaitDelay):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	}
	// Grandchildren that ignored SIGTERM must not outlive the gateway.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	c.markDone()
	return nil
}

// exitStatus describes how the child ended, for status and logs.
func (c *stdioConn) exitStatus() string {
	select {
	case <-c.exited:
		if c.waitErr == nil {
			return "exited with status 0"
		}
		return c.waitErr.Error()
	default:
		return ""
	}
}
