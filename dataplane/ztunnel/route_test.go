package ztunnel

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

func wlAddr(w *workload.Workload) *workload.Address {
	return &workload.Address{Type: &workload.Address_Workload{Workload: w}}
}

func svcAddr(s *workload.Service) *workload.Address {
	return &workload.Address{Type: &workload.Address_Service{Service: s}}
}

func ip4(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

func vip(s string) []*workload.NetworkAddress {
	return []*workload.NetworkAddress{{Address: ip4(s)}}
}

func ports(pairs ...uint32) []*workload.Port {
	var out []*workload.Port
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &workload.Port{ServicePort: pairs[i], TargetPort: pairs[i+1]})
	}
	return out
}

// waypointXDS is a waypoint as istiod describes it: its Service (VIP 127.0.0.11, port
// 15008) and its pod at 127.0.0.10 (not captured: tunnel protocol NONE).
func waypointXDS() []*workload.Address {
	return []*workload.Address{
		svcAddr(&workload.Service{Name: "waypoint", Namespace: "ns", Hostname: "waypoint.ns.svc.cluster.local", Addresses: vip("127.0.0.11"), Ports: ports(15008, 15008)}),
		wlAddr(&workload.Workload{
			Uid: "cluster1//v1/Pod/ns/waypoint-workload", Name: "waypoint-workload", Namespace: "ns", ServiceAccount: "waypoint-sa",
			Addresses: [][]byte{ip4("127.0.0.10")},
			Services:  map[string]*workload.PortList{"ns/waypoint.ns.svc.cluster.local": {Ports: ports(15008, 15008)}},
		}),
	}
}

// waypointByVIP is the waypoint reference istiod sets: the waypoint Service's VIP.
func waypointByVIP() *workload.GatewayAddress {
	return &workload.GatewayAddress{
		Destination:   &workload.GatewayAddress_Address{Address: &workload.NetworkAddress{Address: ip4("127.0.0.11")}},
		HboneMtlsPort: 15008,
	}
}

