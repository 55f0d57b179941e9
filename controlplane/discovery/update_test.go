package discovery

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
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
// reuses clusters and endpoints while a Service change rebuilds its own only.
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
		{"pod relabelled to another service", relabelled(scaleModel(5, 2), "svc-001-1", "svc-003", "")},
		{"pod with another service account", relabelled(scaleModel(5, 2), "svc-001-1", "svc-001", "other-sa")},
		{"service port renumbered", func() *model.Model {
			m := scaleModel(5, 2)
			m.Services[3].Ports[0].Port = 9090
			return m
		}()},
		{"TCP service", func() *model.Model {
			m := scaleModel(5, 2)
			m.Services[3].Ports = append(m.Services[3].Ports, model.ServicePort{Name: "tcp", Port: 5000, TargetPort: 5000, Protocol: model.ProtocolTCP})
			return m
		}()},
		{"short host, no service", withVSHost(scaleModel(5, 2), "svc-000", "svc-009.default")},
		{"short host resolves to a new service", withVSHost(scaleModel(10, 1), "svc-000", "svc-009.default")},
		{"service removed", withVSHost(scaleModel(9, 1), "svc-000", "svc-009.default")},
		{"entry on a short host", withEntryAndDR(scaleModel(9, 1), "svc-009.default")},
		{"service on the entry's short host", withEntryAndDR(scaleModel(10, 1), "svc-009.default")},
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
		case st.name == "new service" && clusters[name] != prevClusters[name]:
			t.Errorf("%s: cluster %s was generated again; a new Service rebuilds only its own", st.name, name)
		case st.name == "service port renumbered" && clusters[name] != prevClusters[name]:
			t.Errorf("%s: cluster %s of another service was generated again", st.name, name)
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

// relabelled returns m with pod's app label set to app (it then backs that service)
// and, when sa is set, its service account.
func relabelled(m *model.Model, pod, app, sa string) *model.Model {
	for i, p := range m.Pods {
		if p.Name == pod {
			c := *p
			c.Labels = map[string]string{"app": app}
			if sa != "" {
				c.ServiceAccount = sa
			}
			m.Pods[i] = &c
		}
	}
	return m
}

// withVSHost returns m with a VirtualService on svc sending its traffic to host.
func withVSHost(m *model.Model, svc, host string) *model.Model {
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, &model.IstioConfig[*networking.VirtualService]{
		Name: svc, Namespace: "default",
		Spec: &networking.VirtualService{Hosts: []string{svc}, Http: []*networking.HTTPRoute{{
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: host}}},
		}}},
	})
	return m
}

// withEntryAndDR returns m with a ServiceEntry for host (HTTP 8080, one static
// address) and a DestinationRule on host.
func withEntryAndDR(m *model.Model, host string) *model.Model {
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, &model.IstioConfig[*networking.ServiceEntry]{
		Name: "entry", Namespace: "default",
		Spec: &networking.ServiceEntry{Hosts: []string{host}, Resolution: networking.ServiceEntry_STATIC,
			Ports:     []*networking.ServicePort{{Number: 8080, Name: "http", Protocol: "HTTP"}},
			Endpoints: []*networking.WorkloadEntry{{Address: "10.9.9.9"}}},
	})
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, &model.IstioConfig[*networking.DestinationRule]{
		Name: "entry", Namespace: "default",
		Spec: &networking.DestinationRule{Host: host, TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{
			LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}}}},
	})
	return m
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
	big.add("a", "v1", "t", res, map[resource.Type]int{resource.ClusterType: 10}, nil)
	big.add("a", "v2", "t", res, map[resource.Type]int{resource.ClusterType: 5}, nil)
	big.forget([]string{"a"})
	if big.bytes != 0 || len(big.nodes) != 0 {
		t.Errorf("after forget: %d bytes, %d nodes; want 0, 0", big.bytes, len(big.nodes))
	}
}

