package engine

import (
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
)

// engineSeesDir checks that the process serving the engine's socket (the
// daemon, or systemd for a socket-activated one) runs as root on this
// host and sees dir as this process does: the engine resolves a sized
// volume's device path in its own mount namespace, and a rootless engine
// or Docker Desktop's VM cannot mount ext4 images from here.
func engineSeesDir(sock, dir string) error {
	c, err := net.DialTimeout("unix", sock, 2*time.Second)
	if err != nil {
		return errEngineUnreachable
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return errors.New("the Docker engine's socket does not say who serves it")
	}
	if cred.Uid != 0 {
		return errors.New("the Docker engine does not run as root on this host (rootless Docker or Docker Desktop)")
	}
	mine, err := os.Stat(dir)
	if err != nil {
		return errors.New("the disk directory cannot be read")
	}
	theirs, err := os.Stat("/proc/" + strconv.Itoa(int(cred.Pid)) + "/root" + dir)
	if err != nil || !os.SameFile(mine, theirs) {
		return errors.New("the Docker engine does not see the disk directory at the same path")
	}
	return nil
}
