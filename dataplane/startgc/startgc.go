// Package startgc pauses a process's garbage collector while it starts and sets its
// steady-state collector once started. The agent and `meshlab proxy` both use it (the
// proxy may not import the agent): a start allocates a few MB over the package inits'
// live heap, and with Go's default trigger every cycle marks all of it plus the large
// binary's globals, a fifth of both processes' start CPU in a `perf record` of a 100-pod
// `up` (docs/BENCHMARKS.md, "100 pods").
package startgc

import (
	"math"
	"runtime/debug"
	"sync"
)

// Env names the environment variable that says a process was started with its collector
// already paused by its environment (GOGC=off and a GOMEMLIMIT, as the agent's
// StartupGCEnv sets them), so that even package init's collection was skipped.
const Env = "MESHLAB_START_GC"

// Pause pauses the collector, under limit (unless GOMEMLIMIT is set), when GOGC is not
// set in the environment (getenv), and returns the func that sets the steady state: GC
// percent steady and the memory limit found (none when the environment paused it), with
// the collector off and one thread for Go code while the process is idle (idle.go; the
// threads only when GOMAXPROCS is not set in the environment). The returned func is idempotent
// and safe from any goroutine; with GOGC set, Pause and it change nothing.
func Pause(getenv func(string) string, limit int64, steady int) (started func()) {
	var once sync.Once
	if getenv(Env) == "paused" {
		return func() {
			once.Do(func() {
				debug.SetMemoryLimit(math.MaxInt64)
				debug.SetGCPercent(steady)
				adaptWhenIdle(steady, getenv("GOMAXPROCS") == "")
			})
		}
	}
	if getenv("GOGC") != "" {
		return func() {}
	}
	debug.SetGCPercent(-1)
	limited := getenv("GOMEMLIMIT") == ""
	prev := int64(-1)
	if limited {
		prev = debug.SetMemoryLimit(limit)
	}
	return func() {
		once.Do(func() {
			if limited {
				debug.SetMemoryLimit(prev)
			}
			debug.SetGCPercent(steady)
			if limited && prev == math.MaxInt64 { // a memory limit set otherwise stays as it is
				adaptWhenIdle(steady, getenv("GOMAXPROCS") == "")
			}
		})
	}
}
