package discovery

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoverypb "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/controlplane/xds"
)

// waypointModel is an ambient namespace whose service web uses the namespace's waypoint,
// with the waypoint's Service and pod as the config loader makes them.
func waypointModel() *model.Model {
	web := &model.Service{
		Name: "web", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.20"),
		Ports:    []model.ServicePort{{Name: "http", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP}},
		Selector: map[string]string{"app": "web"},
	}
	wpLabels := map[string]string{model.GatewayAPINameLabel: "waypoint", model.LabelGatewayManaged: model.ManagedByMeshController}
	wpSvc := &model.Service{
		Name: "waypoint", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.30"),
		Ports:    []model.ServicePort{{Name: "mesh", Port: 15008, TargetPort: 15008, Protocol: model.ProtocolTCP}},
		Selector: map[string]string{model.GatewayAPINameLabel: "waypoint"}, Labels: wpLabels,
	}
	m := model.New([]*model.Service{web, wpSvc}, []*model.Pod{
		{
			Name: "web-v1", Namespace: "default", Workload: "web-v1", Labels: map[string]string{"app": "web"},
			ServiceAccount: "web", IP: netip.MustParseAddr("10.244.0.5"), Ports: []uint16{8080},
		},
		{
			Name: "waypoint-5d4c", Namespace: "default", Workload: "waypoint", Labels: wpLabels,
			ServiceAccount: "waypoint", IP: netip.MustParseAddr("10.244.0.9"),
			Sidecar: model.SidecarSpec{Inject: true}, Router: true, Waypoint: true,
		},
	})
	m.Namespaces = []*model.Namespace{{Name: "default", Labels: map[string]string{
		model.LabelDataplaneMode: model.DataplaneModeAmbient, model.LabelUseWaypoint: "waypoint",
	}}}
	m.Waypoints = []*model.Waypoint{{Name: "waypoint", Namespace: "default", For: model.WaypointForService}}
	return m
}

// TestWaypointDelta: a waypoint~ node is served its waypoint configuration over delta
// ADS (as Istio's waypoints ask for it), and a new service using the waypoint reaches it.
func TestWaypointDelta(t *testing.T) {
	t.Parallel()
	s := startServer(t, Options{SocketGID: -1})
	ctx := context.Background()
	m := waypointModel()
	if err := s.UpdateFor(ctx, m, "start"); err != nil {
		t.Fatal(err)
	}
	node := m.Pod("waypoint-5d4c").NodeID()
	if want := "waypoint~10.244.0.9~waypoint-5d4c.default~default.svc.cluster.local"; node != want {
		t.Fatalf("waypoint node id %q, want %q", node, want)
	}
	d := dialDelta(t, "unix://"+s.path, node)
	ack := func(r *discoverypb.DeltaDiscoveryResponse) {
		d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}})
	cds := d.recv()
	cluster := xds.InboundVIPClusterName(80, "http", "web.default.svc.cluster.local")
	if names := deltaNames(cds); !slices.Contains(names, cluster) || !slices.Contains(names, xds.ConnectOriginateListener) {
		t.Fatalf("waypoint CDS %v, want %s and %s", names, cluster, xds.ConnectOriginateListener)
	}
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{cluster}})
	ack(cds)
	d.send(&discoverypb.DeltaDiscoveryRequest{TypeUrl: resource.ListenerType, ResourceNamesSubscribe: []string{"*"}})
	var lds *discoverypb.DeltaDiscoveryResponse
	for lds == nil {
		r := d.recv()
		if r.GetTypeUrl() == resource.ListenerType {
			lds = r
		}
		ack(r)
	}
	want := []string{xds.ConnectOriginateListener, xds.ConnectTerminateListener, xds.InnerConnectOriginate, xds.MainInternalListener, xds.OuterConnectOriginate}
	if got := deltaNames(lds); !slices.Equal(got, want) {
		t.Fatalf("waypoint LDS %v, want %v", got, want)
	}

	// A second service in the namespace: the waypoint gets its chain.
	m2 := waypointModel()
	api := &model.Service{
		Name: "api", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.21"),
		Ports:    []model.ServicePort{{Name: "http", Port: 8000, TargetPort: 8000, Protocol: model.ProtocolHTTP}},
		Selector: map[string]string{"app": "web"},
	}
	m3 := model.New(append(m2.Services, api), m2.Pods)
	m3.Namespaces, m3.Waypoints = m2.Namespaces, m2.Waypoints
	if err := s.UpdateFor(ctx, m3, "apply: Service default/api"); err != nil {
		t.Fatal(err)
	}
	for {
		r := d.recv()
		ack(r)
		if r.GetTypeUrl() != resource.ListenerType {
			continue
		}
		for _, res := range r.GetResources() {
			l := &listener.Listener{}
			if err := res.GetResource().UnmarshalTo(l); err != nil {
				t.Fatal(err)
			}
			if l.GetName() != xds.MainInternalListener {
				continue
			}
			var chains []string
			for _, fc := range l.GetFilterChains() {
				chains = append(chains, fc.GetName())
			}
			if !slices.Contains(chains, xds.InboundVIPClusterName(8000, "http", "api.default.svc.cluster.local")) {
				t.Fatalf("main_internal after adding api: chains %v", chains)
			}
			return
		}
	}
}
