package xds

import (
	rbacpb "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	security "istio.io/api/security/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// peerPrincipalState is the filter-state key connect_terminate saves the HBONE peer's
// identity under; a waypoint's RBAC reads the caller's identity there, as main_internal's
// connections carry no TLS of their own.
const peerPrincipalState = "io.istio.peer_principal"

// waypointAuthz is the RBAC config of waypoint w's chain of service svc (nil: a chain of
// no service): the ALLOW and DENY AuthorizationPolicies attached to it by their targets
// (model.AttachesToWaypoint; a policy without targets never applies in a waypoint), in
// model order, as istiod's authz builder for a waypoint service. The rules are those of
// a sidecar's chain (rbacPolicy), with each peer identity matched against the filter
// state instead of the connection's certificate (istiod's useFilterState).
func waypointAuthz(m *model.Model, w *model.Waypoint, svc *model.Service, forTCP bool) authz {
	if w == nil {
		return authz{}
	}
	root := m.Mesh.Root()
	out := policyAuthz(m, func(ap *model.IstioConfig[*security.AuthorizationPolicy]) bool {
		return model.AttachesToWaypoint(ap.Spec, ap.Namespace, root, w, svc)
	}, forTCP)
	for _, set := range append(out.allow.sets(), out.deny.sets()...) {
		for _, p := range set.GetPolicies() {
			for _, id := range p.GetPrincipals() {
				peerFromFilterState(id)
			}
		}
	}
	return out
}

// peerFromFilterState rewrites, in place, every authenticated-peer matcher under id into
// the same string match on the filter state's peer principal.
func peerFromFilterState(id *rbacpb.Principal) {
	switch v := id.GetIdentifier().(type) {
	case *rbacpb.Principal_Authenticated_:
		id.Identifier = &rbacpb.Principal_FilterState{FilterState: &matcher.FilterStateMatcher{
			Key:     peerPrincipalState,
			Matcher: &matcher.FilterStateMatcher_StringMatch{StringMatch: v.Authenticated.GetPrincipalName()},
		}}
	case *rbacpb.Principal_AndIds:
		for _, c := range v.AndIds.GetIds() {
			peerFromFilterState(c)
		}
	case *rbacpb.Principal_OrIds:
		for _, c := range v.OrIds.GetIds() {
			peerFromFilterState(c)
		}
	case *rbacpb.Principal_NotId:
		peerFromFilterState(v.NotId)
	}
}
