package e2e

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
)

// BenchmarkPodList measures `meshlab status` of a lab of MESHLAB_BENCH_PROXIES sidecar
// pods (default 100; issue 30's target is 500 pods in <= 1 s): the lab API's pod list
// alone (GET /v1/pods from this process, which `status`, `get pods` and the dashboard
// ask) and the `meshlab status` process from its start to its exit. The first list after
// `up` is reported apart (`first-api-ms`): it is the one that asked every agent (9 s at
// 500 pods while the later ones took 0.4-0.6 s), where the lab should answer from what
// its ready wait read. The later lists are `api-median-ms`, `api-p99-ms` and every
// `status` process `status-median-ms`, `status-p99-ms` (each of those lists after the
// first). It checks that every pod is listed ready. MESHLAB_E2E_BIN runs an older build
// beside a newer one with one test binary.
func BenchmarkPodList(b *testing.B) {
	testutil.RequireRoot(b)
	n := 100
	if v, ok := benchProxies(b); ok {
		n = v
	}
	// One lab for every round of the benchmark (testing runs it once with b.N = 1 before
	// the round it reports): a lab per round would cost an `up` more, and only its first
	// round's first list is the one after `up`.
	l, lc := startScaleLab(b, n)
	var first time.Duration
	b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
		var apiTimes, cliTimes []time.Duration
		b.ResetTimer()
		for range b.N {
			start := time.Now()
			pods, err := lc.Pods(b.Context())
			if err != nil {
				b.Fatal(err)
			}
			if took := time.Since(start); first == 0 {
				first = took
			} else {
				apiTimes = append(apiTimes, took)
			}
			for _, p := range pods {
				if !p.Ready {
					b.Fatalf("pod %s not ready: %s", p.Key, p.Message)
				}
			}
			if len(pods) != n {
				b.Fatalf("%d pods listed, want %d", len(pods), n)
			}
			start = time.Now()
			if out, err := meshlab(b, "--lab", l.name, "status"); err != nil {
				b.Fatalf("status: %v\n%s", err, out)
			}
			cliTimes = append(cliTimes, time.Since(start))
		}
		b.StopTimer()
		b.ReportMetric(float64(first.Microseconds())/1000, "first-api-ms")
		for _, s := range []struct {
			prefix string
			ds     []time.Duration
		}{{"api-", apiTimes}, {"status-", cliTimes}} {
			if len(s.ds) == 0 {
				continue // one round (-benchtime 1x): the first list alone
			}
			sort.Slice(s.ds, func(i, j int) bool { return s.ds[i] < s.ds[j] })
			b.ReportMetric(float64(s.ds[len(s.ds)/2].Microseconds())/1000, s.prefix+"median-ms")
			b.ReportMetric(float64(s.ds[(len(s.ds)*99)/100].Microseconds())/1000, s.prefix+"p99-ms")
		}
	})
}
