package stats

import (
	"fmt"
	"io"
	"regexp"
	"testing"
)

// BenchmarkStatusStats renders what the lab's status asks every sidecar for (the
// upstream_rq_total counters of its inbound and outbound clusters) from the stats of a
// sidecar of a 250-Service lab: 500 clusters of 40 counters, 4 of them ever used.
// sub-benchmarks: the filter alone, and with ?usedonly (as the lab asks since issue 30).
//
//	go test -run '^$' -bench StatusStats ./dataplane/proxy/stats
func BenchmarkStatusStats(b *testing.B) {
	s := NewStore()
	for i := range 500 {
		dir := "outbound"
		if i%2 == 1 {
			dir = "inbound"
		}
		sc := s.Scope(fmt.Sprintf("cluster.%s|8080||svc-%03d.default.svc.cluster.local", dir, i/2), "envoy.cluster_name")
		for j := range 40 {
			c := sc.Counter(fmt.Sprintf("upstream_stat_%02d", j))
			if j == 0 {
				c = sc.Counter("upstream_rq_total")
			}
			if i < 4 {
				c.Inc()
			}
		}
	}
	re := regexp.MustCompile(`^cluster\.(outbound|inbound)\|.*\.upstream_rq_total$`)
	for _, c := range []struct {
		name string
		f    Filter
	}{{"filter", Filter{Regexp: re}}, {"filter-usedonly", Filter{Regexp: re, UsedOnly: true}}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := s.WriteText(io.Discard, c.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
