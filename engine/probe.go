package engine

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// probeScript is the runtime probe: what sessions and hosted servers
// need of a runtime, step by step, each announced on stdout before it
// runs ("step NAME"), so a container that dies names the step it died in.
// It ends with "ok". Python steps run only where the image has python3
// (the sandbox image has; its supervisor is Python).
const probeScript = `
step() { echo "step $1"; }
fail() { echo "FAIL $*"; exit 1; }
step attach
read -r l || fail "stdin: nothing read"
[ "$l" = ping ] || fail "stdin: read $l"
step metadata
out=$(ls -l / 2>&1) || fail "ls -l /: $out"
echo x > /tmp/f || fail "write /tmp/f"
out=$(ls -ln /tmp/f 2>&1) || fail "ls -ln /tmp/f: $out"
if command -v stat >/dev/null 2>&1; then out=$(stat /tmp/f 2>&1) || fail "stat /tmp/f: $out"; fi
if [ -n "$NETWORK" ]; then
step network
grep -qv -e '^ *lo:' -e '|' /proc/net/dev || fail "no network interface but lo on a bridge network"
fi
step program
sh -c 'exit 3'; [ $? -eq 3 ] || fail "a program's exit code was lost"
if command -v python3 >/dev/null 2>&1; then
step supervisor
out=$(python3 -c '
import os, subprocess
p = subprocess.Popen(["sh", "-c", "echo hi; echo err >&2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
o, e = p.communicate()
assert (o, e, p.returncode) == (b"hi\n", b"err\n", 0), (o, e, p.returncode)
os.stat("/tmp/f")
print("ok")' 2>&1) || fail "a program started as the sandbox's supervisor does: $out"
step file-size-limit
out=$(python3 -c '
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
try:
    with open("/tmp/big", "wb") as f: f.write(b"x" * (2 << 20))
    print("not enforced")
except OSError:
    print("ok")' 2>&1)
[ "$out" = ok ] || fail "a file size limit (RLIMIT_FSIZE): $out"
rm -f /tmp/big
step disk-full
python3 -c '
try:
    with open("/tmp/fill", "wb") as f:
        while True: f.write(b"x" * (1 << 20))
except OSError:
    pass' >/dev/null 2>&1
rm -f /tmp/fill
step memory-limit
# Under gVisor the limit is each program's address space (RLIMIT_AS), as
# the sandbox's supervisor sets it; the cgroup's would end the sandbox.
[ -z "$GVISOR" ] || ulimit -v 65536
python3 -c 'b = bytearray(256 << 20); print(len(b))' >/dev/null 2>&1
rc=$?
[ -z "$GVISOR" ] || ulimit -v unlimited 2>/dev/null
[ $rc -ne 0 ] || fail "memory limit not enforced: a program used 256 MiB of 64 MiB"
step processes
# Up to the process limit (32), programs run side by side; beyond it,
# under runc, a fork fails (EAGAIN). Under gVisor the host's limit is
# raised for the sandbox's own tasks and the guest's is the caller's to
# keep (the supervisor's count), so only the first half is checked.
out=$(python3 -c '
import os, sys, time
kids = []
try:
    for _ in range(24 if sys.argv[1] else 200):
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        kids.append(pid)
    print("ok" if sys.argv[1] else "not enforced")
except OSError as e:
    print("ok" if not sys.argv[1] else "fork %d failed: %s" % (len(kids) + 1, e))
for k in kids:
    os.kill(k, 9)
for k in kids:
    os.waitpid(k, 0)' "$GVISOR" 2>&1)
[ "$out" = ok ] || fail "process limit: $out"
fi
step done
echo ok
`

// probeTimeout bounds one probe container's run.
const probeTimeout = 90 * time.Second

