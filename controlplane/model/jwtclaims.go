package model

import "strings"

// JWTClaimHeader is the reserved header name of a VirtualService match on a verified
// JWT's claims (Istio's jwt.HeaderJWTClaim).
const JWTClaimHeader = "@request.auth.claims"

// RoutingClaims parses a VirtualService headers (or withoutHeaders) key as Istio's
// jwt.ToRoutingClaim: "@request.auth.claims.<a>.<b>" or "@request.auth.claims[<a>][<b>]"
// (the prefix in any case) names the nested claims a, b; ok is false for any other key,
// the bare prefix included, which is then a request header's name.
func RoutingClaims(name string) (claims []string, ok bool) {
	if !strings.HasPrefix(strings.ToLower(name), JWTClaimHeader) {
		return nil, false
	}
	switch rest := name[len(JWTClaimHeader):]; {
	case strings.HasPrefix(rest, ".") && len(rest) > 1:
		return strings.Split(rest[1:], "."), true
	case strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]") && len(rest) > 2:
		return strings.Split(rest[1:len(rest)-1], "]["), true
	}
	return nil, false
}
