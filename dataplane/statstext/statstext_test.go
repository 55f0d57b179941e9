package statstext

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func TestParse(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name       string
		in         string
		values     map[string]uint64
		histograms map[string]Histogram
	}{
		{
			name:   "counters and gauges",
			in:     "cluster.a.upstream_rq_total: 7\nserver.live: 1\nserver.memory_allocated: 18446744073709551615\n",
			values: map[string]uint64{"cluster.a.upstream_rq_total": 7, "server.live": 1, "server.memory_allocated": math.MaxUint64},
		},
		{
			name:   "no trailing newline, CRLF and padding",
			in:     "a: 1\r\n  b :  2\r\nc: 3",
			values: map[string]uint64{"a": 1, "b": 2, "c": 3},
		},
		{
			name:   "the last of a repeated name wins",
			in:     "a: 1\na: 2\n",
			values: map[string]uint64{"a": 2},
		},
		{
			name: "lines of other shapes are skipped",
			in: "no separator\n: 5\nneg: -1\nfloat: 1.5\ntext.readout: \"1.30.0\"\nbig: 18446744073709551616\n\n" +
				"bad.hist: P0(nan,1) B1(0,0)\nopen.hist: P0(nan,1\nsp ace: 1\nct\x01rl: 1\nx: 0\n",
			values: map[string]uint64{"x": 0},
		},
		{
			name: "quantile summary",
			in:   "cluster.a.upstream_rq_time: P0(nan,1) P25(nan,2.05) P99.9(3,1e+17)\n",
			histograms: map[string]Histogram{"cluster.a.upstream_rq_time": {Points: []Point{
				{Label: "P0", Interval: nan, Cumulative: 1}, {Label: "P25", Interval: nan, Cumulative: 2.05},
				{Label: "P99.9", Interval: 3, Cumulative: 1e17},
			}}},
		},
		{
			name: "bucket summary and an empty histogram",
			in:   "h: B0.5(0,0) B1(0,3) B3.6e+06(1,4)\nempty: No recorded values\n",
			histograms: map[string]Histogram{
				"h":     {Points: []Point{{Label: "B0.5", Cumulative: 0}, {Label: "B1", Cumulative: 3}, {Label: "B3.6e+06", Interval: 1, Cumulative: 4}}},
				"empty": {},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if tc.values == nil {
				tc.values = map[string]uint64{}
			}
			if tc.histograms == nil {
				tc.histograms = map[string]Histogram{}
			}
			if !equalValues(got.Values, tc.values) {
				t.Errorf("values = %v, want %v", got.Values, tc.values)
			}
			if !equalHistograms(got.Histograms, tc.histograms) {
				t.Errorf("histograms = %v, want %v", got.Histograms, tc.histograms)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := Parse(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Errorf("reader error: got %v, want it wrapped", err)
	}
	long := "a: " + strings.Repeat("1", maxLine) + "\n"
	if _, err := Parse(strings.NewReader(long)); err == nil || !strings.Contains(err.Error(), "read text stats") {
		t.Errorf("a line over 1 MiB: got %v, want an error", err)
	}
}

// TestParseReadsTheProxysText parses what the built-in proxy's admin renders, in both
// histogram forms, so that the reader and the writer cannot drift apart.
func TestParseReadsTheProxysText(t *testing.T) {
	s := stats.NewStore()
	c := s.Cluster("outbound|80||backend.default.svc.cluster.local")
	c.Counter("upstream_rq_total").Add(41)
	c.Gauge("upstream_cx_active").Set(3)
	c.Histogram("upstream_rq_time").Record(12)
	c.Histogram("upstream_cx_length_ms")
	for _, buckets := range []string{"", stats.BucketsCumulative, stats.BucketsDisjoint} {
		t.Run("buckets="+buckets, func(t *testing.T) {
			var b strings.Builder
			if err := s.WriteText(&b, stats.Filter{Buckets: buckets}); err != nil {
				t.Fatal(err)
			}
			got, err := Parse(strings.NewReader(b.String()))
			if err != nil {
				t.Fatal(err)
			}
			const pre = "cluster.outbound|80||backend.default.svc.cluster.local."
			if got.Values[pre+"upstream_rq_total"] != 41 || got.Values[pre+"upstream_cx_active"] != 3 {
				t.Errorf("values = %v\nfrom:\n%s", got.Values, b.String())
			}
			h, ok := got.Histograms[pre+"upstream_rq_time"]
			if !ok || len(h.Points) == 0 {
				t.Fatalf("upstream_rq_time missing or empty: %v\nfrom:\n%s", got.Histograms, b.String())
			}
			want := byte('P')
			if buckets != "" {
				want = 'B'
			}
			recorded := false
			for _, p := range h.Points {
				recorded = recorded || p.Cumulative > 0
			}
			if h.Points[0].Label[0] != want || !recorded {
				t.Errorf("upstream_rq_time = %v, want %c points with the recorded value", h.Points, want)
			}
			if e, ok := got.Histograms[pre+"upstream_cx_length_ms"]; !ok || len(e.Points) != 0 {
				t.Errorf("an unused histogram = %v, %v; want present with no points", e, ok)
			}
		})
	}
}

// FuzzParseStats checks that Parse never fails on what a reader hands it whole, and
// that what it returns reads back the same once written in the text form again.
func FuzzParseStats(f *testing.F) {
	for _, s := range []string{
		"a: 1\nb: 2\n", "h: P0(nan,1) P25(nan,2.05)\n", "h: B0.5(0,0) B1(0,3)\n",
		"e: No recorded values\n", ": 1\n", "x: P(1,2)\n", "y: B1(nan,nan)\r\n", "\n\n: : :\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Parse(strings.NewReader(in))
		if err != nil {
			if len(in) <= maxLine {
				t.Fatalf("Parse(%q): %v", in, err)
			}
			return
		}
		var b strings.Builder
		for name, v := range got.Values {
			if !validName(name) {
				t.Fatalf("value name %q", name)
			}
			b.WriteString(name + ": " + strconv.FormatUint(v, 10) + "\n")
		}
		for name, h := range got.Histograms {
			b.WriteString(name + ": " + format(h) + "\n")
		}
		again, err := Parse(strings.NewReader(b.String()))
		if err != nil {
			t.Fatal(err)
		}
		if !equalValues(again.Values, got.Values) || !equalHistograms(again.Histograms, got.Histograms) {
			t.Fatalf("round trip of %q:\n%q\ngave %v, want %v", in, b.String(), again, got)
		}
	})
}

// format writes h back in the text form.
func format(h Histogram) string {
	if len(h.Points) == 0 {
		return noValues
	}
	parts := make([]string, len(h.Points))
	for i, p := range h.Points {
		parts[i] = p.Label + "(" + formatValue(p.Interval) + "," + formatValue(p.Cumulative) + ")"
	}
	return strings.Join(parts, " ")
}

func formatValue(v float64) string {
	if math.IsNaN(v) {
		return "nan"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func equalValues(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalHistograms(a, b map[string]Histogram) bool {
	if len(a) != len(b) {
		return false
	}
	for k, h := range a {
		g, ok := b[k]
		if !ok || len(g.Points) != len(h.Points) {
			return false
		}
		for i, p := range h.Points {
			q := g.Points[i]
			if p.Label != q.Label || !sameFloat(p.Interval, q.Interval) || !sameFloat(p.Cumulative, q.Cumulative) {
				return false
			}
		}
	}
	return true
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
