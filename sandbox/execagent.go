package sandbox

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
)

// supervisorPy runs inside each session container as its main process
// (under docker-init) and starts programs on request, so an execution
// costs a fork in the container instead of a `docker exec` (about 300 ms
// on the reference machine). It speaks JSON lines over the container's
// attached stdin/stdout:
//
//	-> {"id":1,"a":[argv],"d":"/workspace","v":{"K":"V"},"i":"<b64 stdin>","t":30.0}
//	-> {"k":1}                                 kill execution 1's process group
//	<- {"ready":1}                             once, at start
//	<- {"id":1,"s":1}                          execution 1 received (it starts)
//	<- {"id":1,"o":"<b64>"} / {"id":1,"e":"<b64>"}  stdout / stderr chunks
//	<- {"id":1,"x":0,"t":false}                exit code, timed out
//
// Each program gets its own session and process group (setsid); the
// timeout and a kill request SIGKILL the whole group. The exit is
// reported once the program has exited and its output pipes are closed
// (a background process still holding them keeps the call open until
// the timeout, as with docker exec). argv[1] is the per-file size limit
// in bytes (RLIMIT_FSIZE, inherited by every program).
//
// Under gVisor two more limits are kept here, as the kernel keeps them
// under runc: argv[2], when not 0, is each program's address-space
// limit (RLIMIT_AS, the supervisor's own too), so a memory bomb gets ENOMEM instead
// of the host's OOM killer ending the whole sandbox; argv[3], when not 0,
// is the session's task limit, RLIMIT_NPROC, which gVisor keeps inside
// the sandbox over every task of the sandbox's user (the supervisor's
// threads and every program's processes and threads), as the pids cgroup
// does under runc. A fork bomb then meets failing forks until its
// timeout under either runtime. (A watchdog that polled the process count
// instead could not keep up under gVisor's ptrace platform: a bomb grew to
// thousands of host tasks between two polls and the host's pids limit
// ended the whole sandbox.)
//
// Every thread an execution needs (its output readers, stdin
// feeder and timer) is started before its program, so a program that
// forks up to the limit cannot keep the supervisor from timing it out,
// reading its output or reporting its exit; an execution that cannot get
// its threads or its process is refused with exit code 126 and a message
// on stderr, and the supervisor goes on. A killed program's session is
// swept afterwards: processes forked while its group was being killed
// are killed too.
const supervisorPy = `
import base64, json, os, resource, signal, subprocess, sys, threading, time
lim = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
aslim = int(sys.argv[2]) if len(sys.argv) > 2 else 0
maxp = int(sys.argv[3]) if len(sys.argv) > 3 else 0
if aslim:
    # Inherited by every program; set here rather than in each child
    # (preexec_fn) so subprocess keeps its vfork, which matters under
    # gVisor, where a fork of this process costs tens of milliseconds.
    resource.setrlimit(resource.RLIMIT_AS, (aslim, aslim))
if maxp:
    resource.setrlimit(resource.RLIMIT_NPROC, (maxp, maxp))
out = sys.stdout.buffer
wlock = threading.Lock()
procs = {}
def send(m):
    b = json.dumps(m, separators=(",", ":")).encode() + b"\n"
    with wlock:
        out.write(b); out.flush()
def b64(s):
    return base64.b64encode(s.encode()).decode()
def refuse(i, msg):
    send({"id": i, "e": b64("switchboard: " + msg + "\n")}); send({"id": i, "x": 126, "t": False})
def limited():
    return "the session is at its process limit (%d); the program was not started" % maxp if maxp else "the session is at its process limit; the program was not started"
def killpg(p):
    try: os.killpg(p.pid, signal.SIGKILL)
    except OSError: pass
def sweep(sid):
    # Processes of a killed program's session that a fork racing the
    # group kill left behind (live ones only: zombies are being reaped).
    for _ in range(100):
        left = []
        for d in os.listdir("/proc"):
            if not d.isdigit(): continue
            try:
                with open("/proc/%s/stat" % d) as f: st = f.read()
                fs = st[st.rindex(")") + 2:].split()
                if int(fs[3]) == sid and fs[0] != "Z": left.append(int(d))
            except (OSError, ValueError, IndexError): continue
        if not left: return
        for q in left:
            try: os.kill(q, signal.SIGKILL)
            except OSError: pass
        time.sleep(0.01)
def stop(p):
    killpg(p); sweep(p.pid)
def execute(r):
    i = r["id"]
    env = dict(os.environ); env.update(r.get("v") or {})
    stdin = r.get("i")
    box = {}
    go = threading.Event()
    timed = [False]
    def pump(key):
        go.wait()
        p = box.get("p")
        if p is None: return
        f = p.stdout if key == "o" else p.stderr
        while True:
            b = os.read(f.fileno(), 65536)
            if not b: break
            send({"id": i, key: base64.b64encode(b).decode()})
        f.close()
    def feed():
        go.wait()
        p = box.get("p")
        if p is None: return
        try: p.stdin.write(base64.b64decode(stdin))
        except OSError: pass
        try: p.stdin.close()
        except OSError: pass
    def expire():
        timed[0] = True
        p = box.get("p")
        if p: stop(p)
    ts = [threading.Thread(target=pump, args=("o",), daemon=True), threading.Thread(target=pump, args=("e",), daemon=True)]
    if stdin is not None:
        ts.append(threading.Thread(target=feed, daemon=True))
    tm = threading.Timer(r.get("t") or 30, expire); tm.daemon = True
    try:
        for t in ts: t.start()
        tm.start()
    except RuntimeError:
        tm.cancel(); go.set(); refuse(i, limited()); return
    try:
        p = subprocess.Popen(r["a"], cwd=r.get("d") or "/workspace", env=env, start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError as e:
        tm.cancel(); go.set()
        code = 126 if e.filename == (r.get("d") or "/workspace") else 127
        send({"id": i, "e": b64(str(e) + "\n")}); send({"id": i, "x": code, "t": False}); return
    except BlockingIOError:
        tm.cancel(); go.set(); refuse(i, limited()); return
    except Exception as e:
        tm.cancel(); go.set()
        send({"id": i, "e": b64(str(e) + "\n")}); send({"id": i, "x": 126, "t": False}); return
    box["p"] = p
    procs[i] = p
    go.set()
    if timed[0]: stop(p)
    code = p.wait()
    for t in ts: t.join()
    tm.cancel()
    procs.pop(i, None)
    send({"id": i, "x": code if code >= 0 else 128 - code, "t": timed[0]})
send({"ready": 1})
for line in sys.stdin.buffer:
    try: r = json.loads(line)
    except ValueError: continue
    if "k" in r:
        p = procs.get(r["k"])
        if p: stop(p)
        continue
    send({"id": r.get("id"), "s": 1})
    try: threading.Thread(target=execute, args=(r,), daemon=True).start()
    except RuntimeError: refuse(r.get("id"), limited())
`

