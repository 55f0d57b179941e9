package xds

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestChangeScope holds ChangeScope to exactly what each common change touches: a
// scope that names a type, host or pod too many (over-push) or too few (under-push)
// fails. helloModel: Services frontend and backend on 8080, pods frontend-v1,
// backend-v1, backend-v2.
func TestChangeScope(t *testing.T) {
	t.Parallel()
	id := func(name string) string { return helloModel().Pod(name).NodeID() }
	host := func(name string) string { return name + ".default.svc.cluster.local" }
	svc := func(name, app string, port uint16, proto model.Protocol) *model.Service {
		return &model.Service{Name: name, Namespace: "default", VIP: netip.MustParseAddr("10.96.0.99"),
			Ports:    []model.ServicePort{{Name: "p", Port: port, TargetPort: port, Protocol: proto}},
			Selector: map[string]string{"app": app}}
	}
	withPods := func(mutate func([]*model.Pod) []*model.Pod) func(*model.Model) *model.Model {
		return func(m *model.Model) *model.Model {
			var pods []*model.Pod
			for _, p := range m.Pods {
				c := *p
				pods = append(pods, &c)
			}
			n := model.New(m.Services, mutate(pods))
			n.Istio, n.Mesh = m.Istio, m.Mesh
			return n
		}
	}
	withService := func(s *model.Service) func(*model.Model) *model.Model {
		return func(m *model.Model) *model.Model {
			n := model.New(append(slices.Clone(m.Services), s), m.Pods)
			n.Istio, n.Mesh = m.Istio, m.Mesh
			return n
		}
	}
	plainPod := &model.Pod{Name: "backend-v3", Namespace: "default", Labels: map[string]string{"app": "backend"},
		IP: netip.MustParseAddr("10.244.0.9"), Ports: []uint16{8080}}
	entryNamingPod := &model.IstioConfig[*networking.ServiceEntry]{Name: "e", Namespace: "default", Spec: &networking.ServiceEntry{
		Hosts: []string{"ext.example.com"}, Resolution: networking.ServiceEntry_STATIC,
		Ports:     []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Endpoints: []*networking.WorkloadEntry{{Address: "backend-v1"}},
	}}
	cases := []struct {
		name   string
		base   func(*model.Model) *model.Model // optional: applied to both models first
		change func(*model.Model) *model.Model
		want   Scope
	}{
		{name: "nothing", change: func(m *model.Model) *model.Model { return m }, want: Scope{}},
		{name: "VirtualService", change: func(m *model.Model) *model.Model {
			m.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{Name: "b", Namespace: "default",
				Spec: &networking.VirtualService{Hosts: []string{"backend"}, Http: []*networking.HTTPRoute{{
					Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "backend"}}}}}}}}
			return m
		}, want: Scope{Types: []resource.Type{resource.RouteType}}},
		{name: "DestinationRule", change: func(m *model.Model) *model.Model {
			m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{{Name: "b", Namespace: "default",
				Spec: &networking.DestinationRule{Host: "backend"}}}
			return m
		}, want: Scope{Types: []resource.Type{resource.SecretType}, Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{}}},
		{name: "DestinationRule subsets beside a gateway",
			base: withPods(func(ps []*model.Pod) []*model.Pod {
				return append(ps, &model.Pod{Name: "gw", Namespace: "default", Labels: map[string]string{"istio": "ingressgateway"},
					IP: netip.MustParseAddr("10.244.0.8"), Router: true, Sidecar: model.SidecarSpec{Inject: true}})
			}),
			change: func(m *model.Model) *model.Model {
				m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{{Name: "b", Namespace: "default",
					Spec: &networking.DestinationRule{Host: "backend.default.svc.cluster.local", Subsets: []*networking.Subset{
						{Name: "v2", Labels: map[string]string{"version": "v2"}}}}}}
				return m
			}, want: Scope{Types: []resource.Type{resource.SecretType}, Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{
				(&model.Pod{Name: "gw", Namespace: "default", IP: netip.MustParseAddr("10.244.0.8"), Router: true}).NodeID(): true}}},
		{name: "endpoint without a sidecar", change: withPods(func(ps []*model.Pod) []*model.Pod { return append(ps, plainPod) }),
			want: Scope{Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{}}},
		{name: "endpoint with a sidecar", change: withPods(func(ps []*model.Pod) []*model.Pod {
			p := *plainPod
			p.Sidecar.Inject = true
			return append(ps, &p)
		}), want: Scope{Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{plainPod.NodeID(): true}}},
		{name: "endpoint gone", change: withPods(func(ps []*model.Pod) []*model.Pod {
			return slices.DeleteFunc(ps, func(p *model.Pod) bool { return p.Name == "backend-v2" })
		}), want: Scope{Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{}}},
		{name: "pod relabelled to another service", change: withPods(func(ps []*model.Pod) []*model.Pod {
			for _, p := range ps {
				if p.Name == "backend-v2" {
					p.Labels = map[string]string{"app": "frontend"}
				}
			}
			return ps
		}), want: Scope{Hosts: map[string]bool{host("backend"): true, host("frontend"): true}, Pods: map[string]bool{id("backend-v2"): true}}},
		{name: "new Service of no pod", change: withService(svc("ratings", "ratings", 8080, model.ProtocolHTTP)),
			want: Scope{Types: []resource.Type{resource.RouteType}, Hosts: map[string]bool{host("ratings"): true}, Pods: map[string]bool{}}},
		{name: "new Service of backend's pods", change: withService(svc("api", "backend", 8080, model.ProtocolHTTP)),
			want: Scope{Types: []resource.Type{resource.RouteType}, Hosts: map[string]bool{host("api"): true},
				Pods: map[string]bool{id("backend-v1"): true, id("backend-v2"): true}}},
		{name: "new Service on a new HTTP port", change: withService(svc("ratings", "ratings", 9090, model.ProtocolHTTP)),
			want: Scope{Types: []resource.Type{resource.RouteType, resource.ListenerType}, Hosts: map[string]bool{host("ratings"): true}, Pods: map[string]bool{}}},
		{name: "new TCP Service", change: withService(svc("db", "db", 8080, model.ProtocolTCP)),
			want: Scope{Types: []resource.Type{resource.ListenerType, resource.RouteType}, Hosts: map[string]bool{host("db"): true}, Pods: map[string]bool{}}},
		{name: "Service and VirtualService", change: func(m *model.Model) *model.Model {
			m = withService(svc("ratings", "ratings", 8080, model.ProtocolHTTP))(m)
			m.Istio.VirtualServices = []*model.IstioConfig[*networking.VirtualService]{{Name: "b", Namespace: "default",
				Spec: &networking.VirtualService{Hosts: []string{"backend"}}}}
			return m
		}, want: Scope{Types: []resource.Type{resource.RouteType}, Hosts: map[string]bool{host("ratings"): true}, Pods: map[string]bool{}}},
		{name: "mesh config", change: func(m *model.Model) *model.Model { m.Mesh.OutboundTrafficPolicy = model.RegistryOnly; return m },
			want: Scope{Types: GeneratedTypes}},
		{name: "endpoint beside an entry naming pods",
			base: func(m *model.Model) *model.Model {
				m.Istio.ServiceEntries = []*model.IstioConfig[*networking.ServiceEntry]{entryNamingPod}
				return m
			},
			change: withPods(func(ps []*model.Pod) []*model.Pod { return append(ps, plainPod) }),
			want:   Scope{Types: GeneratedTypes}},
		{name: "Service on an entry's short host",
			base: func(m *model.Model) *model.Model {
				m.Istio.ServiceEntries = []*model.IstioConfig[*networking.ServiceEntry]{{Name: "e", Namespace: "default",
					Spec: &networking.ServiceEntry{Hosts: []string{"ratings.default"}}}}
				return m
			},
			change: withService(svc("ratings", "ratings", 8080, model.ProtocolHTTP)),
			want:   Scope{Types: GeneratedTypes}},
		{name: "endpoint beside a gateway",
			base: withPods(func(ps []*model.Pod) []*model.Pod {
				return append(ps, &model.Pod{Name: "gw", Namespace: "default", Labels: map[string]string{"istio": "ingressgateway"},
					IP: netip.MustParseAddr("10.244.0.8"), Router: true, Sidecar: model.SidecarSpec{Inject: true}})
			}),
			change: withPods(func(ps []*model.Pod) []*model.Pod { return append(ps, plainPod) }),
			want: Scope{Hosts: map[string]bool{host("backend"): true}, Pods: map[string]bool{
				(&model.Pod{Name: "gw", Namespace: "default", IP: netip.MustParseAddr("10.244.0.8"), Router: true}).NodeID(): true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			base := helloModel
			if c.base != nil {
				base = func() *model.Model { return c.base(helloModel()) }
			}
			got := ChangeScope(base(), c.change(base()))
			if !sameTypes(got.Types, c.want.Types) || !maps.Equal(got.Hosts, c.want.Hosts) || !maps.Equal(got.Pods, c.want.Pods) {
				t.Errorf("ChangeScope:\n got types %v hosts %v pods %v\nwant types %v hosts %v pods %v",
					got.Types, got.Hosts, got.Pods, c.want.Types, c.want.Hosts, c.want.Pods)
			}
			if c.want.Full() {
				return
			}
			checkScopeSuffices(t, base(), c.change(base()), got)
		})
	}
}

