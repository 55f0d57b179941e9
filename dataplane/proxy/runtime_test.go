package proxy

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
)

// Without GOGC the collector is paused under a memory limit until started is called,
// then runs at proxyGCPercent with the limit it had before; GOGC in the environment
// leaves both alone, GOMEMLIMIT leaves the limit alone.
func TestTuneGCPausesUntilStartedUnlessGOGCIsSet(t *testing.T) {
	orig := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(orig); debug.SetMemoryLimit(origLimit) })
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}

	started := tuneGC(env())
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while starting = %d, want -1 (paused)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != startupMemoryLimit {
		t.Errorf("memory limit while starting = %d, want %d", got, startupMemoryLimit)
	}
	started()
	started() // a second call changes nothing
	if got := debug.SetGCPercent(100); got != proxyGCPercent {
		t.Errorf("GC percent once started = %d, want %d", got, proxyGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit once started = %d, want the previous one (none)", got)
	}

	debug.SetMemoryLimit(1 << 40)
	started = tuneGC(env("GOMEMLIMIT", "1TiB"))
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit while starting with GOMEMLIMIT set = %d, want it unchanged", got)
	}
	started()
	if got := debug.SetGCPercent(100); got != proxyGCPercent {
		t.Errorf("GC percent once started (GOMEMLIMIT set) = %d, want %d", got, proxyGCPercent)
	}

	started = tuneGC(env("GOGC", "50"))
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set = %d, want 100 (unchanged)", got)
	}
	started()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set, once started = %d, want 100 (unchanged)", got)
	}
}

func TestConcurrencySetsTheWorkerCountAsEnvoy(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	none := func(string) string { return "" }
	for _, tc := range []struct {
		concurrency uint32
		want        int
	}{{2, 2}, {1, 1}, {3, 3}, {0, 1}} { // 0: Envoy still runs one worker
		setWorkers(tc.concurrency, none)
		if got := runtime.GOMAXPROCS(0); got != tc.want {
			t.Errorf("--concurrency %d: GOMAXPROCS %d, want %d", tc.concurrency, got, tc.want)
		}
	}
	runtime.GOMAXPROCS(5)
	setWorkers(2, func(k string) string {
		if k == "GOMAXPROCS" {
			return "5"
		}
		return ""
	})
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Errorf("GOMAXPROCS in the environment: %d, want 5 (unchanged)", got)
	}
}

// Started by the agent (the agent's StartupGCEnv), the collector is already paused by the
// environment: tuneGC leaves it until started, which sets proxyGCPercent and no limit.
func TestTuneGCStartedPausedByTheAgent(t *testing.T) {
	orig := debug.SetGCPercent(-1) // as GOGC=off left it
	origLimit := debug.SetMemoryLimit(64 << 20)
	t.Cleanup(func() { debug.SetGCPercent(orig); debug.SetMemoryLimit(origLimit) })
	env := map[string]string{"GOGC": "off", "GOMEMLIMIT": "64MiB", startGCEnv: "paused"}
	started := tuneGC(func(k string) string { return env[k] })
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while starting = %d, want -1 (left paused)", got)
	}
	started()
	if got := debug.SetGCPercent(100); got != proxyGCPercent {
		t.Errorf("GC percent once started = %d, want %d", got, proxyGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit once started = %d, want none", got)
	}
}
