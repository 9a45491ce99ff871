package engine

import (
	"context"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/switchboard-mcp/switchboard"
)

// ExecSpec is a process to run inside a running container.
type ExecSpec struct {
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	// Stdin, when set, is copied to the process and then closed.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it.
	Stdout, Stderr io.Writer
}

// Exec runs s in container id and returns its exit code once it ends and
// its output has been delivered. When ctx ends first, Exec returns
// ctx.Err() at once; the engine does not kill the process, so a caller
// that needs it gone kills its process group itself.
func (e *Engine) Exec(ctx context.Context, id string, s ExecSpec) (int, error) {
	if len(s.Cmd) == 0 {
		return -1, switchboard.Errorf(switchboard.ErrInvalid, "exec: a command is required")
	}
	cr, err := e.cli.ExecCreate(ctx, id, client.ExecCreateOptions{
		User: s.User, Env: s.Env, WorkingDir: s.WorkingDir, Cmd: s.Cmd,
		AttachStdin: s.Stdin != nil, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return -1, e.wrap(err, "exec")
	}
	hj, err := e.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return -1, e.wrap(err, "exec")
	}
	defer hj.Close()
	stdout, stderr := s.Stdout, s.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	if s.Stdin != nil {
		go func() {
			// Ends when stdin is exhausted or the connection closes
			// (hj.Close above, when Exec returns).
			_, _ = io.Copy(hj.Conn, s.Stdin)
			_ = hj.CloseWrite()
		}()
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		copied <- err
	}()
	select {
	case err := <-copied:
		if err != nil && ctx.Err() == nil {
			return -1, e.wrap(err, "exec output")
		}
	case <-ctx.Done():
		hj.Close()
		<-copied // the writers are the caller's: never touch them after return
		return -1, ctx.Err()
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	ins, err := e.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
	if err != nil {
		return -1, e.wrap(err, "exec inspect")
	}
	return ins.ExitCode, nil
}