func sameTypes(a, b []resource.Type) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// checkScopeSuffices checks, for every injected pod of cur that old had and the scope
// does not regenerate whole, that keeping its old resources outside the scope (and
// replacing the scope's hosts with GenerateHosts') gives exactly Generate's of cur.
func checkScopeSuffices(t *testing.T, old, cur *model.Model, sc Scope) {
	t.Helper()
	for _, pod := range cur.Pods {
		if !pod.Sidecar.Inject || sc.Pods[pod.NodeID()] || old.Pod(pod.Name) == nil || old.Pod(pod.Name).NodeID() != pod.NodeID() {
			continue
		}
		was, err := Generate(old, old.Pod(pod.Name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := Generate(cur, pod)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range GeneratedTypes {
			got := was[typ]
			switch {
			case slices.Contains(sc.Types, typ):
				got = want[typ]
			case len(sc.Hosts) > 0 && (typ == resource.ClusterType || typ == resource.EndpointType):
				fresh, err := GenerateHosts(cur, pod, NewShared(cur), typ, sc.Hosts)
				if err != nil {
					t.Fatal(err)
				}
				got = slices.DeleteFunc(slices.Clone(got), func(r types.Resource) bool { return sc.Hosts[ResourceHost(cachev3.GetResourceName(r))] })
				got = append(got, fresh...)
				slices.SortFunc(got, func(a, b types.Resource) int {
					return strings.Compare(cachev3.GetResourceName(a), cachev3.GetResourceName(b))
				})
			}
			if len(got) != len(want[typ]) {
				t.Errorf("%s %s: scoped gives %d resources, Generate %d", pod.Name, typ, len(got), len(want[typ]))
				continue
			}
			for i := range got {
				if !proto.Equal(got[i], want[typ][i]) {
					t.Errorf("%s %s %s: scoped differs from Generate", pod.Name, typ, cachev3.GetResourceName(want[typ][i]))
				}
			}
		}
	}
}

// TestResourceHost checks the host read from resource names: an outbound cluster's or
// load assignment's, with or without a subset, and none from any other name.
func TestResourceHost(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		OutboundClusterName(8080, "", "a.default.svc.cluster.local"):   "a.default.svc.cluster.local",
		OutboundClusterName(9080, "v1", "b.default.svc.cluster.local"): "b.default.svc.cluster.local",
		InboundClusterName(8080): "",
		"PassthroughCluster":     "",
		"outbound|8080":          "",
	} {
		if got := ResourceHost(name); got != want {
			t.Errorf("ResourceHost(%q) = %q, want %q", name, got, want)
		}
	}
}
