package proxy

import (
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
