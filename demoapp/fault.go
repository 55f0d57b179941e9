package demoapp

import (
	"math/rand/v2"
	"sync"
)

// faults decides which requests get an injected error. The draw is a seeded sequence, so
// the n-th request of a run is answered the same way on every run with the same seed.
type faults struct {
	rate float64
	code int

	mu  sync.Mutex
	rnd *rand.Rand
}

func newFaults(c Config) *faults {
	code := c.ErrorCode
	if code == 0 {
		code = DefaultErrorCode
	}
	return &faults{rate: c.ErrorRate, code: code, rnd: rand.New(rand.NewPCG(c.Seed, c.Seed))}
}

// draw reports whether the next request gets an injected error, and its status.
func (f *faults) draw() (int, bool) {
	if f.rate <= 0 {
		return 0, false
	}
	f.mu.Lock()
	x := f.rnd.Float64()
	f.mu.Unlock()
	return f.code, x < f.rate
}
