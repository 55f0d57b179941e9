package stats

import (
	"bytes"
	"regexp"
	"testing"
	"unsafe"

	"github.com/meshlab/meshlab/internal/testutil"
)

func sample() *Store {
	s := NewStore()
	c := s.Cluster("outbound|9080||reviews.default.svc.cluster.local")
	c.Counter("upstream_rq_total").Add(5)
	c.Counter("upstream_rq_200").Add(4)
	c.Counter("upstream_rq_503").Add(1)
	c.Counter("upstream_rq_2xx").Add(4)
	c.Counter("upstream_rq_5xx").Add(1)
	c.Gauge("membership_healthy").Set(2)
	s.Cluster("inbound|8080||").Counter("upstream_rq_total").Add(3)
	s.Listener("0.0.0.0:15001").Counter("downstream_cx_total").Add(7)
	s.HTTP("inbound_0.0.0.0_8080").Counter("downstream_rq_2xx").Add(3)
	s.TCP("PassthroughCluster").Counter("downstream_cx_total").Inc()
	s.Named("cluster_manager.cds").Counter("update_success").Inc()
	s.Named("server").Gauge("live").Set(1)
	s.Named("cluster_manager.cds").Counter("update_rejected") // never used
	return s
}

func TestRenderingsMatchEnvoy(t *testing.T) {
	s := sample()
	var text, prom, js bytes.Buffer
	if err := s.WriteText(&text, Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := s.WritePrometheus(&prom, Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteJSON(&js, Filter{UsedOnly: true, Regexp: regexp.MustCompile(`^cluster_manager`)}); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "stats_text", text.Bytes())
	testutil.Golden(t, "stats_prometheus", prom.Bytes())
	testutil.Golden(t, "stats_json_usedonly_filter", js.Bytes())
}

func TestResponseCodeTagExtraction(t *testing.T) {
	for _, tc := range []struct {
		leaf, wantLeaf, wantTag, wantValue string
	}{
		{"upstream_rq_200", "upstream_rq", TagResponseCode, "200"},
		{"upstream_rq_5xx", "upstream_rq", TagResponseClass, "5xx"},
		{"upstream_rq_total", "upstream_rq_total", "", ""},
		{"downstream_rq_completed", "downstream_rq_completed", "", ""},
	} {
		leaf, tags := extractCode(tc.leaf, nil)
		if leaf != tc.wantLeaf {
			t.Errorf("%s: leaf %q, want %q", tc.leaf, leaf, tc.wantLeaf)
		}
		if tc.wantTag == "" && len(tags) != 0 || tc.wantTag != "" && (len(tags) != 1 || tags[0] != Tag{tc.wantTag, tc.wantValue}) {
			t.Errorf("%s: tags %v, want %s=%s", tc.leaf, tags, tc.wantTag, tc.wantValue)
		}
	}
}

// TestStatsShareExtractedNamesAndTags: the same stat of two clusters keeps one copy of
// its tag-extracted name, and a stat keeps its scope's tags rather than a copy of them
// (a sidecar of a 50-Service lab has ~1500 cluster stats: 307 -> 234 bytes each); a
// tagged stat copies the caller's slice, which the caller may reuse.
func TestStatsShareExtractedNamesAndTags(t *testing.T) {
	s := NewStore()
	a, b := s.Cluster("a").Counter("upstream_rq_total"), s.Cluster("b").Counter("upstream_rq_total")
	if a.extracted != "cluster.upstream_rq_total" || unsafe.StringData(a.extracted) != unsafe.StringData(b.extracted) {
		t.Errorf("extracted names %q and %q are not one string", a.extracted, b.extracted)
	}
	sc := s.Cluster("c")
	x, y := sc.Counter("upstream_cx_total"), sc.Gauge("upstream_cx_active")
	if len(x.tags) != 1 || &x.tags[0] != &y.tags[0] {
		t.Errorf("two stats of one scope keep copies of its tags: %v %v", x.tags, y.tags)
	}
	mine := []Tag{{Name: "source_app", Value: "a"}}
	st := s.TaggedCounter("istiocustom.istio_requests_total", mine)
	mine[0].Value = "changed"
	if st.tags[0].Value != "a" {
		t.Errorf("a tagged stat kept the caller's slice: tags %v", st.tags)
	}
}