// TestBuildRequest is ztunnel's build_request_* table (src/proxy/outbound.rs) as
// meshlab's: the source is "source-workload" in ns at 127.0.0.1 on local-node.
func TestBuildRequest(t *testing.T) {
	t.Parallel()
	source := &workload.Workload{
		Uid: "cluster1//v1/Pod/ns/source-workload", Name: "source-workload", Namespace: "ns",
		Addresses: [][]byte{ip4("127.0.0.1")}, Node: "local-node",
	}
	testTCP := func(node string, proto workload.TunnelProtocol) *workload.Address {
		return wlAddr(&workload.Workload{
			Uid: "cluster1//v1/Pod/ns/test-tcp", Name: "test-tcp", Namespace: "ns",
			Addresses: [][]byte{ip4("127.0.0.2")}, TunnelProtocol: proto, Node: node,
		})
	}
	example := func(mutate func(*workload.Service)) *workload.Address {
		s := &workload.Service{Hostname: "example.com", Addresses: vip("127.0.0.3"), Ports: ports(80, 8080)}
		if mutate != nil {
			mutate(s)
		}
		return svcAddr(s)
	}
	endpoint := func(name, ip string, proto workload.TunnelProtocol, svcPort, target uint32, mutate func(*workload.Workload)) *workload.Address {
		w := &workload.Workload{
			Uid: "cluster1//v1/Pod/default/" + name, Name: name, Namespace: "default", ServiceAccount: name,
			Addresses: [][]byte{ip4(ip)}, TunnelProtocol: proto,
			Services: map[string]*workload.PortList{"/example.com": {Ports: ports(svcPort, target)}},
		}
		if mutate != nil {
			mutate(w)
		}
		return wlAddr(w)
	}
	cases := []struct {
		name    string
		from    string // the source workload's uid; "" is source-workload
		to      string
		xds     []*workload.Address
		want    Request // Protocol, Actual, HBONETarget compared; SANs when set
		wantErr error   // any error when non-nil and not a sentinel we name
	}{
		{
			name: "unknown_dest", to: "1.2.3.4:80",
			xds:  []*workload.Address{wlAddr(&workload.Workload{Uid: "cluster1//v1/Pod/default/my-pod", Addresses: [][]byte{ip4("127.0.0.2")}})},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("1.2.3.4:80")},
		},
		{
			name: "known_dest_remote_node_tcp", to: "127.0.0.2:80",
			xds:  []*workload.Address{testTCP("remote-node", workload.TunnelProtocol_NONE)},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("127.0.0.2:80")},
		},
		{
			name: "known_dest_remote_node_hbone", to: "127.0.0.2:80",
			xds: []*workload.Address{testTCP("remote-node", workload.TunnelProtocol_HBONE)},
			want: Request{
				Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.2:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.2:80"),
				SANs: []string{"spiffe://cluster.local/ns/ns/sa/default"},
			},
		},
		{
			name: "known_dest_local_node_tcp", to: "127.0.0.2:80",
			xds:  []*workload.Address{testTCP("local-node", workload.TunnelProtocol_NONE)},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("127.0.0.2:80")},
		},
		{
			name: "known_dest_local_node_hbone", to: "127.0.0.2:80",
			xds:  []*workload.Address{testTCP("local-node", workload.TunnelProtocol_HBONE)},
			want: Request{Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.2:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.2:80")},
		},
		{
			name: "empty_service", to: "127.0.0.3:80",
			xds:     []*workload.Address{example(nil)},
			wantErr: ErrNoHealthyUpstream,
		},
		{
			name: "target_port: the endpoint's mapping wins, pods without the port are skipped", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(func(s *workload.Service) { s.Ports = ports(80, 0, 8080, 0) }),
				endpoint("matching-pod", "127.0.0.2", workload.TunnelProtocol_NONE, 80, 1234, nil),
				endpoint("unmatching-pod", "127.0.0.4", workload.TunnelProtocol_NONE, 8080, 9999, nil),
			},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("127.0.0.2:1234")},
		},
		{
			name: "passthrough_svc", to: "1.2.3.4:80",
			xds: []*workload.Address{svcAddr(&workload.Service{
				Hostname: "example.com", Addresses: []*workload.NetworkAddress{{Address: ip4("1.2.3.4")}, {Address: ip4("1.5.6.7")}},
				Ports: ports(80, 80), LoadBalancing: &workload.LoadBalancing{Mode: workload.LoadBalancing_PASSTHROUGH},
			})},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("1.2.3.4:80")},
		},
		{
			name: "service to an HBONE endpoint: authority pod ip:target port, SANs the service's and the pod's", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(func(s *workload.Service) { s.SubjectAltNames = []string{"spiffe://cluster.local/ns/default/sa/extra"} }),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_HBONE, 80, 8080, nil),
			},
			want: Request{
				Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.2:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.2:8080"),
				SANs: []string{"spiffe://cluster.local/ns/default/sa/extra", "spiffe://cluster.local/ns/default/sa/pod"},
			},
		},
		{
			name: "service target port used when the endpoint has none", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(nil),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_NONE, 80, 0, nil),
			},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("127.0.0.2:8080")},
		},
		{
			name: "a port the service does not have fails", to: "127.0.0.3:81",
			xds: []*workload.Address{
				example(nil),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_NONE, 80, 8080, nil),
			},
			wantErr: ErrNoHealthyUpstream,
		},
		{
			name: "an unhealthy endpoint is not picked", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(nil),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_HBONE, 80, 8080, func(w *workload.Workload) { w.Status = workload.WorkloadStatus_UNHEALTHY }),
			},
			wantErr: ErrNoHealthyUpstream,
		},
		{
			name: "destination_waypoint: workload-addressed traffic goes to the workload's waypoint, authority the original dst", to: "127.0.0.2:80",
			xds: append(waypointXDS(), wlAddr(&workload.Workload{
				Uid: "cluster1//v1/Pod/ns/test-tcp", Name: "test-tcp", Namespace: "ns", Addresses: [][]byte{ip4("127.0.0.2")},
				TunnelProtocol: workload.TunnelProtocol_HBONE, Waypoint: waypointByVIP(),
			})),
			want: Request{
				Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.10:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.2:80"),
				SANs: []string{"spiffe://cluster.local/ns/ns/sa/waypoint-sa"},
			},
		},
		{
			name: "destination_waypoint: traffic from the waypoint itself goes straight to the workload", to: "127.0.0.2:80",
			from: "cluster1//v1/Pod/ns/waypoint-workload",
			xds: append(waypointXDS(), wlAddr(&workload.Workload{
				Uid: "cluster1//v1/Pod/ns/test-tcp", Name: "test-tcp", Namespace: "ns", Addresses: [][]byte{ip4("127.0.0.2")},
				TunnelProtocol: workload.TunnelProtocol_HBONE, Waypoint: waypointByVIP(),
			})),
			want: Request{Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.2:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.2:80")},
		},
		{
			name: "service_waypoint: a VIP whose service has a waypoint goes to it, authority VIP:port", to: "127.0.0.3:80",
			xds: append(waypointXDS(),
				example(func(s *workload.Service) { s.Waypoint = waypointByVIP() }),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_HBONE, 80, 8080, nil)),
			want: Request{
				Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.10:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.3:80"),
				SANs: []string{"spiffe://cluster.local/ns/ns/sa/waypoint-sa"},
			},
		},
		{
			name: "service_waypoint by hostname, even with no endpoint of its own", to: "127.0.0.3:80",
			xds: append(waypointXDS(), example(func(s *workload.Service) {
				s.Waypoint = &workload.GatewayAddress{
					Destination:   &workload.GatewayAddress_Hostname{Hostname: &workload.NamespacedHostname{Namespace: "ns", Hostname: "waypoint.ns.svc.cluster.local"}},
					HboneMtlsPort: 15008,
				}
			})),
			want: Request{Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.10:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.3:80")},
		},
		{
			name: "service_waypoint: a waypoint without a pod fails, never goes around it", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(func(s *workload.Service) { s.Waypoint = waypointByVIP() }),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_HBONE, 80, 8080, nil),
			},
			wantErr: state.ErrUnknownWaypoint,
		},
		{
			name: "service-addressed traffic goes to the waypoint even from the waypoint (only workload-addressed traffic is checked)", to: "127.0.0.3:80",
			from: "cluster1//v1/Pod/ns/waypoint-workload",
			xds: append(waypointXDS(),
				example(func(s *workload.Service) { s.Waypoint = waypointByVIP() }),
				endpoint("pod", "127.0.0.2", workload.TunnelProtocol_HBONE, 80, 8080, nil)),
			want: Request{Protocol: HBONE, Actual: netip.MustParseAddrPort("127.0.0.10:15008"), HBONETarget: netip.MustParseAddrPort("127.0.0.3:80")},
		},
		{
			name: "a namespace-visible service of another namespace is not this client's", to: "127.0.0.3:80",
			xds: []*workload.Address{
				example(func(s *workload.Service) { s.Namespace = "other"; s.Visibility = workload.Service_NAMESPACE }),
			},
			want: Request{Protocol: TCP, Actual: netip.MustParseAddrPort("127.0.0.3:80")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := state.New("local-node")
			st.ApplyAddresses(append([]*workload.Address{wlAddr(source)}, tc.xds...), nil)
			from := source.GetUid()
			if tc.from != "" {
				from = tc.from
			}
			src := st.WorkloadByUID(from)
			got, err := buildRequest(st, src, src.IPs[0], netip.MustParseAddrPort(tc.to))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got.Protocol != tc.want.Protocol || got.Actual != tc.want.Actual || got.HBONETarget != tc.want.HBONETarget {
				t.Errorf("got %v to %s (authority %s), want %v to %s (authority %s)",
					got.Protocol, got.Actual, got.HBONETarget, tc.want.Protocol, tc.want.Actual, tc.want.HBONETarget)
			}
			if tc.want.SANs != nil && !slices.Equal(got.SANs, tc.want.SANs) {
				t.Errorf("SANs = %v, want %v", got.SANs, tc.want.SANs)
			}
		})
	}
}