// TestEndpointChangeRebuildsOnlyItsService checks, on a running server, that an endpoint
// change (a pod without a sidecar joins svc-001) pushes every proxy a new version in
// which only svc-001's load assignment is new: every other resource is the very object
// of the previous snapshot (kept, not generated again), and svc-001's cluster too (the
// pod adds no service account). A new Service keeps every other Service's clusters and
// load assignments and every listener of the pods it does not select.
func TestEndpointChangeRebuildsOnlyItsService(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	base := scaleModel(4, 2)
	if err := s.UpdateFor(ctx, base, "start"); err != nil {
		t.Fatal(err)
	}
	snaps := func() map[string]*cachev3.Snapshot {
		out := map[string]*cachev3.Snapshot{}
		for _, p := range base.Pods {
			snap, err := s.cache.GetSnapshot(p.NodeID())
			if err != nil {
				t.Fatalf("snapshot of %s: %v", p.Name, err)
			}
			out[p.Name] = snap.(*cachev3.Snapshot)
		}
		return out
	}
	// check compares every proxy's snapshot with before: the resources fresh names are
	// new objects, every other one is the same object.
	check := func(step string, before map[string]*cachev3.Snapshot, fresh func(pod string, typ resource.Type, name string) bool) {
		t.Helper()
		after := snaps()
		for pod, a := range after {
			b := before[pod]
			if a.GetVersion(resource.EndpointType) == b.GetVersion(resource.EndpointType) {
				t.Errorf("%s: %s kept version %s; every proxy sees the change", step, pod, a.GetVersion(resource.EndpointType))
			}
			for _, typ := range []resource.Type{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.RouteType} {
				for name, r := range a.GetResources(typ) {
					old, had := b.GetResources(typ)[name]
					if want := fresh(pod, typ, name); want != (!had || old != r) {
						t.Errorf("%s: %s %s %s: generated again %v, want %v", step, pod, typ, name, !had || old != r, want)
					}
				}
			}
		}
	}
	svc1 := func(name string) bool { return xds.ResourceHost(name) == "svc-001.default.svc.cluster.local" }
	before := snaps()
	endpoint := model.New(base.Services, append(slices.Clone(base.Pods), scalePod(1, 2, false)))
	if err := s.UpdateFor(ctx, endpoint, "endpoint"); err != nil {
		t.Fatal(err)
	}
	checkMatchesGenerate(t, s, endpoint, "endpoint", "")
	check("endpoint", before, func(_ string, typ resource.Type, name string) bool {
		return typ == resource.EndpointType && svc1(name)
	})

	before = snaps()
	svc := scaleService(1)
	svc.Name, svc.VIP = "api", netip.MustParseAddr("10.96.9.9")
	withSvc := model.New(append(slices.Clone(endpoint.Services), svc), endpoint.Pods)
	if err := s.UpdateFor(ctx, withSvc, "new service"); err != nil {
		t.Fatal(err)
	}
	checkMatchesGenerate(t, s, withSvc, "new service", "")
	check("new service", before, func(pod string, typ resource.Type, name string) bool {
		if strings.HasPrefix(pod, "svc-001-") {
			return true // api selects it: its inbound side, and so everything, is generated again
		}
		return typ == resource.RouteType || xds.ResourceHost(name) == "api.default.svc.cluster.local"
	})
}

