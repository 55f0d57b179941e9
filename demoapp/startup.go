package demoapp

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// startupResult is one startup call, as the app's answers report it under "startup".
type startupResult struct {
	upstreamResult
	// At is when the call was made, so that it can be compared with the proxy's start.
	At time.Time `json:"at"`
}

// startupCalls makes the configured startup calls once and keeps their outcome. Istio's
// holdApplicationUntilProxyStarts exists because an app that calls out as it starts may
// run before its sidecar is ready: its first connection is captured to a proxy that is
// not listening yet and is refused. The demo app keeps that outcome visible. It is safe
// for concurrent use.
type startupCalls struct {
	mu      sync.Mutex
	results []startupResult
}

// run makes every call in order, without retrying (a retry would hide the race), and
// logs each outcome. h's client and timeout are used.
func (s *startupCalls) run(ctx context.Context, h *handler) {
	for _, u := range h.cfg.StartupCalls {
		at := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		var res upstreamResult
		if err != nil {
			res = upstreamResult{URL: u, Error: err.Error()}
		} else {
			res = h.call(req, u)
		}
		if res.Error != "" {
			h.log.Warn("startup call failed", "url", u, "err", res.Error)
		} else {
			h.log.Info("startup call", "url", u, "status", res.Status)
		}
		s.mu.Lock()
		s.results = append(s.results, startupResult{upstreamResult: res, At: at})
		s.mu.Unlock()
	}
}

// snapshot returns the outcomes so far (nil when there are no startup calls).
func (s *startupCalls) snapshot() []startupResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]startupResult(nil), s.results...)
}
