package stats

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
)

// SupportedQuantiles are the quantiles Envoy computes for every histogram, in order.
var SupportedQuantiles = []float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1}

// quantileLabels are SupportedQuantiles as Envoy prints them in /stats ("P99.5").
var quantileLabels = []string{"P0", "P25", "P50", "P75", "P90", "P95", "P99", "P99.5", "P99.9", "P100"}

// DefaultBuckets are Envoy's default histogram bucket bounds, used by /stats/prometheus
// and ?histogram_buckets.
var DefaultBuckets = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000,
	30000, 60000, 300000, 600000, 1800000, 3600000}

// Histogram records integer samples (milliseconds for Envoy's *_time and *_ms stats) in
// log-linear bins with two significant digits, as Envoy's circllhist histograms do, so
// quantiles, bucket counts and sums come out as Envoy computes them. It is safe for
// concurrent use.
type Histogram struct {
	name      string
	extracted string
	tags      []Tag
	used      atomic.Bool
	explicit  atomic.Bool // created with its own tags (TaggedHistogram)

	mu   sync.Mutex
	bins map[uint64]uint64 // bin key (see binOf) -> count
}

// Name returns the full stat name, e.g. "cluster.x.upstream_rq_time".
func (h *Histogram) Name() string { return h.name }

// Used reports whether a value was ever recorded.
func (h *Histogram) Used() bool { return h.used.Load() }

// Record adds one sample.
func (h *Histogram) Record(v uint64) {
	k := binKey(v)
	h.mu.Lock()
	h.bins[k]++
	h.mu.Unlock()
	h.used.Store(true)
}

// bin is one circllhist bin: samples in [left, left+width).
type bin struct {
	left, width float64
	count       uint64
}

// binKey returns the bin of v encoded as its left bound in tenths: 0 for 0, v*10 for
// 1..9 (bin width 0.1), and for larger v the two leading digits followed by zeros
// (width one unit of the second digit), times ten.
func binKey(v uint64) uint64 {
	if v < 10 {
		return v * 10
	}
	p := uint64(1)
	for v/p >= 100 {
		p *= 10
	}
	return (v / p) * p * 10
}

// binOf decodes a bin key into its bounds.
func binOf(k, count uint64) bin {
	if k == 0 {
		return bin{count: count}
	}
	w := uint64(1)
	for k/w >= 100 {
		w *= 10
	}
	return bin{left: float64(k) / 10, width: float64(w) / 10, count: count}
}

// snapshot returns the bins in ascending order.
func (h *Histogram) snapshot() []bin {
	h.mu.Lock()
	out := make([]bin, 0, len(h.bins))
	for k, c := range h.bins {
		out = append(out, binOf(k, c))
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].left < out[j].left })
	return out
}

// Statistics are a histogram's cumulative figures, as Envoy's HistogramStatistics.
type Statistics struct {
	Quantiles []float64 // for SupportedQuantiles; NaN when nothing was recorded
	Buckets   []uint64  // samples in bins entirely <= each DefaultBuckets bound
	Count     uint64
	Sum       float64 // bin midpoints times counts
}

// Statistics computes the histogram's quantiles, bucket counts, count and sum with
// circllhist's approximations (hist_approx_quantile, hist_approx_count_below,
// hist_approx_sum).
func (h *Histogram) Statistics() Statistics {
	bins := h.snapshot()
	st := Statistics{Quantiles: quantiles(bins, SupportedQuantiles), Buckets: make([]uint64, len(DefaultBuckets))}
	for _, b := range bins {
		st.Count += b.count
		st.Sum += (b.left + b.width/2) * float64(b.count)
	}
	for i, le := range DefaultBuckets {
		for _, b := range bins {
			if b.left+b.width > le {
				break
			}
			st.Buckets[i] += b.count
		}
	}
	return st
}

// quantiles is circllhist's hist_approx_quantile: linear interpolation inside the bin
// where each quantile's count falls.
func quantiles(bins []bin, qs []float64) []float64 {
	out := make([]float64, len(qs))
	var total float64
	for _, b := range bins {
		total += float64(b.count)
	}
	if total == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	ib := 0
	var lower, upper, left, width float64
	track := func(b bin) {
		left, width = b.left, b.width
		lower = upper
		upper = lower + float64(b.count)
	}
	track(bins[0])
	for i, q := range qs {
		target := total * q
		for ib < len(bins)-1 && upper < target {
			ib++
			track(bins[ib])
		}
		switch {
		case lower == target:
			out[i] = left
		case upper == target:
			out[i] = left + width
		case width == 0:
			out[i] = left
		default:
			out[i] = left + (target-lower)/(upper-lower)*width
		}
	}
	return out
}

// Histogram returns the histogram named prefix+leaf, creating it on first use.
func (sc Scope) Histogram(leaf string) *Histogram {
	return sc.store.histogram(sc.prefix+leaf, sc.extracted+leaf, sc.tags, true)
}

func (s *Store) histogram(name, extracted string, tags []Tag, shared bool) *Histogram {
	s.mu.RLock()
	h, ok := s.histograms[name]
	s.mu.RUnlock()
	if ok {
		return h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.histograms[name]; ok {
		return h
	}
	h = &Histogram{name: name, extracted: intern(extracted), tags: keepTags(tags, shared), bins: map[uint64]uint64{}}
	s.histograms[name] = h
	return h
}

// Histograms returns every histogram sorted by full name.
func (s *Store) Histograms() []*Histogram {
	s.mu.RLock()
	out := make([]*Histogram, 0, len(s.histograms))
	for _, h := range s.histograms {
		out = append(out, h)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}
