package hotrestart

import (
	"testing"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func TestLatchSendsCounterDeltasAndImportableGauges(t *testing.T) {
	t.Parallel()
	s := stats.NewStore()
	rq := s.HTTP("in").Counter("downstream_rq_total")
	rq.Add(5)
	s.HTTP("in").Gauge("downstream_cx_active").Set(3)
	s.Named("server").Gauge("hot_restart_epoch").Set(4)
	s.Named("server").Gauge("hot_restart_generation").Set(1)
	s.HTTP("in").Counter("never_used")
	l := NewLatch(s)
	first := l.Stats()
	if first.CounterDeltas["http.in.downstream_rq_total"] != 5 || len(first.CounterDeltas) != 1 {
		t.Errorf("first deltas = %v", first.CounterDeltas)
	}
	if first.Gauges["http.in.downstream_cx_active"] != 3 || first.Gauges[GenerationGauge] != 1 {
		t.Errorf("gauges = %v", first.Gauges)
	}
	if _, ok := first.Gauges["server.hot_restart_epoch"]; ok {
		t.Error("server.hot_restart_epoch is NeverImport but was sent")
	}
	rq.Add(2)
	if d := l.Stats().CounterDeltas; d["http.in.downstream_rq_total"] != 2 {
		t.Errorf("second deltas = %v, want only the 2 new requests", d)
	}
	if d := l.Stats().CounterDeltas; len(d) != 0 {
		t.Errorf("third deltas = %v, want none", d)
	}
}

func TestMergerContinuesCountersAndReplacesGauges(t *testing.T) {
	t.Parallel()
	s := stats.NewStore()
	s.Named("server").Gauge("hot_restart_generation").Set(1)
	cx := s.HTTP("in").Gauge("downstream_cx_active")
	cx.Set(1)
	m := NewMerger(s)
	m.Merge(&Stats{
		CounterDeltas: map[string]uint64{"http.in.downstream_rq_total": 10},
		Gauges:        map[string]uint64{"http.in.downstream_cx_active": 4, GenerationGauge: 2, "server.state": 1},
	})
	m.Merge(&Stats{
		CounterDeltas: map[string]uint64{"http.in.downstream_rq_total": 5},
		Gauges:        map[string]uint64{"http.in.downstream_cx_active": 2, GenerationGauge: 2},
	})
	if v := s.Value("http.in.downstream_rq_total"); v != 15 {
		t.Errorf("counter = %d, want 15 (deltas add up)", v)
	}
	if v := cx.Value(); v != 3 {
		t.Errorf("cx_active = %d, want own 1 + parent's latest 2", v)
	}
	if v := s.Value("server.state"); v != 0 {
		t.Errorf("server.state = %d; NeverImport gauges stay the child's", v)
	}
	// A scope that asks for the imported counter gets it with its tags and its value.
	rq := s.HTTP("in").Counter("downstream_rq_total")
	rq.Inc()
	if rq.Value() != 16 || s.Value("http.in.downstream_rq_total") != 16 {
		t.Errorf("after a local request: %d", rq.Value())
	}
	m.Drop()
	if v := cx.Value(); v != 1 {
		t.Errorf("after the parent is gone cx_active = %d, want the child's own 1", v)
	}
	if v := s.Value(GenerationGauge); v != 3 {
		t.Errorf("generation = %d, want 3 (kept from the parent)", v)
	}
	m.Merge(&Stats{CounterDeltas: map[string]uint64{"http.in.downstream_rq_total": 100}})
	if v := rq.Value(); v != 16 {
		t.Errorf("a merge after Drop changed the counter to %d", v)
	}
}
