package hotrestart

import (
	"sync"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// GenerationGauge is incremented by each parent and kept by the child when the parent
// exits, as Envoy's server.hot_restart_generation.
const GenerationGauge = "server.hot_restart_generation"

// Latch computes a parent's Stats replies: counters as deltas since the previous reply
// (Envoy's latched counters) and the gauges a child may import. Safe for concurrent use.
type Latch struct {
	store *stats.Store
	mu    sync.Mutex
	sent  map[string]int64
}

// NewLatch returns a Latch over store.
func NewLatch(store *stats.Store) *Latch {
	return &Latch{store: store, sent: map[string]int64{}}
}

// Stats returns the counters that changed since the previous call, as deltas, and the
// used gauges that are not NeverImport.
func (l *Latch) Stats() *Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := &Stats{CounterDeltas: map[string]uint64{}, Gauges: map[string]uint64{}}
	for _, st := range l.store.All() {
		if !st.Used() {
			continue
		}
		v := st.Value()
		switch st.Kind() {
		case stats.KindCounter:
			if d := v - l.sent[st.Name()]; d > 0 {
				out.CounterDeltas[st.Name()] = uint64(d)
				l.sent[st.Name()] = v
			}
		case stats.KindGauge:
			if !stats.NeverImport(st.Name()) {
				out.Gauges[st.Name()] = uint64(v)
			}
		}
	}
	return out
}

// Merger merges a parent's Stats replies into a child's store, as Envoy's StatMerger:
// counter deltas are added; for each gauge the parent's contribution is added to the
// child's own value and replaced by the next reply. Safe for concurrent use.
type Merger struct {
	store  *stats.Store
	mu     sync.Mutex
	gauges map[string]int64 // the parent's contribution now in the store
	done   bool
}

// NewMerger returns a Merger into store.
func NewMerger(store *stats.Store) *Merger {
	return &Merger{store: store, gauges: map[string]int64{}}
}

// Merge adds one Stats reply.
func (m *Merger) Merge(s *Stats) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done || s == nil {
		return
	}
	for name, d := range s.CounterDeltas {
		m.store.Import(name, stats.KindCounter, int64(d))
	}
	for name, v := range s.Gauges {
		if stats.NeverImport(name) {
			continue
		}
		if d := int64(v) - m.gauges[name]; d != 0 {
			m.store.Import(name, stats.KindGauge, d)
		}
		m.gauges[name] = int64(v)
	}
	// A gauge the parent stopped reporting contributes nothing any more.
	for name, old := range m.gauges {
		if _, ok := s.Gauges[name]; !ok {
			m.store.Import(name, stats.KindGauge, -old)
			delete(m.gauges, name)
		}
	}
}

// Drop forgets the parent once it is terminated: its gauge contributions are removed,
// except server.hot_restart_generation, which the child keeps. Later Merges are ignored.
func (m *Merger) Drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, old := range m.gauges {
		if name != GenerationGauge {
			m.store.Import(name, stats.KindGauge, -old)
		}
	}
	m.gauges = map[string]int64{}
	m.done = true
}
