package main

import (
	"errors"
	"strconv"
	"syscall"
)

// processGone reports whether no process with the given decimal pid exists.
func processGone(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(n, 0), syscall.ESRCH)
}