// TestConsistentChecksWhatChanged checks that a snapshot whose clusters name a load
// assignment it lacks is refused when its clusters or load assignments changed, and
// that the check is skipped (listeners are not decoded again) when neither did.
func TestConsistentChecksWhatChanged(t *testing.T) {
	t.Parallel()
	eds := func(name string) *cluster.Cluster {
		return &cluster.Cluster{Name: name, ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{ServiceName: name}}
	}
	state := func(sum byte, clusters []string, cla ...string) *proxyState {
		st := &proxyState{types: map[resource.Type]typeState{
			resource.ClusterType: {sum: [32]byte{sum}}, resource.EndpointType: {names: cla},
			resource.ListenerType: {}, resource.RouteType: {},
		}}
		cs, es := st.types[resource.ClusterType], st.types[resource.EndpointType]
		for _, c := range clusters {
			cs.res = append(cs.res, eds(c))
		}
		for _, n := range cla {
			es.res = append(es.res, &endpoint.ClusterLoadAssignment{ClusterName: n})
		}
		st.types[resource.ClusterType], st.types[resource.EndpointType] = cs, es
		return st
	}
	good := state(1, []string{"a"}, "a")
	for _, c := range []struct {
		name      string
		prev, cur *proxyState
		ok        bool
	}{
		{"first snapshot, consistent", nil, good, true},
		{"first snapshot, a load assignment missing", nil, state(1, []string{"a", "b"}, "a"), false},
		{"clusters changed, a load assignment missing", good, state(2, []string{"a", "b"}, "a"), false},
		{"load assignments renamed", good, state(1, []string{"a"}, "b"), false},
		{"nothing either names changed: not checked", good, state(1, []string{"a", "b"}, "a"), true},
		{"a load assignment no cluster names", nil, state(1, []string{"a"}, "a", "b"), false},
		{"two clusters name one load assignment", nil, state(1, []string{"a", "a"}, "a"), true},
		{"no clusters, no load assignments", nil, state(1, nil), true},
	} {
		err := consistent(c.prev, c.cur, "v1")
		if (err == nil) != c.ok {
			t.Errorf("%s: consistent = %v, want ok %v", c.name, err, c.ok)
		}
		if c.prev != nil {
			continue
		}
		// clustersConsistent answers as go-control-plane's Consistent.
		snap, serr := cachev3.NewSnapshot("v1", map[resource.Type][]types.Resource{
			resource.ClusterType: c.cur.types[resource.ClusterType].res, resource.EndpointType: c.cur.types[resource.EndpointType].res,
		})
		if serr == nil {
			serr = snap.Consistent()
		}
		if (serr == nil) != (err == nil) {
			t.Errorf("%s: consistent = %v, go-control-plane's Consistent = %v", c.name, err, serr)
		}
	}
	// A cluster that is not EDS names nothing; one without a service name names itself.
	static := &cluster.Cluster{Name: "s", ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC}}
	own := &cluster.Cluster{Name: "o", ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS}}
	checked, err := clustersConsistent(typeState{res: []types.Resource{static, own}}, typeState{names: []string{"o"}})
	if !checked || err != nil {
		t.Errorf("static and self-named EDS cluster: checked %v, %v; want checked, consistent", checked, err)
	}
	if checked, _ := clustersConsistent(typeState{res: []types.Resource{&endpoint.ClusterLoadAssignment{}}}, typeState{}); checked {
		t.Error("a resource that is not a Cluster was checked, want it left to Consistent")
	}
}

// TestMergeHostsKeepsUnchangedState checks that replacing hosts whose resources came out
// as they were keeps the previous state itself (no copy per proxy), and that any
// difference in a name or digest, or a resource more or less, makes a new one.
func TestMergeHostsKeepsUnchangedState(t *testing.T) {
	t.Parallel()
	a := xds.OutboundClusterName(80, "", "a.default.svc.cluster.local")
	b := xds.OutboundClusterName(80, "", "b.default.svc.cluster.local")
	bv1 := xds.OutboundClusterName(80, "v1", "b.default.svc.cluster.local")
	ts := func(names []string, keys ...byte) typeState {
		st := typeState{names: names, res: make([]types.Resource, len(names)), anys: make([]*anypb.Any, len(names))}
		for _, k := range keys {
			st.keys = append(st.keys, [32]byte{k})
		}
		return st
	}
	hosts := map[string]bool{"b.default.svc.cluster.local": true}
	prev := ts([]string{a, b}, 1, 2)
	for _, c := range []struct {
		name  string
		fresh typeState
		kept  bool
		names []string
	}{
		{"same", ts([]string{b}, 2), true, []string{a, b}},
		{"digest differs", ts([]string{b}, 3), false, []string{a, b}},
		{"a subset more", ts([]string{b, bv1}, 2, 4), false, []string{a, b, bv1}},
		{"gone", ts(nil), false, []string{a}},
	} {
		got := mergeHosts(resource.ClusterType, prev, c.fresh, hosts)
		if kept := len(got.names) > 0 && &got.names[0] == &prev.names[0]; kept != c.kept || !slices.Equal(got.names, c.names) {
			t.Errorf("%s: kept %v names %q, want kept %v names %q", c.name, kept, got.names, c.kept, c.names)
		}
	}
}
