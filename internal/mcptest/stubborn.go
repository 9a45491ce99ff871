package mcptest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// orphanMode is the SWITCHBOARD_FIXTURE value of a stubborn fixture's
// grandchild.
const orphanMode = "orphan"

// beStubborn ignores SIGTERM from now on and starts the grandchild, then
// writes its pid to path (see [EnvFixtureStubborn]).
func beStubborn(path string) error {
	signal.Ignore(syscall.SIGTERM)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), EnvFixture+"="+orphanMode) // the last value wins
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	// Not waited for: it is meant to outlive us.
	pid, err := io.ReadAll(out)
	if err != nil {
		return err
	}
	if _, err := strconv.Atoi(strings.TrimSpace(string(pid))); err != nil {
		return fmt.Errorf("grandchild sent %q, not a pid", pid)
	}
	return os.WriteFile(path, pid, 0o644)
}

// runOrphan is the stubborn fixture's grandchild: it tells its pid on
// stdout, closes it and lives on, deaf to SIGTERM and SIGHUP.
func runOrphan() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP)
	fmt.Println(procPid())
	_ = os.Stdout.Close()
	sleepForever()
}

// sleepForever blocks without the runtime calling it a deadlock.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// procPid is this process's id as /proc names it: inside a PID namespace
// of its own (with the host's /proc) that is the host's pid, which a test
// outside can find and signal, where os.Getpid would say 1.
func procPid() int {
	if s, err := os.Readlink("/proc/self"); err == nil {
		if pid, err := strconv.Atoi(s); err == nil {
			return pid
		}
	}
	return os.Getpid()
}
