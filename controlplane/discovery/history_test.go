package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

func TestHistoryIsBoundedAndRecordsTriggers(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1, HistorySize: 2})
	node := helloModel().Pod("frontend-v1").NodeID()
	for i, m := range [...]struct {
		extra   []string
		trigger string
	}{{nil, "start"}, {[]string{"a"}, "apply: Service default/a"}, {[]string{"a", "b"}, "apply: Service default/b"}} {
		if err := s.UpdateFor(context.Background(), helloModel(m.extra...), m.trigger); err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	h := s.History(node)
	var got []string
	for _, snap := range h {
		got = append(got, snap.Version+" "+snap.Trigger)
	}
	if want := []string{"v2 apply: Service default/a", "v3 apply: Service default/b"}; !slices.Equal(got, want) {
		t.Errorf("history = %q, want %q (bounded to 2)", got, want)
	}
	if h[0].Time.IsZero() || h[1].Types[resource.ClusterType].Resources == 0 {
		t.Errorf("snapshot without time or resource counts: %+v", h[1])
	}
	if _, err := s.Diff(node, "v1", "v3"); err == nil {
		t.Error("Diff of a dropped version succeeded")
	}
	d, err := s.Diff(node, "v2", "v3")
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	var cds *TypeDiff
	for i := range d.Types {
		if d.Types[i].TypeURL == resource.ClusterType {
			cds = &d.Types[i]
		}
	}
	if cds == nil || !slices.Equal(cds.Added, []string{"outbound|9090||b.default.svc.cluster.local"}) || cds.Removed != nil {
		t.Errorf("CDS diff = %+v, want one cluster added for service b", cds)
	}
}

func TestDiffValueNamesChangedFieldPaths(t *testing.T) {
	t.Parallel()
	old := map[string]any{
		"name": "8080",
		"virtual_hosts": []any{
			map[string]any{"name": "backend", "routes": []any{map[string]any{"route": map[string]any{"cluster": "outbound|8080|v1|backend"}}}},
			map[string]any{"name": "frontend", "domains": []any{"frontend"}},
		},
	}
	updated := map[string]any{
		"name": "8080",
		"virtual_hosts": []any{
			map[string]any{"name": "frontend", "domains": []any{"frontend"}},
			map[string]any{"name": "backend", "routes": []any{map[string]any{"route": map[string]any{"cluster": "outbound|8080|v2|backend", "timeout": "2s"}}}},
		},
	}
	var got []FieldChange
	diffValue("", old, updated, &got)
	want := []FieldChange{
		{Path: "virtual_hosts[backend].routes[0].route.cluster", Old: `"outbound|8080|v1|backend"`, New: `"outbound|8080|v2|backend"`},
		{Path: "virtual_hosts[backend].routes[0].route.timeout", New: `"2s"`},
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes = %+v\nwant %+v", got, want)
	}
	_ = time.Second
}

// TestHistoryObserveMarksTheRunOfItsVersion checks that an ACK marks every kept snapshot
// that has the type at the ACKed version (those in which it did not change since), and
// no other, whether that run is the newest or an older one.
func TestHistoryObserveMarksTheRunOfItsVersion(t *testing.T) {
	t.Parallel()
	h := newHistory(10, 0, time.Now)
	cds, eds := resource.ClusterType, resource.EndpointType
	// CDS changes in v1 and v3; EDS in v1, v2, v4.
	for _, s := range []struct{ version, cdsSince, edsSince string }{
		{"v1", "v1", "v1"}, {"v2", "v1", "v2"}, {"v3", "v3", "v2"}, {"v4", "v3", "v4"}, {"v5", "v3", "v4"},
	} {
		h.add("n", s.version, "t", map[resource.Type][]types.Resource{cds: nil, eds: nil}, nil,
			map[string]string{cds: s.cdsSince, eds: s.edsSince})
	}
	h.observe(Event{Kind: EventACK, NodeID: "n", TypeURL: cds, Version: "v3"})
	h.observe(Event{Kind: EventACK, NodeID: "n", TypeURL: eds, Version: "v2"})
	h.observe(Event{Kind: EventNACK, NodeID: "n", TypeURL: eds, Version: "v4", Error: "refused"})
	var got []string
	for _, s := range h.list("n") {
		got = append(got, s.Version+":"+s.Types[cds].State+","+s.Types[eds].State)
	}
	want := []string{"v1:,", "v2:,ACK", "v3:ACK,ACK", "v4:ACK,NACK", "v5:ACK,NACK"}
	if !slices.Equal(got, want) {
		t.Errorf("states by version (CDS,EDS) = %q, want %q", got, want)
	}
}

// TestHistoryKeepsAnAnswerThatCameFirst: the relay adds istiod's push to the history a
// moment after sending it (relayFlush), and a quick proxy's ACK or NACK comes before it;
// the snapshot still shows that answer, and only for the version it named.
func TestHistoryKeepsAnAnswerThatCameFirst(t *testing.T) {
	t.Parallel()
	h := newHistory(10, 0, time.Now)
	wds, wads := "type.googleapis.com/istio.workload.Address", "type.googleapis.com/istio.security.Authorization"
	h.observe(Event{Kind: EventACK, NodeID: "z", TypeURL: wds, Version: "p/1"})
	h.observe(Event{Kind: EventNACK, NodeID: "z", TypeURL: wads, Version: "p/0", Error: "old"})
	h.add("z", "p/1", "istiod push", map[resource.Type][]types.Resource{wds: nil, wads: nil}, nil, nil)
	h.observe(Event{Kind: EventNACK, NodeID: "z", TypeURL: wds, Version: "p/2", Error: "refused"})
	h.add("z", "p/2", "istiod push", map[resource.Type][]types.Resource{wds: nil}, nil, nil)
	var got []string
	for _, s := range h.list("z") {
		got = append(got, s.Version+":"+s.Types[wds].State+","+s.Types[wads].State+","+s.Types[wds].Error)
	}
	want := []string{"p/1:ACK,,", "p/2:NACK,,refused"}
	if !slices.Equal(got, want) {
		t.Errorf("states by version (WDS,WADS,error) = %q, want %q", got, want)
	}
}
