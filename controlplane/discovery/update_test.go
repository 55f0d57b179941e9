package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// withVS returns m with a VirtualService on svc giving its route a timeout.
func withVS(m *model.Model, svc string, timeout time.Duration) *model.Model {
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, &model.IstioConfig[*networking.VirtualService]{
		Name: svc, Namespace: "default",
		Spec: &networking.VirtualService{Hosts: []string{svc}, Http: []*networking.HTTPRoute{{
			Timeout: durationpb.New(timeout),
			Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: svc, Subset: "v1"}}},
		}}},
	})
	return m
}

// withDR returns m with a DestinationRule on svc with a subset v1.
func withDR(m *model.Model, svc string, lb networking.LoadBalancerSettings_SimpleLB) *model.Model {
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, &model.IstioConfig[*networking.DestinationRule]{
		Name: svc, Namespace: "default",
		Spec: &networking.DestinationRule{Host: svc,
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
				LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: lb}}},
			Subsets: []*networking.Subset{{Name: "v1", Labels: map[string]string{"app": svc}}},
		},
	})
	return m
}

// TestScopedUpdateMatchesFullGeneration checks that what the scoped, shared, parallel
// update sets for every proxy is exactly what xds.Generate makes of the model, through
// a sequence of the common changes and the nack fault, and that a VirtualService change
// reuses clusters and endpoints while a Service change rebuilds them.
func TestScopedUpdateMatchesFullGeneration(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	steps := []struct {
		name string
		m    *model.Model
	}{
		{"start", scaleModel(4, 2)},
		{"VirtualService", withVS(scaleModel(4, 2), "svc-000", time.Second)},
		{"VirtualService changed", withVS(scaleModel(4, 2), "svc-000", 2*time.Second)},
		{"DestinationRule", withDR(withVS(scaleModel(4, 2), "svc-000", 2*time.Second), "svc-000", networking.LoadBalancerSettings_ROUND_ROBIN)},
		{"DestinationRule changed", withDR(withVS(scaleModel(4, 2), "svc-000", 2*time.Second), "svc-000", networking.LoadBalancerSettings_RANDOM)},
		{"both removed", scaleModel(4, 2)},
		{"endpoint", func() *model.Model {
			m := scaleModel(4, 2)
			return model.New(m.Services, append(slices.Clone(m.Pods), scalePod(1, 2, false)))
		}()},
		{"new service", scaleModel(5, 2)},
		{"other namespace, sourceLabels", sourceLabelsModel(false)},
		{"sourceLabels changed", sourceLabelsModel(true)},
		{"pod gone", scaleModel(5, 1)},
	}
	nacked := scaleModel(5, 1).Pods[0].NodeID()
	var prevClusters map[string]types.Resource
	for _, st := range steps {
		if err := s.UpdateFor(ctx, st.m, st.name); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.name == "pod gone" {
			if err := s.SetNack(ctx, nacked, true); err != nil {
				t.Fatalf("SetNack: %v", err)
			}
		}
		checkMatchesGenerate(t, s, st.m, st.name, nacked)
		id := st.m.Pods[0].NodeID()
		snap, err := s.cache.GetSnapshot(id)
		if err != nil {
			t.Fatalf("%s: snapshot of %s: %v", st.name, id, err)
		}
		clusters := snap.GetResources(resource.ClusterType)
		name := xds.OutboundClusterName(8080, "", "svc-002.default.svc.cluster.local")
		if prevClusters != nil && clusters[name] == nil {
			t.Fatalf("%s: no cluster %s", st.name, name)
		}
		switch {
		case prevClusters == nil:
		case st.name == "VirtualService changed" && clusters[name] != prevClusters[name]:
			t.Errorf("%s: cluster %s was generated again; a VirtualService change reuses clusters", st.name, name)
		case st.name == "new service" && clusters[name] == prevClusters[name]:
			t.Errorf("%s: cluster %s was reused; a Service change rebuilds clusters", st.name, name)
		}
		prevClusters = clusters
	}
	// Identical resources are shared across proxies: svc-002's cluster is one object.
	a, _ := s.cache.GetSnapshot(scaleModel(5, 1).Pods[1].NodeID())
	b, _ := s.cache.GetSnapshot(scaleModel(5, 1).Pods[2].NodeID())
	name := xds.OutboundClusterName(8080, "", "svc-004.default.svc.cluster.local")
	if ca, cb := a.GetResources(resource.ClusterType)[name], b.GetResources(resource.ClusterType)[name]; ca == nil || ca != cb {
		t.Errorf("cluster %s of two proxies: %p and %p, want one shared object", name, ca, cb)
	}
}

