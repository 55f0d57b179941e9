package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
)

// DefaultSessionTTL is how long a dashboard login lasts.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the sessions kept: a login beyond it ends the oldest.
const maxSessions = 64

// sessions are the dashboard's logins: random ids, never the login token, each with an
// expiry. Safe for concurrent use.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[string]time.Time // id -> expiry
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessions{ttl: ttl, now: now, byID: map[string]time.Time{}}
}

// start creates a session, ending the one with id old (the browser's previous session,
// if any: a login rotates the id), and returns the new id.
func (s *sessions) start(old string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate session id: %w", err)
	}
	id := hex.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, old)
	s.expire(now)
	for len(s.byID) >= maxSessions {
		var oldest string
		for k, exp := range s.byID {
			if oldest == "" || exp.Before(s.byID[oldest]) {
				oldest = k
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[id] = now.Add(s.ttl)
	return id, nil
}

// valid reports whether id is a live session. The comparison is constant time per
// session, so timing tells nothing of the ids.
func (s *sessions) valid(id string) bool {
	if id == "" {
		return false
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	ok := false
	for k := range s.byID {
		if subtle.ConstantTimeCompare([]byte(k), []byte(id)) == 1 {
			ok = true
		}
	}
	return ok
}

// expire drops ended sessions. The caller holds s.mu.
func (s *sessions) expire(now time.Time) {
	for k, exp := range s.byID {
		if !now.Before(exp) {
			delete(s.byID, k)
		}
	}
}
