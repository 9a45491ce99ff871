//go:build !linux

package upstreams

import "syscall"

// sysProcAttr starts a stdio child in its own process group, so that a
// stop signals its descendants too. Without Linux's parent-death signal
// and PID namespaces nothing ends the child if the gateway is killed.
func sysProcAttr(isolation) *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func isolationWorks(iso isolation) bool { return iso == isolationGroup }

// termIgnoredAsInit: no PID namespaces, so SIGTERM was delivered.
func termIgnoredAsInit(int) bool { return false }
