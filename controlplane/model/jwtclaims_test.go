package model

import (
	"slices"
	"strings"
	"testing"
)

// RoutingClaims reads a header key as Istio's jwt.ToRoutingClaim.
func TestRoutingClaims(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want []string // nil: not a claim route
	}{
		{"@request.auth.claims.groups", []string{"groups"}},
		{"@request.auth.claims.name.givenName", []string{"name", "givenName"}},
		{"@request.auth.claims[group][id]", []string{"group", "id"}},
		{"@Request.Auth.Claims[foo.bar]", []string{"foo.bar"}},
		{"@request.auth.claims", nil},
		{"@request.auth.claims.", nil},
		{"@request.auth.claims[]", nil},
		{"@request.auth.claims[a", nil},
		{"@request.auth.claimsx", nil},
		{"x-user", nil},
	} {
		got, ok := RoutingClaims(tc.name)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("RoutingClaims(%q) = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

func FuzzRoutingClaims(f *testing.F) {
	for _, s := range []string{"@request.auth.claims.groups", "@request.auth.claims[a][b]", "@request.auth.claims", "x-user", "@REQUEST.AUTH.CLAIMS[x]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		claims, ok := RoutingClaims(name)
		if !ok {
			if claims != nil {
				t.Fatalf("%q: claims %q without a match", name, claims)
			}
			return
		}
		if len(claims) == 0 || !strings.HasPrefix(strings.ToLower(name), JWTClaimHeader) {
			t.Fatalf("%q: a match with claims %q", name, claims)
		}
	})
}