// runProbe runs the probe in a short container under runtime name: first
// on the default bridge network, then, when that fails (the start, or no
// interface but loopback), without one.
func (e *Engine) runProbe(ctx context.Context, name string) probeResult {
	img := e.rt.probeImage
	if img == "" {
		return probeResult{skipped: "no probe image is configured"}
	}
	ok, err := e.ImageExists(ctx, img)
	switch {
	case err != nil:
		return probeResult{err: err}
	case !ok:
		return probeResult{skipped: fmt.Sprintf("the probe image %s is not in the engine; build it with `switchboard sandbox build-image`", img)}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	netErr := e.probeOnce(ctx, name, img, "bridge")
	if netErr == nil {
		return probeResult{}
	}
	// Whatever failed on the bridge (the start, or the network step) is
	// tried without a network: a runtime that works only there is still
	// good for sessions and servers without one.
	if err := e.probeOnce(ctx, name, img, "none"); err != nil {
		return probeResult{err: err}
	}
	return probeResult{noNetwork: netErr}
}

func (e *Engine) probeOnce(ctx context.Context, runtime, img, network string) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	spec := Spec{
		Name:       Name("probe", runtime, hex.EncodeToString(b[:])),
		Image:      img,
		Entrypoint: []string{"sh", "-c", probeScript},
		Cmd:        []string{},
		User:       "1000:1000",
		WorkingDir: "/tmp",
		Labels:     map[string]string{LabelKind: "helper", LabelRef: "runtime-probe"},
		Stdin:      true,
		// A gateway that ends mid-probe (stopped, killed) cannot remove
		// it: it ends and goes by itself (its read of stdin fails).
		Ephemeral:    true,
		NanoCPUs:     1e9,
		MemoryBytes:  64 << 20,
		PidsLimit:    32,
		Network:      network,
		ReadOnlyRoot: true,
		Tmpfs:        map[string]string{"/tmp": "rw,nosuid,nodev,size=16m"},
		Runtime:      runtime,
		StopTimeout:  time.Second,
	}
	if info, ok := e.KnownInfo(); ok && info.isGVisor(runtime) {
		spec.Env = append(spec.Env, "GVISOR=1")
	}
	if network != "none" {
		spec.Env = append(spec.Env, "NETWORK=1")
	}
	run, err := e.Launch(ctx, spec, ctx)
	if err != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "the engine could not start a container under %s on network %s: %s", runtime, network, switchboard.Message(err))
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = run.Stream.Close()
		if err := e.Remove(rctx, run.ID); err != nil {
			e.log.Warn("engine: removing a runtime probe container", "container", run.ID, "err", err)
		}
	}()
	if _, err := run.Stream.Write([]byte("ping\n")); err != nil {
		return switchboard.Errorf(switchboard.ErrConfig, "step attach: writing to the container's stdin: %s", err)
	}
	stepc := make(chan string, 1)
	go func() {
		step, last := "start", ""
		sc := bufio.NewScanner(run.Stream)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "step "):
				step = strings.TrimPrefix(line, "step ")
			case line == "ok":
				step = ""
			default:
				last = strings.TrimPrefix(line, "FAIL ")
			}
		}
		if step != "" && last != "" {
			step += ": " + last
		}
		stepc <- step
	}()
	var step string
	select {
	case step = <-stepc:
	case <-ctx.Done():
		_ = run.Stream.Close()
		return switchboard.Errorf(switchboard.ErrConfig, "the probe did not finish within %s (last step: %s)", probeTimeout, <-stepc)
	}
	if step == "" {
		return nil
	}
	msg := "step " + step
	select {
	case ex := <-run.Exited:
		if ex.Code != 1 {
			// Not the script's own failure: the container died.
			msg += fmt.Sprintf(" (the container died: exit %d", ex.Code)
			if ex.OOMKilled {
				msg += ", OOM-killed"
			}
			msg += ")"
		}
	case <-time.After(5 * time.Second):
	}
	if tail := strings.TrimSpace(run.Stream.Stderr()); tail != "" {
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		msg += "; stderr: " + tail
	}
	return switchboard.Errorf(switchboard.ErrConfig, "%s", msg)
}
