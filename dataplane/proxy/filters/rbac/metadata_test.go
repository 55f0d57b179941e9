package rbac

import (
	"net/netip"
	"testing"

	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

const jwtFilter = "envoy.filters.http.jwt_authn"

func claimMatcher(claims []string, v *matcherv3.ValueMatcher, invert bool) *rbacv3.Principal {
	path := []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "payload"}}}
	for _, c := range claims {
		path = append(path, &matcherv3.MetadataMatcher_PathSegment{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: c}})
	}
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: jwtFilter, Path: path, Value: v, Invert: invert}}} //nolint:staticcheck // the deprecated field Istio sends for claims
}

func strValue(m *matcherv3.StringMatcher) *matcherv3.ValueMatcher {
	return &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_StringMatch{StringMatch: m}}
}

// listOrString is Istio's claim matcher: a list holding a matching string, or the
// matching string itself.
func listOrString(m *matcherv3.StringMatcher) *matcherv3.ValueMatcher {
	return &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_OrMatch{OrMatch: &matcherv3.OrMatcher{ValueMatchers: []*matcherv3.ValueMatcher{
		{MatchPattern: &matcherv3.ValueMatcher_ListMatch{ListMatch: &matcherv3.ListMatcher{MatchPattern: &matcherv3.ListMatcher_OneOf{OneOf: strValue(m)}}}},
		strValue(m),
	}}}}
}

// The principals Istio's authz builder writes for requestPrincipals and
// request.auth.claims match the JWT filter's payload in the dynamic metadata.
func TestMetadataMatchersOnTheJWTPayload(t *testing.T) {
	t.Parallel()
	principal := &rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{
		claimMatcher([]string{"iss"}, strValue(exact("testing@secure.istio.io")), false),
		claimMatcher([]string{"sub"}, strValue(regex(".+")), false),
	}}}}
	group := claimMatcher([]string{"groups"}, listOrString(exact("group1")), false)
	nested := claimMatcher([]string{"nested", "key"}, listOrString(exact("v")), false)
	notAdmin := claimMatcher([]string{"role"}, strValue(exact("admin")), true)
	cfg, err := CompileHTTP(mustAny(t, &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW, Policies: map[string]*rbacv3.Policy{
		"principal": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{principal}},
		"group":     {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{group}},
		"nested":    {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{nested}},
		"not-admin": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{notAdmin}},
	}}}))
	if err != nil {
		t.Fatal(err)
	}
	payload := func(m map[string]any) map[string]*structpb.Struct {
		p, err := structpb.NewStruct(map[string]any{"payload": m})
		if err != nil {
			t.Fatal(err)
		}
		return map[string]*structpb.Struct{jwtFilter: p}
	}
	tests := []struct {
		name string
		meta map[string]*structpb.Struct
		want string // the deciding policy, "" denied
	}{
		{"request principal", payload(map[string]any{"iss": "testing@secure.istio.io", "sub": "x", "role": "admin"}), "principal"},
		{"group in a list", payload(map[string]any{"iss": "other", "groups": []any{"group2", "group1"}, "role": "admin"}), "group"},
		{"group as a string", payload(map[string]any{"groups": "group1", "role": "admin"}), "group"},
		{"nested claim", payload(map[string]any{"nested": map[string]any{"key": "v"}, "role": "admin"}), "nested"},
		{"inverted on a missing claim matches", payload(map[string]any{"iss": "other"}), "not-admin"},
		{"no metadata: only the inverted matcher", nil, "not-admin"},
		{"nothing matches", payload(map[string]any{"iss": "testing@secure.istio.io", "sub": "", "groups": []any{"group2"}, "role": "admin"}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &Input{Local: netip.MustParseAddrPort("10.0.0.2:80"), DynamicMetadata: tt.meta}
			ok, policy := cfg.Engine.Allowed(in)
			if policy != tt.want || ok != (tt.want != "") {
				t.Errorf("Allowed = %v, %q; want policy %q", ok, policy, tt.want)
			}
		})
	}
}
