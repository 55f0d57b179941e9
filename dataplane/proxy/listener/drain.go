package listener

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// gradualDrainClose is Envoy's drainClose for --drain-strategy gradual: false before the
// drain started (start 0), then true with probability elapsed/drainTime counted in whole
// seconds (elapsed > random % drainTime), and always once drainTime has passed.
func gradualDrainClose(start int64, drainTime time.Duration) bool {
	if start == 0 {
		return false
	}
	elapsed := int64(time.Since(time.Unix(0, start)) / time.Second)
	total := int64(drainTime / time.Second)
	if elapsed >= total {
		return true
	}
	return elapsed > rand.Int64N(total)
}

// drainCloseFunc returns a connection's drain decision for httpconn.Deps.DrainClose, or
// nil when it never decides anything: true while the server fails health checks
// (hcFailed), else the gradual decision once the drain started at *start.
func drainCloseFunc(hcFailed func() bool, gradual bool, start *atomic.Int64, drainTime time.Duration) func() bool {
	if hcFailed == nil && !gradual {
		return nil
	}
	return func() bool {
		if hcFailed != nil && hcFailed() {
			return true
		}
		return gradual && gradualDrainClose(start.Load(), drainTime)
	}
}
