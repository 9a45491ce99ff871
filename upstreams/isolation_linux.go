package upstreams

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr starts a stdio child in its own process group, so that a
// stop signals its descendants too, with SIGKILL as its parent-death
// signal, so that it dies with the gateway even of kill -9; with a PID
// namespace it is also the namespace's init, and when init dies the
// kernel kills every process left in the namespace, descendants that
// called setsid included.
//
// The parent-death signal fires when the thread that forked ends, not the
// process (go.dev/issue/27505). We do not pin that thread with
// runtime.LockOSThread: the Go runtime ends a thread only when a
// goroutine locked to it exits without unlocking, which nothing in the
// gateway does, while pinning would cost an idle OS thread per child.
func sysProcAttr(iso isolation) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	switch iso {
	case isolationPIDNS:
		a.Cloneflags = syscall.CLONE_NEWPID
	case isolationUserPIDNS:
		// Without CAP_SYS_ADMIN, a user namespace that maps only our own
		// uid and gid lets us create the PID namespace; the child runs as
		// the same user, and files of other owners look owned by nobody.
		a.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getuid(), HostID: os.Getuid(), Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: os.Getgid(), HostID: os.Getgid(), Size: 1}}
	}
	return a
}

// isolationWorks forks with iso's attributes and execs the empty path:
// ENOENT can only come from that exec, so the clone (and the id mapping)
// worked, and nothing ran.
func isolationWorks(iso isolation) bool {
	_, err := syscall.ForkExec("", []string{""}, &syscall.ProcAttr{Sys: sysProcAttr(iso)})
	return errors.Is(err, syscall.ENOENT)
}

// termIgnoredAsInit reports whether pid, a namespace's init, would have
// died of SIGTERM as an ordinary process: it neither catches nor ignores
// it (the kernel drops such a signal for an init). A stop then sends
// SIGKILL at once, as quick as a SIGTERM used to be, instead of waiting
// out the stop timeout.
func termIgnoredAsInit(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	const term = 1 << (syscall.SIGTERM - 1)
	var caught, ignored uint64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		switch {
		case err != nil:
		case k == "SigCgt":
			caught = n
		case k == "SigIgn":
			ignored = n
		}
	}
	return caught&term == 0 && ignored&term == 0
}
