// Package stats holds the proxy's counters and gauges under Envoy's stat names, with the
// tags Envoy's default tag extractors would pull out of them, so the admin endpoints can
// render /stats, /stats?format=json and /stats/prometheus exactly as Envoy names things.
//
// A Store is safe for concurrent use. Counters and gauges are created on first use and
// live as long as the Store; hot paths keep the returned pointers.
package stats

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/meshlab/meshlab/dataplane/rqtotals"
)

// Kind says whether a stat is a counter or a gauge.
type Kind int

// Stat kinds.
const (
	KindCounter Kind = iota
	KindGauge
)

// String returns the Prometheus type name of the kind.
func (k Kind) String() string {
	if k == KindGauge {
		return "gauge"
	}
	return "counter"
}

// Tag is one extracted tag: Envoy's tag name (e.g. "envoy.cluster_name") and its value.
type Tag struct {
	Name  string
	Value string
}

// Stat is one counter or gauge. Its methods are safe for concurrent use.
type Stat struct {
	name      string
	extracted string
	tags      []Tag
	kind      Kind
	value     atomic.Int64
	used      atomic.Bool
	// imported marks a stat created by Import before this process used it: its tags are
	// unknown until a scope asks for it by name.
	imported bool
	// explicit marks a stat created with its own tags (TaggedCounter), which the
	// stats_tags extractors leave alone.
	explicit atomic.Bool
}

// Name returns the full stat name, e.g. "cluster.x.upstream_rq_total".
func (s *Stat) Name() string { return s.name }

// Inc adds one.
func (s *Stat) Inc() { s.Add(1) }

// Dec subtracts one (gauges only).
func (s *Stat) Dec() { s.Add(-1) }

// Add adds d.
func (s *Stat) Add(d int64) {
	s.value.Add(d)
	s.used.Store(true)
}

// Set sets a gauge.
func (s *Stat) Set(v int64) {
	s.value.Store(v)
	s.used.Store(true)
}

// Value returns the current value.
func (s *Stat) Value() int64 { return s.value.Load() }

// Used reports whether the stat was ever written, as Envoy's ?usedonly does.
func (s *Stat) Used() bool { return s.used.Load() }

// Store holds every stat of one proxy.
type Store struct {
	mu         sync.RWMutex
	stats      map[string]*Stat
	histograms map[string]*Histogram
	cfg        *Config // stats_config; nil: Envoy's defaults
	totals     *rqtotals.Totals
}

// SetRequestTotals makes the clusters created from now on add each request to t's
// outbound or inbound total as well (by their stat name's "outbound|" or "inbound|").
func (s *Store) SetRequestTotals(t *rqtotals.Totals) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.totals = t
}

// RequestTotals is what SetRequestTotals set; nil counts nothing.
func (s *Store) RequestTotals() *rqtotals.Totals {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.totals
}

// RequestTotal is the shared total a request of the cluster named statName adds to, nil
// for none.
func (s *Store) RequestTotal(statName string) *atomic.Uint64 {
	t := s.RequestTotals()
	switch {
	case t == nil:
		return nil
	case strings.HasPrefix(statName, "outbound|"):
		return t.Out()
	case strings.HasPrefix(statName, "inbound|"):
		return t.In()
	}
	return nil
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{stats: make(map[string]*Stat), histograms: make(map[string]*Histogram)}
}

// Root returns the scope with no prefix and no tags.
func (s *Store) Root() Scope { return Scope{store: s} }

// Scope returns a child of the root scope; see Scope.Scope.
func (s *Store) Scope(segment string, tag string) Scope {
	return s.Root().Scope(segment, tag)
}

