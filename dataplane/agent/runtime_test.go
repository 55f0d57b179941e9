package agent

import (
	"math"
	"runtime/debug"
	"testing"
)

// Without GOGC the collector is paused under a memory limit until resume, which puts
// back the percent and limit it found; GOGC in the environment leaves both alone,
// GOMEMLIMIT leaves the limit alone.
func TestPauseGCUntilResumedUnlessGOGCIsSet(t *testing.T) {
	origPercent := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(origPercent); debug.SetMemoryLimit(origLimit) })
	env := func(k, v string) func(string) string {
		return func(key string) string {
			if key == k {
				return v
			}
			return ""
		}
	}

	resume := pauseGC(env("", ""))
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while starting = %d, want -1 (paused)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != startupMemoryLimit {
		t.Errorf("memory limit while starting = %d, want %d", got, startupMemoryLimit)
	}
	resume()
	resume() // a second call changes nothing
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GC percent once resumed = %d, want 100 (as found)", got)
	}
	debug.SetGCPercent(100)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit once resumed = %d, want the one found (none)", got)
	}

	debug.SetMemoryLimit(1 << 40)
	resume = pauseGC(env("GOMEMLIMIT", "1TiB"))
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit while starting with GOMEMLIMIT set = %d, want it unchanged", got)
	}
	resume()

	resume = pauseGC(env("GOGC", "50"))
	if got := debug.SetGCPercent(-1); got != 100 {
		t.Errorf("GC percent with GOGC set = %d, want 100 (unchanged)", got)
	}
	debug.SetGCPercent(100)
	resume()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set, once resumed = %d, want 100 (unchanged)", got)
	}
}
