// Command sockrelay measures a way around Docker's attach for a stdio
// server in a container (bench: BenchmarkAttachRelay, mode socket): run
// inside the container as `sockrelay SOCKET COMMAND [ARG...]`, it listens
// on the unix socket SOCKET (in a directory bind-mounted from the host),
// starts COMMAND on the first connection with that connection as its stdin
// and stdout, so the host talks to the server directly, not through
// dockerd and the containerd shim. An experiment, not part of the gateway.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sockrelay SOCKET COMMAND [ARG...]")
		os.Exit(2)
	}
	_ = os.Remove(os.Args[1])
	l, err := net.Listen("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, err := l.Accept()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The connection itself is the server's stdin and stdout: nothing
	// copies in between.
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[2], os.Args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = f, f, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