// get returns the named stat, creating it on first use with extracted and tags. A scope's
// tags never change, so a stat shares them; a caller's own slice (shared false) is copied.
func (s *Store) get(name, extracted string, tags []Tag, kind Kind, shared bool) *Stat {
	s.mu.RLock()
	st, ok := s.stats[name]
	s.mu.RUnlock()
	if ok && !st.imported {
		return st
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.stats[name]
	if ok && !old.imported {
		return old
	}
	st = &Stat{name: name, extracted: intern(extracted), tags: keepTags(tags, shared), kind: kind}
	if ok {
		// Take over an imported value, now with the tags the scope knows. Import holds
		// the write lock too, so no delta is lost.
		st.value.Store(old.value.Load())
		st.used.Store(old.used.Load())
	}
	s.stats[name] = st
	return st
}

// keepTags returns tags to keep in a new stat: themselves when shared (never changed,
// capacity clipped so that no append writes into them), else a copy.
func keepTags(tags []Tag, shared bool) []Tag {
	if shared {
		return tags[:len(tags):len(tags)]
	}
	return slices.Clone(tags)
}

// intern returns the one copy of a tag-extracted name this process keeps: it is the same
// for every cluster, listener or HCM ("cluster.upstream_rq_total"), and a sidecar of a
// 50-Service lab has ~1500 cluster stats.
func intern(extracted string) string { return unique.Make(extracted).Value() }

// Import adds delta to the named stat, as a hot restart child merges its parent's
// counters and gauges. A stat this store has not created yet is created without tags
// and takes its tags when a scope first asks for it.
func (s *Store) Import(name string, kind Kind, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.stats[name]
	if !ok {
		st = &Stat{name: name, extracted: name, kind: kind, imported: true}
		s.stats[name] = st
	}
	st.Add(delta)
}

// Lookup returns the stat with this full name, if it exists.
func (s *Store) Lookup(name string) (*Stat, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.stats[name]
	return st, ok
}

// Value returns the value of the named stat, 0 when it does not exist.
func (s *Store) Value(name string) int64 {
	st, ok := s.Lookup(name)
	if !ok {
		return 0
	}
	return st.Value()
}

// All returns every stat sorted by full name.
func (s *Store) All() []*Stat {
	s.mu.RLock()
	out := make([]*Stat, 0, len(s.stats))
	for _, st := range s.stats {
		out = append(out, st)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// Scope is a stat name prefix with the tags extracted from it, like Envoy's stats scopes
// ("cluster.<name>." tagged envoy.cluster_name=<name>).
type Scope struct {
	store     *Store
	prefix    string // full prefix, ends in "." unless empty
	extracted string // prefix with tag values removed
	tags      []Tag
}

// Scope returns a child scope named segment. When tag is not empty, segment is the value
// of the Envoy tag named tag (e.g. "envoy.cluster_name") and is removed from the
// tag-extracted name, as Envoy's tag extractors do.
func (sc Scope) Scope(segment, tag string) Scope {
	child := Scope{store: sc.store, prefix: sc.prefix + segment + "."}
	child.tags = append([]Tag(nil), sc.tags...)
	if tag != "" {
		child.extracted = sc.extracted
		child.tags = append(child.tags, Tag{Name: tag, Value: segment})
	} else {
		child.extracted = sc.extracted + segment + "."
	}
	return child
}

// Counter returns the counter named prefix+leaf, creating it on first use.
func (sc Scope) Counter(leaf string) *Stat { return sc.stat(leaf, KindCounter) }

// Gauge returns the gauge named prefix+leaf, creating it on first use.
func (sc Scope) Gauge(leaf string) *Stat { return sc.stat(leaf, KindGauge) }

func (sc Scope) stat(leaf string, kind Kind) *Stat {
	extractedLeaf, tags := extractCode(leaf, sc.tags)
	return sc.store.get(sc.prefix+leaf, sc.extracted+extractedLeaf, tags, kind, true)
}

// extractCode applies Envoy's response_code and response_code_class extractors
// (`_rq(_(\d{3}))$` and `_rq(_(\dxx))$`) to a leaf name.
func extractCode(leaf string, tags []Tag) (string, []Tag) {
	i := strings.LastIndex(leaf, "_rq_")
	if i < 0 {
		return leaf, tags
	}
	code := leaf[i+len("_rq_"):]
	if len(code) != 3 || code[0] < '0' || code[0] > '9' {
		return leaf, tags
	}
	out := append([]Tag(nil), tags...)
	switch {
	case allDigits(code):
		out = append(out, Tag{Name: "envoy.response_code", Value: code})
	case code[1:] == "xx":
		out = append(out, Tag{Name: "envoy.response_code_class", Value: code})
	default:
		return leaf, tags
	}
	return leaf[:i+len("_rq")], out
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Kind returns whether the stat is a counter or a gauge.
func (s *Stat) Kind() Kind { return s.kind }
