package xds

import (
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtauthn "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// The jwt-route task on the ingress gateway: RequestAuthentication ingress-jwt in
// istio-system selecting istio: ingressgateway, and a VirtualService whose /headers
// route matches "@request.auth.claims.groups" exact group1 (and, in the bracket form, a
// nested claim in any case of the prefix, beside request headers):
// the claims become dynamic metadata matchers on the JWT filter's payload, as istiod's
// translateMetadataMatch writes them, the route is no catch-all, and the gateway's JWT
// filter clears the route cache (a sidecar's does not).
func TestGatewayJWTClaimRoute(t *testing.T) {
	t.Parallel()
	exact := func(s string) *networking.StringMatch {
		return &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: s}}
	}
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("httpbin-gateway", httpServer(80, "*"))},
		vs("httpbin", &networking.VirtualService{
			Hosts: []string{"*"}, Gateways: []string{"httpbin-gateway"},
			Http: []*networking.HTTPRoute{{
				Match: []*networking.HTTPMatchRequest{
					{
						Uri:     &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/headers"}},
						Headers: map[string]*networking.StringMatch{"@request.auth.claims.groups": exact("group1")},
					},
					{Headers: map[string]*networking.StringMatch{
						"@Request.Auth.Claims[nested][role]": {MatchType: &networking.StringMatch_Prefix{Prefix: "adm"}},
						"x-user":                             exact("alice"),
						"@request.auth.claims":               exact("not-a-claim"),
					}},
				},
				Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{
					Host: "productpage.default.svc.cluster.local", Port: &networking.PortSelector{Number: 9080},
				}}},
			}},
		}))
	m.Istio.RequestAuthentications = append(m.Istio.RequestAuthentications, ra("istio-system", "ingress-jwt", &security.RequestAuthentication{
		Selector: &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"istio": "ingressgateway"}},
		JwtRules: []*security.JWTRule{{Issuer: "testing@secure.istio.io", Jwks: goldenJWKS}},
	}))
	res := generateGateway(t, m, ingressPod)
	testutil.Golden(t, "gateway-jwt-route", dumpJSON(t, res))

	rc := res[resource.RouteType][0].(*route.RouteConfiguration)
	routes := rc.GetVirtualHosts()[0].GetRoutes()
	if len(routes) != 2 {
		t.Fatalf("routes = %v", routes)
	}
	first, second := routes[0].GetMatch(), routes[1].GetMatch()
	if md := first.GetDynamicMetadata(); len(md) != 1 || md[0].GetFilter() != JWTFilterName ||
		len(md[0].GetPath()) != 2 || md[0].GetPath()[0].GetKey() != "payload" || md[0].GetPath()[1].GetKey() != "groups" || len(first.GetHeaders()) != 0 {
		t.Errorf("the groups route's match = %v, want a metadata matcher on payload.groups and no header", first)
	}
	if md := second.GetDynamicMetadata(); len(md) != 1 || len(md[0].GetPath()) != 3 || md[0].GetPath()[2].GetKey() != "role" {
		t.Errorf("the nested claim's match = %v", second)
	}
	if hs := second.GetHeaders(); len(hs) != 2 || hs[0].GetName() != "@request.auth.claims" || hs[1].GetName() != "x-user" {
		t.Errorf("headers = %v, want the bare prefix and x-user as request headers, as istiod", hs)
	}
	for _, r := range routes {
		if isCatchAll(r) {
			t.Errorf("route %v counted as catch-all", r.GetMatch())
		}
	}

	clearCache := func(pod string) bool {
		t.Helper()
		res, err := Generate(m, m.Pod(pod))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range res[resource.ListenerType] {
			for _, fc := range l.(*listener.Listener).GetFilterChains() {
				for _, f := range fc.GetFilters() {
					h := &hcm.HttpConnectionManager{}
					if f.GetTypedConfig().UnmarshalTo(h) != nil {
						continue
					}
					for _, hf := range h.GetHttpFilters() {
						j := &jwtauthn.JwtAuthentication{}
						if hf.GetName() == JWTFilterName && hf.GetTypedConfig().UnmarshalTo(j) == nil {
							return j.GetProviders()["origins-0"].GetClearRouteCache()
						}
					}
				}
			}
		}
		t.Fatalf("%s has no JWT filter", pod)
		return false
	}
	if !clearCache(ingressPod) {
		t.Error("the gateway's JWT provider does not clear the route cache")
	}
	m.Istio.RequestAuthentications = append(m.Istio.RequestAuthentications, ra("default", "reviews", &security.RequestAuthentication{
		Selector: selApp("reviews"), JwtRules: []*security.JWTRule{{Issuer: "testing@secure.istio.io", Jwks: goldenJWKS}},
	}))
	if clearCache("reviews-v1") {
		t.Error("a sidecar's JWT provider clears the route cache; istiod clears it on gateways and waypoints only")
	}
}
