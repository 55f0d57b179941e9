package httpconn

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/jwtauthn"
)

// applyJWT runs one envoy.filters.http.jwt_authn: a refused request gets Envoy's local
// reply (401, or 403 for audiences) with jwt_verify_lib's status as the body, a
// www-authenticate header and response code details jwt_authn_access_denied{...}; an
// allowed one carries the verified payloads in its dynamic metadata for the RBAC
// filters after it, and, when a good token's provider clears the route cache (istiod's
// gateways and waypoints), has its route selected again with them and the claim headers. http.<stat_prefix>.jwt_authn.allowed/denied count the decisions.
func (rt *router) applyJWT(x *exchange, cfg *jwtauthn.Config) (int, bool) {
	res := cfg.Verify(x.r, time.Now())
	rt.st.jwtStats().Count(res)
	if res.OK() {
		if res.Metadata != nil {
			if x.meta == nil {
				x.meta = map[string]*structpb.Struct{}
			}
			x.meta[jwtauthn.FilterName] = res.Metadata
		}
		if res.ClearRouteCache {
			rt.selectRoute(x)
		}
		return 0, false
	}
	x.info.CodeDetails = res.ResponseDetail()
	x.w.Header().Set("Www-Authenticate", res.WWWAuthenticate)
	return rt.localReply(x, res.Code, string(res.Status)), true
}

// jwtStats returns the HCM's jwt_authn stats, made on first use as Envoy makes them with
// the filter.
func (s *hcmStats) jwtStats() *jwtauthn.Stats {
	if j := s.jwt.Load(); j != nil {
		return j
	}
	s.jwt.CompareAndSwap(nil, jwtauthn.NewStats(s.scope))
	return s.jwt.Load()
}
