package xds

import (
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

func TestTCPRouteForPicksTheFirstMatchingPort(t *testing.T) {
	t.Parallel()
	dst := func(subset string) []*networking.RouteDestination {
		return []*networking.RouteDestination{{Destination: &networking.Destination{Host: "tcp-echo", Subset: subset}}}
	}
	vs := &model.IstioConfig[*networking.VirtualService]{Spec: &networking.VirtualService{Tcp: []*networking.TCPRoute{
		{Match: []*networking.L4MatchAttributes{{Port: 9001}}, Route: dst("a")},
		{Match: []*networking.L4MatchAttributes{{Port: 9000}, {Port: 9002}}, Route: dst("b")},
		{Route: dst("c")},
	}}}
	for port, want := range map[uint16]string{9001: "a", 9000: "b", 9002: "b", 9003: "c"} {
		if r := tcpRouteFor(vs, port); r == nil || r.GetRoute()[0].GetDestination().GetSubset() != want {
			t.Errorf("port %d: route %v, want subset %s", port, r, want)
		}
	}
	only := &model.IstioConfig[*networking.VirtualService]{Spec: &networking.VirtualService{Tcp: []*networking.TCPRoute{
		{Match: []*networking.L4MatchAttributes{{Port: 9000}}, Route: dst("a")},
	}}}
	if r := tcpRouteFor(only, 31400); r != nil {
		t.Errorf("a port no route matches got %v; want the service's own cluster", r)
	}
	if tcpRouteFor(nil, 9000) != nil {
		t.Error("no VirtualService: want no route")
	}
}
