package httpconn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/protobuf/types/known/emptypb"
)

// claimMatcher is istiod's route match on a JWT claim (translateMetadataMatch): the
// claim at payload.<claim> equal to v, or a list holding v.
func claimMatcher(claim, v string) *matcherv3.MetadataMatcher {
	value := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: sm("exact", v, false)}}
	list := &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{
		MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: value}}}}
	return &matcherv3.MetadataMatcher{
		Filter: "envoy.filters.http.jwt_authn",
		Path: []*matcherv3.MetadataMatcher_PathSegment{
			{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "payload"}},
			{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: claim}},
		},
		Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{
			ValueMatchers: []*matcherv3.ValueMatcher{list, value}}}},
	}
}

// TestJWTClaimRoutesNeedTheRouteCacheCleared: routes matching a verified token's claims
// (dynamic_metadata on the JWT filter's payload, the jwt-route task's VirtualService)
// and the header claim_to_headers adds are selected when the provider clears the route
// cache, as istiod configures gateways: the route is selected again after the filter.
// Without clear_route_cache (a sidecar's) the route stays the one selected before the
// filter ran, as Envoy's: no claim route matches. A missing or claim-less token falls
// through to no route (404); an invalid one is refused (401) whatever the routes.
func TestJWTClaimRoutesNeedTheRouteCacheCleared(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k"))
	if err != nil {
		t.Fatal(err)
	}
	token := func(claims map[string]any) string {
		t.Helper()
		s, err := jwt.Signed(signer).Claims(map[string]any{"iss": "testing@secure.istio.io", "sub": "testing@secure.istio.io", "exp": 4685989700}).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	groups := token(map[string]any{"groups": []string{"group1", "group2"}})
	foo := token(map[string]any{"foo": "bar"})
	directTo := func(name string, m *routev3.RouteMatch) *routev3.Route {
		return &routev3.Route{Name: name, Match: m, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
			Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: name}}}}}
	}
	routes := []*routev3.Route{
		directTo("group1", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/headers"}, DynamicMetadata: []*matcherv3.MetadataMatcher{claimMatcher("groups", "group1")}}),
		directTo("claim-header", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr("x-jwt-claim-foo", sm("exact", "bar", false), false)}}),
	}
	for _, tc := range []struct {
		name       string
		clear      bool
		path, auth string
		code       int
		body       string
	}{
		{"groups token, cache cleared: the claim route", true, "/headers", groups, 200, "group1"},
		{"no token: no route", true, "/headers", "", 404, ""},
		{"a token without the claim: no route", true, "/headers", foo, 200, "claim-header"},
		{"claim_to_headers' header, cache cleared", true, "/other", foo, 200, "claim-header"},
		{"an invalid token is refused", true, "/headers", "some.invalid.token", 401, "Jwt header is an invalid JSON"},
		{"groups token, cache kept (a sidecar's): no route", false, "/headers", groups, 404, ""},
		{"claim header, cache kept: no route", false, "/other", foo, 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &jwtv3.JwtAuthentication{
				Providers: map[string]*jwtv3.JwtProvider{"origins-0": {
					Issuer: "testing@secure.istio.io", PayloadInMetadata: "payload", ClearRouteCache: tc.clear,
					ClaimToHeaders:      []*jwtv3.JwtClaimToHeader{{HeaderName: "x-jwt-claim-foo", ClaimName: "foo"}},
					JwksSourceSpecifier: &jwtv3.JwtProvider_LocalJwks{LocalJwks: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: string(jwks)}}},
				}},
				Rules: []*jwtv3.RequirementRule{{
					Match: prefix("/"),
					RequirementType: &jwtv3.RequirementRule_Requires{Requires: &jwtv3.JwtRequirement{RequiresType: &jwtv3.JwtRequirement_RequiresAny{
						RequiresAny: &jwtv3.JwtRequirementOrList{Requirements: []*jwtv3.JwtRequirement{
							{RequiresType: &jwtv3.JwtRequirement_ProviderName{ProviderName: "origins-0"}},
							{RequiresType: &jwtv3.JwtRequirement_AllowMissing{AllowMissing: &emptypb.Empty{}}},
						}},
					}}},
				}},
			}
			l := newLabHCM(t, func(h *hcmv3.HttpConnectionManager) {
				h.HttpFilters = append([]*hcmv3.HttpFilter{{Name: "envoy.filters.http.jwt_authn",
					ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, cfg)}}}, h.HttpFilters...)
			}, nil, routes...)
			var hdrs []string
			if tc.auth != "" {
				hdrs = []string{"Authorization", "Bearer " + tc.auth}
			}
			resp, body := l.get(t, tc.path, hdrs...)
			if resp.StatusCode != tc.code || body != tc.body {
				t.Errorf("GET %s: %d %q, want %d %q", tc.path, resp.StatusCode, body, tc.code, tc.body)
			}
			if tc.code == http.StatusUnauthorized && resp.Header.Get("Www-Authenticate") == "" {
				t.Error("401 without www-authenticate")
			}
		})
	}
}
