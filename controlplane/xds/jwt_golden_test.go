package xds

import (
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// goldenJWKS is a fixed public key set, so the golden files do not change per run.
const goldenJWKS = `{"keys":[{"kty":"EC","kid":"k1","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}`

func ra(ns, name string, spec *security.RequestAuthentication) *model.IstioConfig[*security.RequestAuthentication] {
	return &model.IstioConfig[*security.RequestAuthentication]{Name: name, Namespace: ns, Spec: spec}
}

// jwtCases are RequestAuthentication and the request-level AuthorizationPolicy fields,
// one golden file each (testdata/istio-<name>.golden).
var jwtCases = []struct {
	name, pod string
	mutate    func(*model.Model)
}{
	{"jwt-require-principal", "reviews-v1", func(m *model.Model) {
		m.Istio.RequestAuthentications = append(m.Istio.RequestAuthentications, ra("default", "jwt-example", &security.RequestAuthentication{
			Selector: selApp("reviews"),
			JwtRules: []*security.JWTRule{{
				Issuer: "testing@secure.istio.io", Jwks: goldenJWKS, Audiences: []string{"reviews"},
				FromHeaders: []*security.JWTHeader{{Name: "x-jwt-assertion", Prefix: "Bearer "}}, FromParams: []string{"token"},
				OutputPayloadToHeader: "x-jwt-payload", ForwardOriginalToken: true,
				OutputClaimToHeaders: []*security.ClaimToHeader{{Header: "x-jwt-group", Claim: "groups"}},
				// split on spaces as "scope" and "permission" always are (istiod's buildSpaceDelimitedClaims)
				SpaceDelimitedClaims: []string{"roles", "scope"},
			}},
		}))
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "require-jwt", &security.AuthorizationPolicy{
			Selector: selApp("reviews"),
			Rules: []*security.Rule{{
				From: []*security.Rule_From{{Source: &security.Source{RequestPrincipals: []string{"testing@secure.istio.io/testing@secure.istio.io"}}}},
				When: []*security.Condition{{Key: "request.auth.claims[groups]", Values: []string{"group1"}}},
			}},
		}))
	}},
	{"jwt-multi-issuer", "reviews-v1", func(m *model.Model) {
		m.Istio.JWKS = map[string]string{"http://jwks.default.svc.cluster.local:8000/jwks.json": goldenJWKS}
		m.Istio.RequestAuthentications = append(m.Istio.RequestAuthentications,
			ra("default", "b", &security.RequestAuthentication{JwtRules: []*security.JWTRule{
				{Issuer: "issuer-b", JwksUri: "http://jwks.default.svc.cluster.local:8000/jwks.json"},
			}}),
			ra("istio-system", "a", &security.RequestAuthentication{JwtRules: []*security.JWTRule{
				{Issuer: "issuer-a", JwksUri: "https://unreachable.example.com/jwks.json"},
			}}),
		)
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "claims", &security.AuthorizationPolicy{
			Action: security.AuthorizationPolicy_DENY,
			Rules: []*security.Rule{{
				From: []*security.Rule_From{{Source: &security.Source{NotRequestPrincipals: []string{"*", "issuer-a/*", "*/admin", "issuer-*"}}}},
				When: []*security.Condition{
					{Key: "request.auth.claims[nested][role]", Values: []string{"x", "y*"}},
					{Key: "request.auth.principal", NotValues: []string{"*@example.com"}},
					{Key: "request.auth.audiences", Values: []string{"app"}},
					{Key: "request.auth.presenter", Values: []string{"*"}},
				},
			}},
		}))
	}},
	{"authz-ipblocks", "db-v1", func(m *model.Model) {
		m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, ap("default", "ips", &security.AuthorizationPolicy{
			Rules: []*security.Rule{{
				From: []*security.Rule_From{{Source: &security.Source{
					IpBlocks: []string{"10.44.0.0/16", "10.45.0.7"}, NotIpBlocks: []string{"10.44.0.9"},
					RemoteIpBlocks: []string{"192.168.0.0/24"}, NotRemoteIpBlocks: []string{"192.168.0.1"},
				}}},
				When: []*security.Condition{{Key: "source.ip", NotValues: []string{"10.44.0.5"}}, {Key: "remote.ip", Values: []string{"10.0.0.0/8"}}},
			}},
		}), ap("default", "tcp-drops-jwt", &security.AuthorizationPolicy{
			// request principals are HTTP-only: the rule is dropped on the TCP chain.
			Rules: []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{RequestPrincipals: []string{"*"}}}}}},
		}))
	}},
}

func TestGenerateJWTGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range jwtCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := istioModel()
			tc.mutate(m)
			for _, pod := range m.Pods {
				if !pod.Sidecar.Inject {
					continue
				}
				res, err := Generate(m, pod)
				if err != nil {
					t.Fatalf("Generate(%s): %v", pod.Name, err)
				}
				for typ, rs := range res {
					for _, r := range rs {
						validateDeep(t, pod.Name+":"+typ+"/"+cachev3.GetResourceName(r), r)
					}
				}
			}
			testutil.Golden(t, "istio-"+tc.name, dumpJSON(t, generate(t, m, tc.pod)))
		})
	}
}

// The JWT filter sits before the RBAC filters on every inbound HTTP chain of a selected
// pod (declared ports and the passthrough chain), on no TCP chain and on no pod the
// RequestAuthentication does not select; a jwksUri without fetched keys gets the
// fail-closed key set.
func TestJWTFilterPlacement(t *testing.T) {
	t.Parallel()
	m := istioModel()
	jwtCases[1].mutate(m)
	m.Istio.RequestAuthentications = append(m.Istio.RequestAuthentications, ra("default", "reviews-only", &security.RequestAuthentication{
		Selector: selApp("reviews"), JwtRules: []*security.JWTRule{{Issuer: "issuer-c", Jwks: goldenJWKS}},
	}))
	count := func(pod string) (http, jwtFirst int, body string) {
		res, err := Generate(m, m.Pod(pod))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range res[resource.ListenerType] {
			if cachev3.GetResourceName(l) != "virtualInbound" {
				continue
			}
			js := string(dumpJSON(t, map[resource.Type][]types.Resource{resource.ListenerType: {l}}))
			body = js
			http = strings.Count(js, "envoy.filters.network.http_connection_manager")
			jwtFirst = strings.Count(js, `"name": "envoy.filters.http.jwt_authn"`)
		}
		return
	}
	h, j, body := count("reviews-v1")
	if h == 0 || j != h {
		t.Errorf("reviews-v1: %d inbound HCMs, %d jwt_authn filters; want one per HCM", h, j)
	}
	if !strings.Contains(body, "issuer-c") || !strings.Contains(body, "issuer-a") || !strings.Contains(body, FailClosedJWKS[strings.Index(FailClosedJWKS, `"n":"`)+5:][:30]) {
		t.Errorf("reviews-v1: providers or fail-closed keys missing")
	}
	if strings.Index(body, "jwt_authn") > strings.Index(body, "envoy.filters.http.rbac") {
		t.Errorf("jwt_authn must come before rbac")
	}
	_, j, body = count("productpage-v1")
	if j == 0 || strings.Contains(body, "issuer-c") {
		t.Errorf("productpage-v1: mesh-wide rules only, got %d filters", j)
	}
}
