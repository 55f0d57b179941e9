package stats

import (
	"bytes"
	"math"
	"regexp"
	"testing"

	"github.com/meshlab/meshlab/internal/testutil"
)

// TestHistogramStatisticsAsCircllhist pins the figures Envoy's circllhist-based
// histograms give: two-significant-digit bins, linear interpolation inside a bin, bucket
// counts of bins entirely below the bound, and bin midpoints for the sum.
func TestHistogramStatisticsAsCircllhist(t *testing.T) {
	for _, tc := range []struct {
		name      string
		samples   []uint64
		quantiles []float64
		buckets   map[float64]uint64 // bound -> cumulative count
		sum       float64
	}{
		{
			name:      "one sample of 1ms spreads over the bin [1,1.1) as Envoy prints P25(nan,1.025)",
			samples:   []uint64{1},
			quantiles: []float64{1, 1.025, 1.05, 1.075, 1.09, 1.095, 1.099, 1.0995, 1.0999, 1.1},
			buckets:   map[float64]uint64{0.5: 0, 1: 0, 5: 1, 3600000: 1},
			sum:       1.05,
		},
		{
			name:      "zero has a bin of width zero",
			samples:   []uint64{0, 0},
			quantiles: []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
			buckets:   map[float64]uint64{0.5: 2},
			sum:       0,
		},
		{
			name:      "values above 99 keep two significant digits",
			samples:   []uint64{123, 129, 1000},
			quantiles: []float64{120, 123.75, 127.5, 1025, 1070, 1085, 1097, 1098.5, 1099.7, 1100},
			buckets:   map[float64]uint64{100: 0, 250: 2, 1000: 2, 2500: 3},
			sum:       125*2 + 1050,
		},
		{
			name:      "nothing recorded is nan",
			quantiles: []float64{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()},
			buckets:   map[float64]uint64{3600000: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewStore().Cluster("c").Histogram("upstream_rq_time")
			for _, v := range tc.samples {
				h.Record(v)
			}
			st := h.Statistics()
			for i, want := range tc.quantiles {
				got := st.Quantiles[i]
				if math.IsNaN(want) != math.IsNaN(got) || !math.IsNaN(want) && math.Abs(got-want) > 1e-9 {
					t.Errorf("%s = %v, want %v", quantileLabels[i], got, want)
				}
			}
			for i, le := range DefaultBuckets {
				if want, ok := tc.buckets[le]; ok && st.Buckets[i] != want {
					t.Errorf("bucket le=%v = %d, want %d", le, st.Buckets[i], want)
				}
			}
			if st.Count != uint64(len(tc.samples)) || math.Abs(st.Sum-tc.sum) > 1e-9 {
				t.Errorf("count, sum = %d, %v; want %d, %v", st.Count, st.Sum, len(tc.samples), tc.sum)
			}
		})
	}
}

func TestHistogramRenderingsMatchEnvoy(t *testing.T) {
	s := NewStore()
	c := s.Cluster("outbound|9080||reviews.default.svc.cluster.local")
	c.Counter("upstream_rq_total").Add(2)
	c.Histogram("upstream_rq_time").Record(1)
	c.Histogram("upstream_rq_time").Record(12)
	c.Histogram("upstream_cx_connect_ms").Record(0)
	s.HTTP("inbound_0.0.0.0_8080").Histogram("downstream_rq_time") // never used
	s.Listener("0.0.0.0:15006").Histogram("downstream_cx_length_ms").Record(3)
	var text, usedText, prom, js, cumulative, disjoint bytes.Buffer
	for _, err := range []error{
		s.WriteText(&cumulative, Filter{Buckets: BucketsCumulative, Regexp: regexp.MustCompile(`time`)}),
		s.WriteText(&disjoint, Filter{Buckets: BucketsDisjoint, Regexp: regexp.MustCompile(`time`)}),
		s.WriteText(&text, Filter{}),
		s.WriteText(&usedText, Filter{UsedOnly: true}),
		s.WritePrometheus(&prom, Filter{}),
		s.WriteJSON(&js, Filter{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.Golden(t, "histograms_text", text.Bytes())
	testutil.Golden(t, "histograms_text_usedonly", usedText.Bytes())
	testutil.Golden(t, "histograms_prometheus", prom.Bytes())
	testutil.Golden(t, "histograms_json", js.Bytes())
	testutil.Golden(t, "histograms_text_cumulative", cumulative.Bytes())
	testutil.Golden(t, "histograms_text_disjoint", disjoint.Bytes())
}
