package xds

import (
	"fmt"
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networking "istio.io/api/networking/v1alpha3"
)

// A route's mirrors (a Gateway API route's RequestMirror filters) become request mirror
// policies after mirror's, each with its percentage in millionths (every request when
// unset; none at 0), as istiod's translateRoute.
func TestRouteMirrors(t *testing.T) {
	t.Parallel()
	dst := func(host string) *networking.Destination {
		return &networking.Destination{Host: host, Port: &networking.PortSelector{Number: 7070}}
	}
	b := vsRouteBuilder{
		vs:      vs("echo", &networking.VirtualService{}),
		cluster: func(d *networking.Destination) string { return "outbound|7070||" + d.GetHost() },
	}
	out := &route.Route{}
	b.routeAction(out, &networking.HTTPRoute{
		Route:  []*networking.HTTPRouteDestination{{Destination: dst("echo-v1")}},
		Mirror: dst("old"),
		Mirrors: []*networking.HTTPMirrorPolicy{
			{Destination: dst("echo-v2"), Percentage: &networking.Percent{Value: 100.0 / 3}},
			{Destination: dst("echo-v3")},
			{Destination: dst("never"), Percentage: &networking.Percent{Value: 0}},
		},
	}, "")
	var got []string
	for _, mp := range out.GetRoute().GetRequestMirrorPolicies() {
		f := mp.GetRuntimeFraction().GetDefaultValue()
		got = append(got, fmt.Sprintf("%s %s %d", mp.GetCluster(), f.GetDenominator(), f.GetNumerator()))
	}
	want := []string{"outbound|7070||old HUNDRED 100", "outbound|7070||echo-v2 MILLION 333333", "outbound|7070||echo-v3 HUNDRED 100"}
	if len(got) != len(want) {
		t.Fatalf("mirror policies %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mirror policy %d: %q, want %q", i, got[i], want[i])
		}
	}
}
