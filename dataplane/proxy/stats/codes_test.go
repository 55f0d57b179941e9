package stats

import (
	"testing"
	"unsafe"
)

// TestCodeCountersAreTheNamedStats pins that the cached per code counters are the very
// stats a lookup by Envoy's name returns (upstream_rq_200 tagged envoy.response_code,
// upstream_rq_2xx tagged envoy.response_code_class), created only when first counted.
func TestCodeCountersAreTheNamedStats(t *testing.T) {
	s := NewStore()
	sc := s.Cluster("c")
	cc := NewCodeCounters(sc, "upstream_rq_")
	if _, ok := s.Lookup("cluster.c.upstream_rq_200"); ok {
		t.Fatal("upstream_rq_200 exists before any response was counted")
	}
	for _, code := range []int{200, 200, 503, 99, 600} {
		cc.Code(code).Inc()
		cc.Class(code).Inc()
	}
	for name, want := range map[string]int64{
		"cluster.c.upstream_rq_200": 2, "cluster.c.upstream_rq_2xx": 2,
		"cluster.c.upstream_rq_503": 1, "cluster.c.upstream_rq_5xx": 1,
		"cluster.c.upstream_rq_99": 1, "cluster.c.upstream_rq_6xx": 1,
	} {
		if got := s.Value(name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if cc.Code(200) != sc.Counter("upstream_rq_200") || cc.Class(404) != sc.Counter("upstream_rq_4xx") {
		t.Error("cached counters differ from the named ones")
	}
	st, _ := s.Lookup("cluster.c.upstream_rq_200")
	if len(st.tags) != 2 || st.tags[1] != (Tag{Name: TagResponseCode, Value: "200"}) {
		t.Errorf("upstream_rq_200 tags = %v", st.tags)
	}
}

// TestCodeCountersIdleCost: code counters nothing was counted in hold no table of codes
// (every cluster has them; most clusters of a mesh are idle), and counting makes the
// table of that class only.
func TestCodeCountersIdleCost(t *testing.T) {
	cc := NewCodeCounters(NewStore().Cluster("c"), "upstream_rq_")
	if size := unsafe.Sizeof(*cc); size > 256 {
		t.Errorf("idle CodeCounters are %d bytes, want at most 256", size)
	}
	first := cc.Code(503)
	first.Inc()
	for class := range cc.codes {
		if made := cc.codes[class].Load() != nil; made != (class == 5) {
			t.Errorf("after a 503, the table of class %d made: %v", class, made)
		}
	}
	if again := cc.Code(503); again != first || again.Value() != 1 {
		t.Error("the 503 counter is not cached or lost its count")
	}
}

func BenchmarkCodeCounters(b *testing.B) {
	cc := NewCodeCounters(NewStore().Cluster("c"), "upstream_rq_")
	for i := 0; i < b.N; i++ {
		cc.Code(200).Inc()
		cc.Class(200).Inc()
	}
}
