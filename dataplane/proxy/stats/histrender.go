package stats

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// quantileSummary is Envoy's ParentHistogramImpl::quantileSummary:
// "P0(interval,cumulative) P25(..) ..." or "No recorded values". This proxy has no
// stats flush interval, so interval values are always nan, as Envoy prints them before
// its first flush.
func quantileSummary(h *Histogram) string {
	if !h.Used() {
		return "No recorded values"
	}
	qs := h.Statistics().Quantiles
	parts := make([]string, len(qs))
	for i, q := range qs {
		parts[i] = fmt.Sprintf("%s(nan,%s)", quantileLabels[i], formatFloat(q))
	}
	return strings.Join(parts, " ")
}

// bucketSummary is Envoy's ParentHistogramImpl::bucketSummary for
// ?histogram_buckets=cumulative ("B0.5(interval,cumulative) B1(..) ...") and the
// per-bucket counts of ?histogram_buckets=disjoint. Without a flush interval the
// interval counts are 0.
func bucketSummary(h *Histogram, disjoint bool) string {
	if !h.Used() {
		return "No recorded values"
	}
	counts := h.Statistics().Buckets
	parts := make([]string, len(counts))
	var prev uint64
	for i, c := range counts {
		v := c
		if disjoint {
			v = c - prev
			prev = c
		}
		parts[i] = fmt.Sprintf("B%s(0,%d)", strconv.FormatFloat(DefaultBuckets[i], 'g', 6, 64), v)
	}
	return strings.Join(parts, " ")
}

// formatFloat prints a double as fmt's "{}" does in Envoy: shortest round-trip digits,
// fixed notation below 1e16, "nan" for NaN.
func formatFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.Abs(v) >= 1e16:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

type jsonQuantile struct {
	Interval   *float64 `json:"interval"`
	Cumulative *float64 `json:"cumulative"`
}

type jsonComputed struct {
	Name   string         `json:"name"`
	Values []jsonQuantile `json:"values"`
}

// jsonHistograms returns Envoy's {"histograms":{...}} element of /stats?format=json, or
// nil when no histogram is selected. NaN (nothing recorded, or the interval this proxy
// does not keep) is null, as Envoy writes it.
func jsonHistograms(s *Store, f Filter) any {
	var computed []jsonComputed
	for _, h := range s.Histograms() {
		if !f.keepHistogram(h) {
			continue
		}
		c := jsonComputed{Name: h.name, Values: make([]jsonQuantile, len(SupportedQuantiles))}
		for i, q := range h.Statistics().Quantiles {
			if !math.IsNaN(q) {
				c.Values[i].Cumulative = &q
			}
		}
		computed = append(computed, c)
	}
	if computed == nil {
		return nil
	}
	supported := make([]float64, len(SupportedQuantiles))
	for i, q := range SupportedQuantiles {
		supported[i] = math.Round(q*1000) / 10
	}
	type histograms struct {
		Supported []float64      `json:"supported_quantiles"`
		Computed  []jsonComputed `json:"computed_quantiles"`
	}
	return map[string]histograms{"histograms": {Supported: supported, Computed: computed}}
}

// writePrometheusHistograms appends Envoy's Prometheus histogram families after the
// counters and gauges: cumulative _bucket lines for DefaultBuckets plus le="+Inf", then
// _sum and _count, numbers formatted as Envoy's "{:.32g}".
func writePrometheusHistograms(b *strings.Builder, s *Store, f Filter) {
	type view struct {
		h    *Histogram
		tags []Tag
	}
	fams := map[string][]view{}
	for _, h := range s.Histograms() {
		if f.keepHistogram(h) {
			extracted, tags := f.cfg.view(h.name, h.extracted, h.tags, h.explicit.Load())
			n := PrometheusName(extracted)
			fams[n] = append(fams[n], view{h, tags})
		}
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(b, "# TYPE %s histogram\n", n)
		for _, v := range fams[n] {
			h := v.h
			st := h.Statistics()
			tags := labelList(v.tags)
			for i, le := range DefaultBuckets {
				fmt.Fprintf(b, "%s_bucket{%s} %d\n", n, strings.Join(append(tags, `le="`+g32(le)+`"`), ","), st.Buckets[i])
			}
			fmt.Fprintf(b, "%s_bucket{%s} %d\n", n, strings.Join(append(tags, `le="+Inf"`), ","), st.Count)
			fmt.Fprintf(b, "%s_sum%s %s\n", n, labels(v.tags), g32(st.Sum))
			fmt.Fprintf(b, "%s_count%s %d\n", n, labels(v.tags), st.Count)
		}
	}
}

// g32 is C++ fmt's "{:.32g}".
func g32(v float64) string { return strconv.FormatFloat(v, 'g', 32, 64) }

func labelList(tags []Tag) []string {
	out := make([]string, len(tags), len(tags)+1)
	for i, t := range tags {
		out[i] = fmt.Sprintf("%s=%q", sanitize(t.Name), escapeLabel(t.Value))
	}
	return out
}
