package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// sessions is the session-ID manager for the streamable endpoint (it
// implements mcp-go's SessionIdManager). It differs from mcp-go's own in
// two ways that matter for a long-running gateway: terminated IDs are
// forgotten after a while instead of kept forever, and it knows when each
// session was last used, including by requests Switchboard answers itself,
// so idle expiry never hits a busy session.
type sessions struct {
	mu      sync.Mutex
	live    map[string]*sessionInfo
	dead    map[string]time.Time
	idleTTL time.Duration
	now     func() time.Time
	// onEnd hears every session that leaves live (Options.OnSessionEnd):
	// whoever removes it from live calls it, so it runs once per session.
	onEnd func(id string)
	// onNew, when set, hears that a session was issued (the edge starts
	// its idle sweeper with the first one).
	onNew func()
}

type sessionInfo struct {
	lastSeen time.Time
	streams  int    // open GET streams keep a session alive
	owner    string // the principal that opened it (Options.Principal)
}

var errUnknownSession = errors.New("unknown session")

func newSessions(idleTTL time.Duration, onEnd func(string)) *sessions {
	return &sessions{live: map[string]*sessionInfo{}, dead: map[string]time.Time{}, idleTTL: idleTTL, now: time.Now, onEnd: onEnd}
}

// Generate issues a new cryptographically random session ID.
func (s *sessions) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := "mcp-" + hex.EncodeToString(b[:])
	s.mu.Lock()
	s.live[id] = &sessionInfo{lastSeen: s.now()}
	s.mu.Unlock()
	if s.onNew != nil {
		s.onNew()
	}
	return id
}

// Validate reports whether id is a live session, touching it.
func (s *sessions) Validate(id string) (isTerminated bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if info, ok := s.live[id]; ok {
		info.lastSeen = s.now()
		return false, nil
	}
	if _, ok := s.dead[id]; ok {
		return true, nil
	}
	return false, errUnknownSession
}

// Terminate ends a session; later requests with its ID get 404. mcp-go
// calls it for a DELETE, which is also how the edge ends idle sessions
// and, through mcp-go's Shutdown, open ones.
func (s *sessions) Terminate(id string) (isNotAllowed bool, err error) {
	if s.end(id) && s.onEnd != nil {
		s.onEnd(id)
	}
	return false, nil
}

// end moves a live session to the dead and reports whether it was live.
func (s *sessions) end(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[id]; !ok {
		return false
	}
	delete(s.live, id)
	s.dead[id] = s.now()
	return true
}

// discard ends a session that never started (its initialize failed)
// without reporting it: nothing downstream ever saw its id.
func (s *sessions) discard(id string) { s.end(id) }

// endAll ends every live session, reporting each (Shutdown).
func (s *sessions) endAll() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.live))
	for id := range s.live {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		_, _ = s.Terminate(id)
	}
}

func (s *sessions) streamOpened(id string) {
	s.mu.Lock()
	if info, ok := s.live[id]; ok {
		info.streams++
		info.lastSeen = s.now()
	}
	s.mu.Unlock()
}

func (s *sessions) streamClosed(id string) {
	s.mu.Lock()
	if info, ok := s.live[id]; ok {
		info.streams--
		info.lastSeen = s.now()
	}
	s.mu.Unlock()
}

// expired returns live sessions idle for longer than the TTL (with no open
// stream) and forgets tombstones older than the TTL.
func (s *sessions) expired() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var out []string
	for id, info := range s.live {
		if info.streams <= 0 && now.Sub(info.lastSeen) > s.idleTTL {
			out = append(out, id)
		}
	}
	for id, t := range s.dead {
		if now.Sub(t) > s.idleTTL {
			delete(s.dead, id)
		}
	}
	return out
}

func (s *sessions) setOwner(id, owner string) {
	s.mu.Lock()
	if info, ok := s.live[id]; ok {
		info.owner = owner
	}
	s.mu.Unlock()
}

func (s *sessions) owner(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if info, ok := s.live[id]; ok {
		return info.owner
	}
	return ""
}

func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}
