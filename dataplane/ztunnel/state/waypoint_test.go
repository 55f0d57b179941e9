package state

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/meshlab/meshlab/ambientapi/workload"
)

// waypointMesh is a namespace "ns" with a waypoint (Service waypoint, VIP 10.96.0.10,
// pod 10.0.0.10 with service account waypoint), a Service reviews (VIP 10.96.0.1) that
// uses it, and reviews' pod 10.0.0.1 that uses it as a workload waypoint.
func waypointMesh(t *testing.T) *Store {
	t.Helper()
	gw := &workload.GatewayAddress{
		Destination:   &workload.GatewayAddress_Address{Address: &workload.NetworkAddress{Address: netip.MustParseAddr("10.96.0.10").AsSlice()}},
		HboneMtlsPort: 15008,
	}
	wpSvc := service("ns", "waypoint", "10.96.0.10")
	wpSvc.GetService().Ports = []*workload.Port{{ServicePort: 15008, TargetPort: 15008}}
	reviews := service("ns", "reviews", "10.96.0.1")
	reviews.GetService().Waypoint = gw
	rpod := pod("reviews-v1", "ns", "reviews", "n", "10.0.0.1", map[string]*workload.PortList{"ns/reviews.ns.svc.cluster.local": {Ports: []*workload.Port{{ServicePort: 80, TargetPort: 9080}}}})
	rpod.GetWorkload().Waypoint = gw
	s := New("n")
	s.ApplyAddresses([]*workload.Address{
		wpSvc, reviews, rpod,
		pod("waypoint-7c9f", "ns", "waypoint", "n", "10.0.0.10", map[string]*workload.PortList{"ns/waypoint.ns.svc.cluster.local": {Ports: []*workload.Port{{ServicePort: 15008, TargetPort: 15008}}}}),
		pod("curl", "ns", "curl", "n", "10.0.0.2", nil),
	}, nil)
	return s
}

func TestFindWaypoint(t *testing.T) {
	t.Parallel()
	s := waypointMesh(t)
	svc := s.ServiceByVIP(netip.MustParseAddr("10.96.0.1"), "ns")
	gw, ok := ServiceWaypoint(svc)
	if !ok {
		t.Fatal("reviews has no waypoint")
	}
	up, err := s.FindWaypoint(s.WorkloadByIP(netip.MustParseAddr("10.0.0.2")), gw)
	if err != nil {
		t.Fatal(err)
	}
	if up.Address() != netip.MustParseAddrPort("10.0.0.10:15008") || up.Workload.GetName() != "waypoint-7c9f" {
		t.Errorf("waypoint upstream = %v %s", up.Address(), up.Workload.GetName())
	}
	// A reference to nothing fails.
	_, err = s.FindWaypoint(nil, &workload.GatewayAddress{
		Destination:   &workload.GatewayAddress_Hostname{Hostname: &workload.NamespacedHostname{Namespace: "ns", Hostname: "gone.ns.svc.cluster.local"}},
		HboneMtlsPort: 15008,
	})
	if !errors.Is(err, ErrUnknownWaypoint) {
		t.Errorf("unknown waypoint: err = %v", err)
	}
}

// Weighted waypoints are picked by weight; a zero weight is never picked.
func TestServiceWaypointWeighted(t *testing.T) {
	t.Parallel()
	a := &workload.GatewayAddress{HboneMtlsPort: 1}
	b := &workload.GatewayAddress{HboneMtlsPort: 2}
	svc := &Service{Service: &workload.Service{
		Waypoint:          &workload.GatewayAddress{HboneMtlsPort: 3},
		WeightedWaypoints: []*workload.WeightedWaypoint{{Destination: a, Weight: 0}, {Destination: b, Weight: 5}},
	}}
	for range 50 {
		if gw, _ := ServiceWaypoint(svc); gw != b {
			t.Fatalf("picked %v, want the only weighted waypoint with weight", gw)
		}
	}
	if _, ok := ServiceWaypoint(&Service{Service: &workload.Service{}}); ok {
		t.Error("a service without waypoint has one")
	}
}

// check_from_waypoint: identity and address must both be one of the waypoint's pods.
func TestFromWaypoint(t *testing.T) {
	t.Parallel()
	s := waypointMesh(t)
	dst := s.WorkloadByIP(netip.MustParseAddr("10.0.0.1"))
	for _, tc := range []struct {
		id, ip string
		want   bool
	}{
		{"spiffe://cluster.local/ns/ns/sa/waypoint", "10.0.0.10", true},
		{"spiffe://cluster.local/ns/ns/sa/waypoint", "10.0.0.2", false},
		{"spiffe://cluster.local/ns/ns/sa/curl", "10.0.0.10", false},
	} {
		if got := s.FromWaypoint(dst, tc.id, netip.MustParseAddr(tc.ip)); got != tc.want {
			t.Errorf("FromWaypoint(%s, %s) = %v, want %v", tc.id, tc.ip, got, tc.want)
		}
	}
	if s.FromWaypoint(s.WorkloadByIP(netip.MustParseAddr("10.0.0.2")), "spiffe://cluster.local/ns/ns/sa/waypoint", netip.MustParseAddr("10.0.0.10")) {
		t.Error("a workload without a waypoint reports traffic from a waypoint")
	}
}

// The waypoint sandwich: the waypoint pod accepts HBONE targets whose waypoint it is.
func TestIsWaypointFor(t *testing.T) {
	t.Parallel()
	s := waypointMesh(t)
	wp := s.WorkloadByIP(netip.MustParseAddr("10.0.0.10"))
	curl := s.WorkloadByIP(netip.MustParseAddr("10.0.0.2"))
	for _, tc := range []struct {
		target string
		local  *Workload
		want   bool
	}{
		{"10.96.0.1", wp, true},    // the service's waypoint
		{"10.0.0.1", wp, true},     // the workload's waypoint
		{"10.0.0.2", wp, false},    // curl has no waypoint
		{"10.96.0.1", curl, false}, // curl is not reviews' waypoint
	} {
		if got := s.IsWaypointFor(netip.MustParseAddr(tc.target), tc.local); got != tc.want {
			t.Errorf("IsWaypointFor(%s, %s) = %v, want %v", tc.target, tc.local.GetName(), got, tc.want)
		}
	}
}
