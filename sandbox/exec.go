package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// Result is the outcome of one execution, as execute_code and
// execute_command return it.
type Result struct {
	SessionID       string `json:"session_id"`
	SessionCreated  bool   `json:"session_created"`
	Template        string `json:"template"`
	Flavor          string `json:"flavor"`
	WorkspaceID     string `json:"workspace_id,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	ExitCode        *int   `json:"exit_code"`
	ExecutionTimeMS int64  `json:"execution_time_ms"`
	TimedOut        bool   `json:"timed_out"`
	Success         bool   `json:"success"`
}

// execute runs r for project, in r's session or a new one. agent is
// the calling agent session (sessionless for a call without one);
// person the signed-in person behind the call ("" none), to whom a new
// session is bound and whom a named one must be reachable by.
func (s *Service) execute(ctx context.Context, project, agent, person string, r request, progress func(stream, chunk string)) (Result, error) {
	var x *session
	created := false
	if r.hasSession {
		var err error
		if x, err = s.lookupAs(project, person, r.sessionID); err != nil {
			return Result{}, err
		}
		if err := checkHolder(x, agent, r.tool); err != nil {
			return Result{}, err
		}
		if r.flavor != "" && r.flavor != x.flavor {
			return Result{}, invalid("%s: session %s is flavor %s; a session's flavor cannot change (omit flavor, or omit session_id to start a %s session)", r.tool, x.id, x.flavor, r.flavor)
		}
		if r.tool == ToolExecuteCommand && r.template != "" && r.template != x.template {
			return Result{}, invalid("%s: session %s was started with template %s; omit template, or omit session_id to start a %s session", r.tool, x.id, x.template, r.template)
		}
	} else {
		var err error
		if x, err = s.create(ctx, project, visible(agent), r.template, r.flavor); err != nil {
			return Result{}, err
		}
		if err := s.bind(ctx, x, person); err != nil {
			return Result{}, err
		}
		created = true
	}
	res, err := s.run(ctx, x, visible(agent), r, created, progress, false)
	if created {
		// After the first command, not before: on a small machine a
		// container being made beside it slows it down.
		defer s.refill(poolKey{project, x.template, x.flavor})
	}
	var ns notStarted
	if errors.As(err, &ns) {
		// The program did not start: the session's supervisor or its
		// container was gone. Heal the session and run it once more.
		res, err = s.run(ctx, x, visible(agent), r, created, progress, ns.gone)
		if errors.As(err, &ns) {
			err = switchboard.Errorf(switchboard.ErrInternal, "%s: the session's container does not answer after a restart; stop it (stop_session) and start a new one", r.tool)
		}
	}
	return res, err
}

// bind binds the new session x to person (none: x stays the project's)
// and records it on x's workspace row, where a replica that resumes x
// finds it. A binding that cannot be recorded ends x: a session that a
// resume would hand to anyone is not started. Errors: the store's.
func (s *Service) bind(ctx context.Context, x *session, person string) error {
	if person == "" {
		return nil
	}
	x.mu.Lock()
	x.person = person
	x.mu.Unlock()
	if s.opts.Store == nil {
		return nil
	}
	_, _, err := s.updateRow(ctx, x.workspaceID, func(_ *switchboard.Workspace, cfg *workspaceConfig) bool {
		cfg.Person = person
		return true
	})
	if err != nil {
		if e := s.end(context.WithoutCancel(ctx), x, "its person could not be recorded"); e != nil {
			s.log.Warn("sandbox: stopping a session whose person could not be recorded", "sandbox_session", x.id, "err", e)
		}
		return err
	}
	return nil
}

// notStarted is why an execution did not start: its session's
// supervisor had ended, or (gone) its container was no longer there.
type notStarted struct{ gone bool }

func (notStarted) Error() string { return "the execution did not start" }

// run runs r in session x. healGone says the container was found gone:
// a new one is started on the workspace first.
func (s *Service) run(ctx context.Context, x *session, agent string, r request, created bool, progress func(stream, chunk string), healGone bool) (Result, error) {
	x.exec.RLock()
	defer x.exec.RUnlock()
	x.mu.Lock()
	if x.stopped {
		x.mu.Unlock()
		return Result{}, switchboard.Errorf(switchboard.ErrNotFound, "session not found: %q was stopped", x.id)
	}
	x.running++
	x.lastUsed = time.Now()
	if agent != "" {
		x.agentSession = agent
	}
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.running--
		x.lastUsed = time.Now()
		x.mu.Unlock()
		s.touchWorkspace(x, "", nil)
	}()

	res := Result{SessionID: x.id, SessionCreated: created, Template: x.template, Flavor: x.flavor, WorkspaceID: x.workspaceID}
	if r.tool == ToolExecuteCode {
		res.Template = orDefault(r.template, "python")
	}
	out := &capped{limit: s.opts.OutputLimit}
	errw := &capped{limit: s.opts.OutputLimit}
	if progress != nil {
		out.onWrite = func(b []byte) { progress("stdout", string(b)) }
		errw.onWrite = func(b []byte) { progress("stderr", string(b)) }
	}
	if sup, err := s.supervisorOf(ctx, x, healGone); err != nil {
		return Result{}, err
	} else if sup != nil && !s.opts.NoSupervisor {
		return s.superviseExec(ctx, x, sup, r, res, out, errw)
	}
	execID := newID("")
	secs := fmt.Sprintf("%.3f", r.timeout.Seconds())
	// The wrapper records its pid (= the process group timeout makes) for
	// a cancellation, enters working_dir, then becomes timeout, which
	// kills its whole process group when the time is up.
	// ulimit -f caps each file written (in 512-byte blocks): volumes have
	// no quota, so one runaway write cannot fill the host's disk.
	script := `mkdir -p /tmp/.switchboard 2>/dev/null; echo $$ > /tmp/.switchboard/` + execID + `; ulimit -f "$2"; cd -- "$1" || exit 126; shift 2; exec timeout -s KILL "$@"`
	blocks := strconv.FormatInt(s.fileBytes(x.flavor)/512, 10)
	spec := engine.ExecSpec{
		Cmd:    append([]string{"sh", "-c", script, "sh", r.workingDir, blocks, secs}, r.argv...),
		Env:    r.env,
		Stdout: out,
		Stderr: errw,
	}
	if r.stdin != nil {
		spec.Stdin = strings.NewReader(*r.stdin)
	}
	ectx, cancel := context.WithTimeout(ctx, r.timeout+s.opts.KillGrace)
	defer cancel()
	start := time.Now()
	code, err := s.opts.Engine.Exec(ectx, x.container(), spec)
	elapsed := time.Since(start)
	res.ExecutionTimeMS = elapsed.Milliseconds()
	if errors.Is(err, switchboard.ErrNotFound) && ctx.Err() == nil {
		return Result{}, notStarted{gone: true}
	}
	if err != nil {
		// The call was cancelled, or output kept flowing past the
		// timeout (a process escaped the group): kill what is left.
		s.killGroup(x, execID)
		if ctx.Err() != nil {
			return Result{}, switchboard.Errorf(switchboard.ErrCanceled, "%s: cancelled; every process of the call was killed", r.tool)
		}
		if ectx.Err() == nil {
			return Result{}, engineError(err)
		}
		res.TimedOut = true
	} else if (code == 137 || code == 124) && elapsed >= r.timeout {
		res.TimedOut = true
	} else {
		res.ExitCode = &code
		res.Success = code == 0
	}
	res.Stdout, res.StdoutTruncated, res.StdoutBytes = out.result()
	res.Stderr, res.StderrTruncated, res.StderrBytes = errw.result()
	return res, nil
}

// killGroup kills the process group of execution execID, if any is left.
func (s *Service) killGroup(x *session, execID string) {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	f := "/tmp/.switchboard/" + execID
	_, err := s.opts.Engine.Exec(ctx, x.container(), engine.ExecSpec{
		Cmd:    []string{"sh", "-c", `p=$(cat "$1" 2>/dev/null) && kill -KILL "-$p" 2>/dev/null; rm -f "$1"`, "sh", f},
		Stdout: io.Discard, Stderr: io.Discard,
	})
	if err != nil {
		s.log.Warn("sandbox: killing a cancelled execution", "sandbox_session", x.id, "err", err)
	}
}

// capped keeps the first limit bytes written and counts the rest.
type capped struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	total   int64
	onWrite func([]byte)
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(room, len(p))]...)
	}
	if c.onWrite != nil {
		c.onWrite(p)
	}
	return len(p), nil
}

func (c *capped) result() (string, bool, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf
	trunc := c.total > int64(len(b))
	if trunc {
		// Cut at a rune boundary, not mid-character.
		for i := 0; i < 3 && len(b) > 0 && b[len(b)-1]&0xC0 == 0x80; i++ {
			b = b[:len(b)-1]
		}
		if len(b) > 0 && b[len(b)-1] >= 0xC0 {
			b = b[:len(b)-1]
		}
	}
	return string(b), trunc, c.total
}

// superviseExec runs r through x's supervisor.
func (s *Service) superviseExec(ctx context.Context, x *session, sup *supervisor, r request, res Result, out, errw *capped) (Result, error) {
	env := make(map[string]string, len(r.env))
	for _, kv := range r.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	ectx, cancel := context.WithTimeout(ctx, r.timeout+s.opts.KillGrace)
	defer cancel()
	start := time.Now()
	ex, err := sup.run(ectx, r.argv, r.workingDir, env, r.stdin, r.timeout, out, errw)
	res.ExecutionTimeMS = time.Since(start).Milliseconds()
	switch {
	case err == nil && ex.timedOut:
		res.TimedOut = true
	case err == nil:
		res.ExitCode = &ex.code
		res.Success = ex.code == 0
	case ctx.Err() != nil:
		return Result{}, switchboard.Errorf(switchboard.ErrCanceled, "%s: cancelled; every process of the call was killed", r.tool)
	case ectx.Err() != nil:
		res.TimedOut = true
	case errors.Is(err, errSupervisorGone):
		return Result{}, notStarted{}
	default:
		return Result{}, switchboard.Errorf(switchboard.ErrInternal, "%s: the session's supervisor ended (a program killed it, or ran out of memory); its processes were stopped, and the next call restarts the session's container with its files", r.tool)
	}
	res.Stdout, res.StdoutTruncated, res.StdoutBytes = out.result()
	res.Stderr, res.StderrTruncated, res.StderrBytes = errw.result()
	return res, nil
}
