package xds

import (
	"cmp"
	"fmt"
	"slices"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtauthn "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/emptypb"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Names of the JWT filter and of its payload in the dynamic metadata, as Istio's.
const (
	JWTFilterName     = "envoy.filters.http.jwt_authn"
	JWTPayloadKey     = "payload"
	jwtProviderPrefix = "origins-"
)

// FailClosedJWKS is the key set inlined for a jwksUri whose keys the control plane does
// not have, as istiod inlines a public-only key set when its fetch fails: a public RSA
// key whose private half was discarded when meshlab's authors generated it, so every
// token of that issuer fails ("Jwt verification fails") and none can be forged.
const FailClosedJWKS = `{"keys":[{"kty":"RSA","n":"r8BzBS6QqXIcDwSkJHfD8ZKWmRUoeRmkvU7k0ORkdo38sKdOpOg3gzYcvxMY-jJOFDg2DwwaAyrNXM6ObYokZw5ZqZIFIVeOy2dkfZvfa10zSN4JSP7MF6aIRtH7zmIWHU3DHB6Lh79MgutbETArwdr_xWqGOXYUkBE1iONzriSRLf4LphkG69xY6P5XIJivCjJARw1v1x9eAWMSXNEg-IKr8f8fXvvxWXPPsMP5dhC2jsDyq6M2LYYCA3rQg5_tY17CvuZ5_0198jhvm09zNsi4EaZvwIhiWYSvNW23bgnGCLaR9LzK6eNdKRKdmpxT-ngfvX2fSCtuilYdb3ndSQ","e":"AQAB"}]}`

// jwtRulesFor returns the JWT rules of every RequestAuthentication selecting pod (mesh,
// namespace and workload ones alike), sorted by issuer as istiod's policy applier does.
func jwtRulesFor(m *model.Model, pod *model.Pod) []*security.JWTRule {
	root := m.Mesh.Root()
	var rules []*security.JWTRule
	for _, ra := range m.Istio.RequestAuthentications {
		if ra == nil || ra.Spec == nil || !PolicySelects(ra.Namespace, ra.Spec.GetSelector(), root, pod) {
			continue
		}
		rules = append(rules, ra.Spec.GetJwtRules()...)
	}
	slices.SortStableFunc(rules, func(a, b *security.JWTRule) int { return cmp.Compare(a.GetIssuer(), b.GetIssuer()) })
	return rules
}

// jwtFilter returns the envoy.filters.http.jwt_authn filter of pod's inbound HTTP
// chains as istiod's convertToEnvoyJwtConfig builds it, nil when no RequestAuthentication
// selects the pod: one provider "origins-<i>" per rule, the keys inline (jwks, or the
// keys fetched for jwksUri in m.Istio.JWKS, else FailClosedJWKS), the payload in the
// dynamic metadata under "payload", and a requirement that lets a request without a
// token through but refuses an invalid one. Istio's istio_authn filter is gone from
// istiod's output: request principals are matched on the payload's iss and sub directly.
func jwtFilter(m *model.Model, pod *model.Pod) (*hcm.HttpFilter, error) {
	rules := jwtRulesFor(m, pod)
	if len(rules) == 0 {
		return nil, nil
	}
	providers := map[string]*jwtauthn.JwtProvider{}
	var inner, outer []*jwtauthn.JwtRequirement
	for i, r := range rules {
		p := &jwtauthn.JwtProvider{
			Issuer:               r.GetIssuer(),
			Audiences:            r.GetAudiences(),
			Forward:              r.GetForwardOriginalToken(),
			ForwardPayloadHeader: r.GetOutputPayloadToHeader(),
			PayloadInMetadata:    JWTPayloadKey,
			NormalizePayloadInMetadata: &jwtauthn.JwtProvider_NormalizePayload{
				SpaceDelimitedClaims: spaceDelimitedClaims(r.GetSpaceDelimitedClaims()),
			},
			FromParams: r.GetFromParams(),
			// A gateway or waypoint routes on the verified claims (a VirtualService's
			// "@request.auth.claims..." match): the route is selected again once the
			// payload is in the metadata, as istiod asks of every proxy that is not a
			// sidecar. A sidecar's route was selected before the filter ran.
			ClearRouteCache: pod.Router || pod.Waypoint,
		}
		for _, c := range r.GetOutputClaimToHeaders() {
			p.ClaimToHeaders = append(p.ClaimToHeaders, &jwtauthn.JwtClaimToHeader{HeaderName: c.GetHeader(), ClaimName: c.GetClaim()})
		}
		for _, h := range r.GetFromHeaders() {
			p.FromHeaders = append(p.FromHeaders, &jwtauthn.JwtHeader{Name: h.GetName(), ValuePrefix: h.GetPrefix()})
		}
		keys := r.GetJwks()
		if keys == "" {
			keys = m.Istio.JWKS[r.GetJwksUri()]
		}
		if keys == "" {
			keys = FailClosedJWKS
		}
		p.JwksSourceSpecifier = &jwtauthn.JwtProvider_LocalJwks{LocalJwks: &core.DataSource{Specifier: &core.DataSource_InlineString{InlineString: keys}}}
		name := fmt.Sprintf("%s%d", jwtProviderPrefix, i)
		providers[name] = p
		inner = append(inner, requiresAny(requireProvider(name), &jwtauthn.JwtRequirement{
			RequiresType: &jwtauthn.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}},
		}))
		outer = append(outer, requireProvider(name))
	}
	req := inner[0]
	if len(inner) > 1 {
		// OR{P1, P2, ..., AND{OR{P1, missing}, OR{P2, missing}, ...}}: a token, if
		// present, must be valid, and providers sharing a location still pass.
		req = requiresAny(append(outer, &jwtauthn.JwtRequirement{RequiresType: &jwtauthn.JwtRequirement_RequiresAll{
			RequiresAll: &jwtauthn.JwtRequirementAndList{Requirements: inner},
		}})...)
	}
	cfg, err := typed(&jwtauthn.JwtAuthentication{
		Rules: []*jwtauthn.RequirementRule{{
			Match:           &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			RequirementType: &jwtauthn.RequirementRule_Requires{Requires: req},
		}},
		Providers:           providers,
		BypassCorsPreflight: true,
	})
	if err != nil {
		return nil, fmt.Errorf("build jwt_authn: %w", err)
	}
	return &hcm.HttpFilter{Name: JWTFilterName, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}}, nil
}

func requireProvider(name string) *jwtauthn.JwtRequirement {
	return &jwtauthn.JwtRequirement{RequiresType: &jwtauthn.JwtRequirement_ProviderName{ProviderName: name}}
}

func requiresAny(rs ...*jwtauthn.JwtRequirement) *jwtauthn.JwtRequirement {
	return &jwtauthn.JwtRequirement{RequiresType: &jwtauthn.JwtRequirement_RequiresAny{
		RequiresAny: &jwtauthn.JwtRequirementOrList{Requirements: rs},
	}}
}

// spaceDelimitedClaims are the claims the JWT filter splits on spaces into lists (so an
// AuthorizationPolicy's request.auth.claims[...] matches one item), as istiod's
// buildSpaceDelimitedClaims: "permission" and "scope" always, with the rule's own
// spaceDelimitedClaims, sorted and without repeats.
func spaceDelimitedClaims(own []string) []string {
	out := append([]string{"permission", "scope"}, own...)
	slices.Sort(out)
	return slices.Compact(out)
}
