package e2e

import (
	"sort"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// BenchmarkUpHello measures `meshlab up` of the hello lab, from process start to every pod
// ready (the "lab ... is up" line), and reports the median as up-ms. Tear-down is not
// timed. Run: sudo make bench (or go test ./e2e -run '^$' -bench UpHello -benchtime 5x).
func BenchmarkUpHello(b *testing.B) {
	testutil.RequireRoot(b)
	var samples []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		start := time.Now()
		b.StartTimer()
		l := startLab(b)
		b.StopTimer()
		samples = append(samples, time.Since(start))
		if out, err := meshlab(b, "down", "--name", l.name); err != nil {
			b.Fatalf("down: %v\n%s", err, out)
		}
		<-l.exited
		b.StartTimer()
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds())/1000, "median-up-ms")
}
