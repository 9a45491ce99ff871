package projects

import (
	"context"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard"
)

// lastStates is what the store remembers of a project's servers: the
// last state each was seen in (by this process before it restarted, or by
// another replica) and why. A server this process has not connected yet
// is "idle"; its status shows the remembered state and error instead, so
// a broken server does not read idle with no error after a restart.
type lastStates struct {
	mu     sync.Mutex
	loaded bool
	known  map[string]switchboard.ServerLastState
}

// remembered reports whether st is a state worth keeping across restarts.
func remembered(st switchboard.ServerState) bool {
	switch st {
	case switchboard.StateReady, switchboard.StateFailed, switchboard.StateUnavailable, switchboard.StateInvalid:
		return true
	}
	return false
}

// load reads project's remembered states once; a store that cannot
// answer is asked again next time.
func (l *lastStates) load(ctx context.Context, st switchboard.ServerStateStore, project string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loaded || st == nil {
		return
	}
	list, err := st.ServerStates(ctx, project)
	if err != nil {
		return
	}
	if l.known == nil {
		l.known = map[string]switchboard.ServerLastState{}
	}
	for _, s := range list {
		if _, seen := l.known[s.Server]; !seen { // this process saw it later
			l.known[s.Server] = s
		}
	}
	l.loaded = true
}

// record keeps server's new state and error, here and in the store.
func (l *lastStates) record(st switchboard.ServerStateStore, project, server string, state switchboard.ServerState, lastErr string) {
	if !remembered(state) {
		return
	}
	s := switchboard.ServerLastState{ProjectID: project, Server: server, State: state, Error: lastErr, At: time.Now().UTC()}
	l.mu.Lock()
	if prev, ok := l.known[server]; ok && prev.State == state && prev.Error == lastErr {
		l.mu.Unlock()
		return
	}
	if l.known == nil {
		l.known = map[string]switchboard.ServerLastState{}
	}
	l.known[server] = s
	l.mu.Unlock()
	if st == nil {
		return
	}
	// A state change is rare (a connect, a failure): written at once,
	// bounded so a store that does not answer does not hold the connect.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = st.PutServerState(ctx, s)
}

// fill shows, for each server this process has not connected yet, the
// state it was last seen in, its error and when.
func (l *lastStates) fill(out []switchboard.ServerStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range out {
		k, ok := l.known[out[i].Name]
		if !ok || out[i].State != switchboard.StateIdle || k.State == switchboard.StateReady {
			continue
		}
		at := k.At
		out[i].State, out[i].LastError, out[i].SeenAt = k.State, k.Error, &at
	}
}
