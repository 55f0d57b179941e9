package xds

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// withWaypoints gives ambientModel's namespace default the waypoint istioctl's
// `waypoint apply --enroll-namespace` makes (service traffic), a workload waypoint "wl"
// that reviews-v1 names, a Service db that opts out, and a ServiceEntry that names the
// namespace's waypoint with an endpoint that names wl; each waypoint's Service and pod are
// as the deployment controller makes them.
func withWaypoints(m *model.Model) {
	m.Namespaces[0].Labels[model.LabelUseWaypoint] = "waypoint"
	m.Pod("reviews-v1").Labels[model.LabelUseWaypoint] = "wl"
	svcs, pods := m.Services, m.Pods
	for _, s := range svcs {
		if s.Name == "db" {
			s.Labels = map[string]string{model.LabelUseWaypoint: model.WaypointNone}
		}
	}
	for i, w := range []*model.Waypoint{
		{Name: "waypoint", Namespace: "default", For: model.WaypointForService, From: "Same"},
		{Name: "wl", Namespace: "default", For: model.WaypointForWorkload, From: "Same"},
	} {
		m.Waypoints = append(m.Waypoints, w)
		svcs = append(svcs, &model.Service{
			Name: w.Name, Namespace: w.Namespace, VIP: netip.AddrFrom4([4]byte{10, 96, 0, byte(40 + i)}),
			Selector: map[string]string{model.GatewayAPINameLabel: w.Name},
			Labels:   map[string]string{model.GatewayAPINameLabel: w.Name, model.LabelGatewayManaged: model.ManagedByMeshController},
			Ports: []model.ServicePort{
				{Name: "status-port", Port: 15021, TargetPort: 15021, Protocol: model.ProtocolTCP, AppProtocol: "tcp"},
				{Name: "mesh", Port: 15008, TargetPort: 15008, Protocol: model.ProtocolTCP, AppProtocol: "hbone"},
			},
		})
		pods = append(pods, &model.Pod{
			Name: w.Name + "-6d8f7c9b5-x2x4z", Namespace: w.Namespace, Workload: w.Name, ServiceAccount: w.Name,
			Labels: map[string]string{model.GatewayAPINameLabel: w.Name, model.LabelDataplaneMode: model.DataplaneModeNone,
				"service.istio.io/canonical-name": w.Name, "service.istio.io/canonical-revision": "latest"},
			IP: netip.AddrFrom4([4]byte{10, 244, 0, byte(40 + i)}), Router: true, Waypoint: true, Sidecar: model.SidecarSpec{Inject: true},
		})
	}
	n := model.New(svcs, pods)
	n.Istio, n.Mesh, n.Namespaces, n.Waypoints = m.Istio, m.Mesh, m.Namespaces, m.Waypoints
	n.Istio.ServiceEntries = append(n.Istio.ServiceEntries, se("vms", &networking.ServiceEntry{
		Hosts: []string{"vm.mesh.internal"}, Addresses: []string{"240.0.0.5"},
		Ports:      []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}},
		Resolution: networking.ServiceEntry_STATIC,
		Endpoints:  []*networking.WorkloadEntry{{Address: "192.0.2.20", Labels: map[string]string{model.LabelUseWaypoint: "wl"}}},
	}))
	*m = *n
}

func TestWDSWaypointGolden(t *testing.T) {
	m := ambientModel()
	withWaypoints(m)
	testutil.Golden(t, "wds-waypoint", dumpWDS(t, m, wdsOpts))
}

func TestWDSWaypointAsIstiod(t *testing.T) {
	m := ambientModel()
	withWaypoints(m)
	find := func(o WDSOptions, name string) *workload.Address {
		for _, a := range Addresses(m, o) {
			if AddressName(a) == name {
				return a
			}
		}
		t.Fatalf("no address %s", name)
		return nil
	}
	want := func(wp string) *workload.GatewayAddress {
		return &workload.GatewayAddress{
			Destination:   &workload.GatewayAddress_Hostname{Hostname: &workload.NamespacedHostname{Namespace: "default", Hostname: wp + ".default.svc.cluster.local"}},
			HboneMtlsPort: 15008,
		}
	}
	for _, tc := range []struct {
		name string
		got  func(WDSOptions) *workload.GatewayAddress
		want *workload.GatewayAddress
	}{
		{"service inherits the namespace's", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, "default/reviews.default.svc.cluster.local").GetService().GetWaypoint()
		}, want("waypoint")},
		{"service opts out", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, "default/db.default.svc.cluster.local").GetService().GetWaypoint()
		}, nil},
		{"a waypoint's Service has none", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, "default/waypoint.default.svc.cluster.local").GetService().GetWaypoint()
		}, nil},
		{"ServiceEntry inherits", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, "default/vm.mesh.internal").GetService().GetWaypoint()
		}, want("waypoint")},
		{"pod names a workload waypoint", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, PodUID("", "default", "reviews-v1")).GetWorkload().GetWaypoint()
		}, want("wl")},
		{"pod inherits a service waypoint: none", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, PodUID("", "default", "reviews-v2")).GetWorkload().GetWaypoint()
		}, nil},
		{"ServiceEntry endpoint names wl", func(o WDSOptions) *workload.GatewayAddress {
			return find(o, "Kubernetes/networking.istio.io/ServiceEntry/default/vms/192.0.2.20").GetWorkload().GetWaypoint()
		}, want("wl")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(wdsOpts); !proto.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// A waypoint whose pod is not ready yet is no waypoint (istiod waits for its
			// Gateway's status addresses).
			notReady := wdsOpts
			notReady.WaypointReady = func(*model.Waypoint) bool { return false }
			if got := tc.got(notReady); got != nil {
				t.Errorf("not ready: got %v, want none", got)
			}
		})
	}
}
