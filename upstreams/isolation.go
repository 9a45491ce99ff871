package upstreams

import (
	"log/slog"
	"sync"
)

// isolation is how a stdio child and everything it starts are tied to the
// gateway's life.
type isolation int

const (
	// isolationProbe: not chosen yet, probe once per process.
	isolationProbe isolation = iota
	// isolationGroup: a process group; on Linux the child also dies with
	// the gateway (parent-death signal), what it started may not.
	isolationGroup
	// isolationUserPIDNS: a PID namespace inside a user namespace that
	// maps only the gateway's uid and gid (no CAP_SYS_ADMIN needed).
	isolationUserPIDNS
	// isolationPIDNS: a PID namespace (CAP_SYS_ADMIN). With either,
	// nothing the child started outlives the gateway.
	isolationPIDNS
)

func (i isolation) String() string {
	switch i {
	case isolationPIDNS:
		return "pid namespace"
	case isolationUserPIDNS:
		return "user and pid namespace"
	case isolationGroup:
		return "process group"
	}
	return "not probed"
}

var (
	probeOnce sync.Once
	probed    isolation
)

// processIsolation probes, once per process, the strongest isolation the
// kernel grants and logs it to the first caller's logger (the gateway
// builds its first Manager at start).
func processIsolation(log *slog.Logger) isolation {
	probeOnce.Do(func() {
		probed = probeIsolation()
		if probed == isolationGroup {
			log.Warn("stdio children run in a process group only: without a PID namespace (it needs CAP_SYS_ADMIN or unprivileged user namespaces), processes a child started can outlive a kill -9 of the gateway", "isolation", probed.String())
			return
		}
		log.Info("stdio children run as init of a PID namespace each: none of their processes outlives the gateway, even a kill -9 of it", "isolation", probed.String())
	})
	return probed
}

// probeIsolation returns the strongest isolation the kernel grants this
// process: on Linux a PID namespace needs CAP_SYS_ADMIN; a user namespace
// instead needs unprivileged user namespaces (often off, and blocked by
// Docker's default seccomp profile).
func probeIsolation() isolation {
	for _, iso := range []isolation{isolationPIDNS, isolationUserPIDNS} {
		if isolationWorks(iso) {
			return iso
		}
	}
	return isolationGroup
}
