package ca

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"sync"
)

// Caller is who a token belongs to: a pod and its identity.
type Caller struct {
	Pod      string
	Identity Identity
}

// Tokens maps per-pod bearer tokens to callers. It is safe for concurrent use.
type Tokens struct {
	mu sync.RWMutex
	m  map[string]Caller
}

// NewTokens returns an empty token table.
func NewTokens() *Tokens { return &Tokens{m: map[string]Caller{}} }

// Issue creates a random token for c, records it and returns it.
func (t *Tokens) Issue(c Caller) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	tok := hex.EncodeToString(b)
	t.mu.Lock()
	t.m[tok] = c
	t.mu.Unlock()
	return tok, nil
}

// Lookup reports the caller a token belongs to.
func (t *Tokens) Lookup(token string) (Caller, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for k, c := range t.m {
		// Constant time per comparison, so a wrong token leaks nothing by timing.
		if subtle.ConstantTimeCompare([]byte(k), []byte(token)) == 1 {
			return c, true
		}
	}
	return Caller{}, false
}

// RevokePod forgets every token of pod, whose pod is gone: a pod made again under the
// same name gets a new one.
func (t *Tokens) RevokePod(pod string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, c := range t.m {
		if c.Pod == pod {
			delete(t.m, k)
		}
	}
}
