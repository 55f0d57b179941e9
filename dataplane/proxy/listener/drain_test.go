package listener

import (
	"testing"
	"time"
)

func TestGradualDrainCloseFollowsEnvoysRamp(t *testing.T) {
	ago := func(d time.Duration) int64 { return time.Now().Add(-d).UnixNano() }
	rate := func(start int64, drain time.Duration) float64 {
		n := 0
		for range 4000 {
			if gradualDrainClose(start, drain) {
				n++
			}
		}
		return float64(n) / 4000
	}
	for _, tc := range []struct {
		name     string
		start    int64
		drain    time.Duration
		min, max float64
	}{
		{"not draining never closes", 0, 10 * time.Second, 0, 0},
		{"the first second never closes", ago(500 * time.Millisecond), 10 * time.Second, 0, 0},
		{"half way closes about half", ago(5500 * time.Millisecond), 10 * time.Second, 0.4, 0.6},
		{"past the drain time always closes", ago(11 * time.Second), 10 * time.Second, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rate(tc.start, tc.drain); got < tc.min || got > tc.max {
				t.Errorf("close rate = %.3f, want in [%.2f, %.2f]", got, tc.min, tc.max)
			}
		})
	}
}