// supervisorCmd starts the supervisor when the image has python3, and
// otherwise just keeps the container alive: executions then fall back to
// docker exec.
// Under gVisor, asBytes and maxProcs are the limits it keeps itself (0:
// none).
func supervisorCmd(fileBytes, asBytes, maxProcs int64) []string {
	return []string{"sh", "-c", `command -v python3 >/dev/null 2>&1 && exec python3 -u -c "$0" "$1" "$2" "$3"; exec sleep infinity`, supervisorPy, itoa(fileBytes), itoa(asBytes), itoa(maxProcs)}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// supervisor is the gateway's end of one container's supervisor.
type supervisor struct {
	rw   io.ReadWriteCloser
	wmu  sync.Mutex
	mu   sync.Mutex
	next int64
	runs map[int64]*supRun
	dead chan struct{}
	wg   sync.WaitGroup
}

type supRun struct {
	stdout, stderr io.Writer
	done           chan supExit
	started        bool // the supervisor received it; guarded by supervisor.mu
}

type supExit struct {
	code     int
	timedOut bool
}

// errSupervisorGone: the supervisor had ended before the program was
// sent (it did not start); errSupervisorDied: it ended while the program
// ran.
var (
	errSupervisorGone = errors.New("the session's supervisor ended")
	errSupervisorDied = errors.New("the session's supervisor ended during the execution")
)

// startSupervisor reads the supervisor's greeting from rw within wait;
// it returns nil when none comes (no python3 in the image) so the
// session uses docker exec.
func startSupervisor(rw io.ReadWriteCloser, wait time.Duration) *supervisor {
	s := &supervisor{rw: rw, runs: map[int64]*supRun{}, dead: make(chan struct{})}
	br := bufio.NewReaderSize(rw, 128<<10)
	ready := make(chan bool, 1)
	s.wg.Go(func() { s.read(br, ready) })
	select {
	case ok := <-ready:
		if ok {
			return s
		}
	case <-time.After(wait):
	}
	_ = rw.Close()
	s.wg.Wait()
	return nil
}

func (s *supervisor) read(br *bufio.Reader, ready chan<- bool) {
	greeted := false
	defer func() {
		if !greeted {
			ready <- false
		}
		s.mu.Lock()
		close(s.dead)
		for id, r := range s.runs {
			delete(s.runs, id)
			close(r.done)
		}
		s.mu.Unlock()
	}()
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			Ready int    `json:"ready"`
			ID    int64  `json:"id"`
			O     string `json:"o"`
			E     string `json:"e"`
			X     *int   `json:"x"`
			T     bool   `json:"t"`
			S     int    `json:"s"`
		}
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Ready == 1 && !greeted {
			greeted = true
			ready <- true
			continue
		}
		s.mu.Lock()
		r := s.runs[m.ID]
		if r != nil && m.X != nil {
			delete(s.runs, m.ID)
		}
		if r != nil && m.S == 1 {
			r.started = true
		}
		s.mu.Unlock()
		if r == nil {
			continue
		}
		if m.O != "" {
			if b, err := base64.StdEncoding.DecodeString(m.O); err == nil {
				_, _ = r.stdout.Write(b)
			}
		}
		if m.E != "" {
			if b, err := base64.StdEncoding.DecodeString(m.E); err == nil {
				_, _ = r.stderr.Write(b)
			}
		}
		if m.X != nil {
			r.done <- supExit{code: *m.X, timedOut: m.T}
		}
	}
}

