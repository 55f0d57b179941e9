package xds

import (
	"testing"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// The egress gateway task's VirtualService form: one VirtualService bound to "mesh" and a
// Gateway, whose http routes each match `gateways` and `port`. A sidecar gets only the
// routes matching "mesh" on its listener port; the gateway gets only those naming it on
// its server's port; a route whose port matches neither is nobody's.
func TestHTTPMatchGatewaysAndPort(t *testing.T) {
	t.Parallel()
	to := func(host string) []*networking.HTTPRouteDestination {
		return []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: host, Port: &networking.PortSelector{Number: 9080}}}}
	}
	match := func(gw string, port uint32) []*networking.HTTPMatchRequest {
		return []*networking.HTTPMatchRequest{{Gateways: []string{gw}, Port: port}}
	}
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("bookinfo-gateway", httpServer(80, "*"))},
		vs("split", &networking.VirtualService{
			Hosts: []string{"productpage.default.svc.cluster.local"}, Gateways: []string{"bookinfo-gateway", "mesh"},
			Http: []*networking.HTTPRoute{
				{Name: "mesh-other-port", Match: match("mesh", 9999), Route: to("db")},
				{Name: "mesh", Match: match("mesh", 9080), Route: to("reviews")},
				{Name: "gateway-other-port", Match: match("default/bookinfo-gateway", 443), Route: to("db")},
				{Name: "gateway", Match: match("bookinfo-gateway", 80), Route: to("productpage")},
			},
		}))
	routesOf := func(pod, domain string) []string {
		t.Helper()
		var out []string
		for _, r := range generateGateway(t, m, pod)[resource.RouteType] {
			for _, vh := range r.(*route.RouteConfiguration).GetVirtualHosts() {
				for _, d := range vh.GetDomains() {
					if d == domain {
						for _, rt := range vh.GetRoutes() {
							out = append(out, rt.GetName()+"->"+rt.GetRoute().GetCluster())
						}
					}
				}
			}
		}
		return out
	}
	if got := routesOf("reviews-v1", "productpage.default.svc.cluster.local"); len(got) != 1 || got[0] != "mesh->outbound|9080||reviews.default.svc.cluster.local" {
		t.Errorf("sidecar routes for productpage = %q, want only the mesh route on 9080", got)
	}
	if got := routesOf(ingressPod, "productpage.default.svc.cluster.local"); len(got) != 1 || got[0] != "gateway->outbound|9080||productpage.default.svc.cluster.local" {
		t.Errorf("gateway routes for productpage = %q, want only the gateway's route on 80", got)
	}
}
