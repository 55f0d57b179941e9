package stats

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Filter selects the stats an admin request asked for.
type Filter struct {
	Regexp   *regexp.Regexp // optional: ?filter=<re2>, matched against the full name
	UsedOnly bool           // ?usedonly
	// Buckets is ?histogram_buckets for the text form: "" (quantile summaries),
	// BucketsCumulative or BucketsDisjoint.
	Buckets string
	// cfg is the store's stats_config, set by the Write methods.
	cfg *Config
}

// Values of Filter.Buckets, as Envoy's ?histogram_buckets.
const (
	BucketsCumulative = "cumulative"
	BucketsDisjoint   = "disjoint"
)

func (f Filter) keepHistogram(h *Histogram) bool {
	if !f.cfg.includes(h.name) {
		return false
	}
	if f.UsedOnly && !h.Used() {
		return false
	}
	return f.Regexp == nil || f.Regexp.MatchString(h.name)
}

func (f Filter) keep(s *Stat) bool {
	if !f.cfg.includes(s.name) {
		return false
	}
	if f.UsedOnly && !s.Used() {
		return false
	}
	return f.Regexp == nil || f.Regexp.MatchString(s.name)
}

// selected returns the stats f keeps, sorted by name: it filters before sorting, so a
// narrow filter (the lab's status asks every proxy for its upstream_rq_total counters,
// ?usedonly) costs a pass over the stats, not a sort of all of them (a sidecar of a
// 250-Service lab has about 20 000).
// The store's lock is held only for the cheap ?usedonly test; names are matched after.
func (s *Store) selected(f Filter) []*Stat {
	s.mu.RLock()
	out := make([]*Stat, 0, len(s.stats))
	for _, st := range s.stats {
		if !f.UsedOnly || st.Used() {
			out = append(out, st)
		}
	}
	s.mu.RUnlock()
	out = slices.DeleteFunc(out, func(st *Stat) bool { return !f.keep(st) })
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// selectedHistograms is selected for histograms.
func (s *Store) selectedHistograms(f Filter) []*Histogram {
	s.mu.RLock()
	out := make([]*Histogram, 0, len(s.histograms))
	for _, h := range s.histograms {
		if !f.UsedOnly || h.Used() {
			out = append(out, h)
		}
	}
	s.mu.RUnlock()
	out = slices.DeleteFunc(out, func(h *Histogram) bool { return !f.keepHistogram(h) })
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// WriteText writes Envoy's /stats text form: "name: value" lines sorted by name.
func (s *Store) WriteText(w io.Writer, f Filter) error {
	f.cfg = s.config()
	var b strings.Builder
	for _, st := range s.selected(f) {
		fmt.Fprintf(&b, "%s: %d\n", st.name, st.Value())
	}
	for _, h := range s.selectedHistograms(f) {
		summary := quantileSummary(h)
		if f.Buckets != "" {
			summary = bucketSummary(h, f.Buckets == BucketsDisjoint)
		}
		fmt.Fprintf(&b, "%s: %s\n", h.name, summary)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type jsonStat struct {
	Name  string `json:"name"`
	Value int64  `json:"value"`
}

// WriteJSON writes Envoy's /stats?format=json form: {"stats":[{"name":..,"value":..}]},
// followed, when any histogram is selected, by one element {"histograms":
// {"supported_quantiles":[..], "computed_quantiles":[{"name":..,"values":[..]}]}}.
func (s *Store) WriteJSON(w io.Writer, f Filter) error {
	f.cfg = s.config()
	list := []any{}
	for _, st := range s.selected(f) {
		list = append(list, jsonStat{Name: st.name, Value: st.Value()})
	}
	if hs := jsonHistograms(s, f); hs != nil {
		list = append(list, hs)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(map[string]any{"stats": list})
}

// WritePrometheus writes Envoy's /stats/prometheus form (text format 0.0.4): one family
// per tag-extracted name, "envoy_" prefixed and sanitized, tags as labels.
func (s *Store) WritePrometheus(w io.Writer, f Filter) error {
	f.cfg = s.config()
	type family struct {
		kind  Kind
		lines []string
	}
	fams := map[string]*family{}
	for _, st := range s.All() {
		if !f.keep(st) {
			continue
		}
		extracted, tags := f.cfg.view(st.name, st.extracted, st.tags, st.explicit.Load())
		name := PrometheusName(extracted)
		fam, ok := fams[name]
		if !ok {
			fam = &family{kind: st.kind}
			fams[name] = fam
		}
		fam.lines = append(fam.lines, fmt.Sprintf("%s%s %d", name, labels(tags), st.Value()))
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fam := fams[n]
		sort.Strings(fam.lines)
		fmt.Fprintf(&b, "# TYPE %s %s\n", n, fam.kind)
		for _, l := range fam.lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	writePrometheusHistograms(&b, s, f)
	_, err := io.WriteString(w, b.String())
	return err
}

// PrometheusName returns Envoy's Prometheus metric name for a tag-extracted stat name:
// "envoy_" + the name with every character outside [a-zA-Z0-9_] replaced by "_".
// A stat of the custom namespace (CustomNamespace) keeps its own name instead.
func PrometheusName(extracted string) string {
	if rest, ok := strings.CutPrefix(extracted, CustomNamespace+"."); ok {
		return sanitize(rest)
	}
	return "envoy_" + sanitize(extracted)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func labels(tags []Tag) string {
	if len(tags) == 0 {
		return ""
	}
	parts := make([]string, len(tags))
	for i, t := range tags {
		parts[i] = fmt.Sprintf("%s=%q", sanitize(t.Name), escapeLabel(t.Value))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// escapeLabel leaves quoting to %q, which escapes backslash, quote and newline as
// the Prometheus text format requires for these ASCII values.
func escapeLabel(v string) string { return v }