// sourceLabelsModel is scaleModel(5, 2) with a pod in another namespace and a
// VirtualService on svc-000 whose route applies only to callers labelled app=svc-001
// (or svc-002 when other): routes differ by the caller's namespace and labels, and
// clusters by the caller's namespace (a DestinationRule in "other").
func sourceLabelsModel(other bool) *model.Model {
	m := scaleModel(5, 2)
	p := scalePod(4, 5, true)
	p.Namespace, p.Name = "other", "client"
	m = model.New(m.Services, append(slices.Clone(m.Pods), p))
	src := "svc-001"
	if other {
		src = "svc-002"
	}
	m.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{
		Name: "svc-000", Namespace: "default",
		Spec: &networking.VirtualService{Hosts: []string{"svc-000"}, Http: []*networking.HTTPRoute{{
			Match:   []*networking.HTTPMatchRequest{{SourceLabels: map[string]string{"app": src}}},
			Timeout: durationpb.New(time.Second),
			Route:   []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "svc-000"}}},
		}}},
	}}
	// DestinationRules in the client's namespace and the service's: the client sees
	// svc-000 round robin, the pods of default random.
	dr := func(ns string, lb networking.LoadBalancerSettings_SimpleLB) *model.IstioConfig[*networking.DestinationRule] {
		return &model.IstioConfig[*networking.DestinationRule]{
			Name: "svc-000", Namespace: ns,
			Spec: &networking.DestinationRule{Host: "svc-000.default.svc.cluster.local",
				TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
					LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: lb}}}},
		}
	}
	m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{
		dr("default", networking.LoadBalancerSettings_RANDOM), dr("other", networking.LoadBalancerSettings_ROUND_ROBIN),
	}
	return m
}

// checkMatchesGenerate compares every injected pod's snapshot with xds.Generate's.
func checkMatchesGenerate(t *testing.T, s *Server, m *model.Model, step, nacked string) {
	t.Helper()
	for _, pod := range m.Pods {
		if !pod.Sidecar.Inject {
			continue
		}
		want, err := xds.Generate(m, pod)
		if err != nil {
			t.Fatalf("%s: Generate: %v", step, err)
		}
		if pod.NodeID() == nacked && s.faults.nacked(nacked) {
			want = withNackListener(want)
		}
		snap, err := s.cache.GetSnapshot(pod.NodeID())
		if err != nil {
			t.Fatalf("%s: snapshot of %s: %v", step, pod.Name, err)
		}
		for _, typ := range xds.GeneratedTypes {
			got := snap.GetResources(typ)
			if len(got) != len(want[typ]) {
				t.Errorf("%s: %s %s: %d resources, want %d", step, pod.Name, typ, len(got), len(want[typ]))
				continue
			}
			for _, w := range want[typ] {
				n := cachev3.GetResourceName(w)
				if !proto.Equal(got[n], w) {
					t.Errorf("%s: %s %s %s differs from xds.Generate's", step, pod.Name, typ, n)
				}
			}
		}
	}
}

// TestHistoryBoundInBytes checks that the history drops the oldest snapshots beyond its
// bound in bytes, never a proxy's current one, and frees what it counted.
func TestHistoryBoundInBytes(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1, HistoryBytes: 1})
	ctx := context.Background()
	for i := range 3 {
		if err := s.UpdateFor(ctx, withVS(scaleModel(3, 1), "svc-000", time.Duration(i+1)*time.Second), "step"); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range scaleModel(3, 1).Pods {
		h := s.History(pod.NodeID())
		if len(h) != 1 || h[0].Version != "v3" {
			t.Errorf("history of %s: %d snapshots (last %v), want only the current v3", pod.Name, len(h), h)
		}
	}
	if s.history.bytes <= 0 {
		t.Errorf("history counts %d bytes for the current snapshots, want > 0", s.history.bytes)
	}
	big := newHistory(20, 1<<30, time.Now)
	res := map[resource.Type][]types.Resource{resource.ClusterType: {}}
	big.add("a", "v1", "t", res, map[resource.Type]int{resource.ClusterType: 10})
	big.add("a", "v2", "t", res, map[resource.Type]int{resource.ClusterType: 5})
	big.forget([]string{"a"})
	if big.bytes != 0 || len(big.nodes) != 0 {
		t.Errorf("after forget: %d bytes, %d nodes; want 0, 0", big.bytes, len(big.nodes))
	}
}
