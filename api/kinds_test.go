package api

import "testing"

// TestLookupGrouped: kubectl's RESOURCE.GROUP and RESOURCE.VERSION.GROUP find the kind of
// that group, as kubectl resolves them against discovery; another group's finds none.
func TestLookupGrouped(t *testing.T) {
	ks := Kinds{
		{Kind: "AuthorizationPolicy", Group: "security.istio.io", Names: []string{"authorizationpolicy", "authorizationpolicies", "ap"}},
		{Kind: "Deployment", Group: "apps", Names: []string{"deployment", "deployments", "deploy"}},
		{Kind: "Gateway", Group: "networking.istio.io", Names: []string{"gw"}},
		{Kind: GatewayAPIGatewayKind, Group: "gateway.networking.k8s.io", Names: []string{"gateway", "gateways"}},
	}
	for in, want := range map[string]string{
		"authorizationpolicy.security.istio.io":      "AuthorizationPolicy",
		"AuthorizationPolicies.v1.security.istio.io": "AuthorizationPolicy",
		"deployments.apps":                           "Deployment",
		"gateway.networking.istio.io":                "Gateway",
		"gateways.gateway.networking.k8s.io":         GatewayAPIGatewayKind,
		"gateway":                                    GatewayAPIGatewayKind,
		"authorizationpolicy.apps":                   "",
		"ap.bogus":                                   "",
	} {
		k, ok := ks.Lookup(in)
		if k.Kind != want || ok != (want != "") {
			t.Errorf("Lookup(%q) = %q, %v; want %q", in, k.Kind, ok, want)
		}
	}
}
