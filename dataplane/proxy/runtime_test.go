package proxy

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestTuneGCSetsPercentUnlessGOGCIsSet(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != proxyGCPercent {
		t.Errorf("GC percent without GOGC = %d, want %d", got, proxyGCPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent with GOGC set = %d, want 100 (unchanged)", got)
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
