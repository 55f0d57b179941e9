package stats

import "testing"

// TestImportedStatTakesTagsOnFirstScopedUse pins the hot restart merge: a counter
// imported by name before this process used it is rendered with its tags (and its
// value) once a scope asks for it.
func TestImportedStatTakesTagsOnFirstScopedUse(t *testing.T) {
	s := NewStore()
	s.Import("cluster.backend.upstream_rq_200", KindCounter, 7)
	if st, _ := s.Lookup("cluster.backend.upstream_rq_200"); len(st.tags) != 0 || st.Value() != 7 {
		t.Fatalf("imported stat: tags %v value %d", st.tags, st.Value())
	}
	c := s.Cluster("backend").Counter("upstream_rq_200")
	c.Inc()
	st, _ := s.Lookup("cluster.backend.upstream_rq_200")
	if st != c || st.Value() != 8 {
		t.Errorf("after scoped use: same stat %v, value %d; want the scope's stat with 8", st == c, st.Value())
	}
	if st.extracted != "cluster.upstream_rq" || len(st.tags) != 2 {
		t.Errorf("tags not taken over: extracted %q tags %v", st.extracted, st.tags)
	}
	s.Import("cluster.backend.upstream_rq_200", KindCounter, 2)
	if c.Value() != 10 {
		t.Errorf("a later import did not reach the scoped stat: %d", c.Value())
	}
}

func TestNeverImport(t *testing.T) {
	for name, want := range map[string]bool{
		"server.hot_restart_epoch":                true,
		"server.state":                            true,
		"server.hot_restart_generation":           false,
		"server.total_connections":                false,
		"server.memory_allocated":                 false,
		"listener_manager.total_listeners_active": true,
		"control_plane.connected_state":           true,
		"cluster.a.membership_healthy":            true,
		"cluster.a.upstream_cx_active":            false,
		"http.in.downstream_cx_active":            false,
	} {
		if got := NeverImport(name); got != want {
			t.Errorf("NeverImport(%q) = %v, want %v", name, got, want)
		}
	}
}