func (s *supervisor) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.rw.Write(append(b, '\n'))
	return err
}

// alive reports whether the supervisor still answers.
func (s *supervisor) alive() bool {
	select {
	case <-s.dead:
		return false
	default:
		return true
	}
}

// run executes argv and waits for its exit. When ctx ends first the
// program's process group is killed and ctx.Err() returned; when the
// supervisor is gone, errSupervisorGone (before the program started) or
// errSupervisorDied.
func (s *supervisor) run(ctx context.Context, argv []string, dir string, env map[string]string, stdin *string, timeout time.Duration, stdout, stderr io.Writer) (supExit, error) {
	s.mu.Lock()
	if !s.alive() {
		s.mu.Unlock()
		return supExit{}, errSupervisorGone
	}
	s.next++
	id := s.next
	r := &supRun{stdout: stdout, stderr: stderr, done: make(chan supExit, 1)}
	s.runs[id] = r
	s.mu.Unlock()
	req := map[string]any{"id": id, "a": argv, "d": dir, "v": env, "t": timeout.Seconds()}
	if stdin != nil {
		req["i"] = base64.StdEncoding.EncodeToString([]byte(*stdin))
	}
	if err := s.send(req); err != nil {
		s.mu.Lock()
		delete(s.runs, id)
		s.mu.Unlock()
		return supExit{}, errSupervisorGone
	}
	select {
	case ex, ok := <-r.done:
		if !ok {
			s.mu.Lock()
			started := r.started
			s.mu.Unlock()
			if !started {
				return supExit{}, errSupervisorGone
			}
			return supExit{}, errSupervisorDied
		}
		return ex, nil
	case <-ctx.Done():
		_ = s.send(map[string]any{"k": id})
		// Wait (briefly) for the kill to land so nothing writes to the
		// caller's writers after we return.
		select {
		case <-r.done:
		case <-time.After(5 * time.Second):
			s.mu.Lock()
			delete(s.runs, id)
			s.mu.Unlock()
		}
		return supExit{}, ctx.Err()
	}
}

// close detaches from the supervisor and waits for the reader.
func (s *supervisor) close() {
	_ = s.rw.Close()
	s.wg.Wait()
}
