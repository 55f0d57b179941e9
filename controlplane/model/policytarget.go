package model

import (
	typev1beta1 "istio.io/api/type/v1beta1"
)

// A policy with targetRefs (or the older single targetRef) is attached to what it
// names instead of selecting workloads by label, as istiod's WorkloadPolicyMatcher
// (pilot/pkg/model/policyattachment.go) decides:
//
//   - a proxy that is neither a Gateway API gateway nor a waypoint (a sidecar; ztunnel)
//     never takes a policy with targets, whatever they name;
//   - a Gateway target (gateway.networking.k8s.io) attaches to the pods of that Gateway
//     of the policy's namespace (a waypoint's, or a Gateway API gateway's);
//   - on a waypoint, a Service target attaches to the chains of that Service of the
//     policy's namespace, and a GatewayClass istio-waypoint target in the mesh root
//     namespace to every waypoint;
//   - a waypoint never takes a policy without targets (its selector, or none, is
//     ignored).

// PolicyTarget is a kind a policy's targetRefs may name.
type PolicyTarget int

// The kinds a policy target names; TargetOther is any other (refused by the loader).
const (
	TargetOther        PolicyTarget = iota
	TargetGateway                   // gateway.networking.k8s.io Gateway
	TargetGatewayClass              // gateway.networking.k8s.io GatewayClass
	TargetService                   // core Service
	TargetServiceEntry              // networking.istio.io ServiceEntry
)

// PolicyTargetKind returns the kind r names, by group (empty or "core" for the core
// group) and kind, as Istio's matchesGroupKind.
func PolicyTargetKind(r *typev1beta1.PolicyTargetReference) PolicyTarget {
	g := r.GetGroup()
	switch {
	case g == GatewayAPIGroup && r.GetKind() == "Gateway":
		return TargetGateway
	case g == GatewayAPIGroup && r.GetKind() == "GatewayClass":
		return TargetGatewayClass
	case (g == "" || g == "core") && r.GetKind() == "Service":
		return TargetService
	case g == "networking.istio.io" && r.GetKind() == "ServiceEntry":
		return TargetServiceEntry
	}
	return TargetOther
}

// GatewayAPIGroup is the Gateway API's group.
const GatewayAPIGroup = "gateway.networking.k8s.io"

// Targetable is a policy that may name targets instead of a selector (istio.io/api's
// AuthorizationPolicy, RequestAuthentication, Telemetry...).
type Targetable interface {
	GetTargetRef() *typev1beta1.PolicyTargetReference
	GetTargetRefs() []*typev1beta1.PolicyTargetReference
}

// PolicyTargets returns p's targetRefs, or its targetRef when it has no targetRefs.
func PolicyTargets(p Targetable) []*typev1beta1.PolicyTargetReference {
	if refs := p.GetTargetRefs(); len(refs) > 0 {
		return refs
	}
	if r := p.GetTargetRef(); r != nil {
		return []*typev1beta1.PolicyTargetReference{r}
	}
	return nil
}

// HasTargets reports whether p names targets (and so selects no workload by label).
func HasTargets(p Targetable) bool { return len(PolicyTargets(p)) > 0 }

// TargetsGateway reports whether policy p of namespace ns names Gateway ns/gateway.
func TargetsGateway(p Targetable, ns, gateway string) bool {
	for _, r := range PolicyTargets(p) {
		if PolicyTargetKind(r) == TargetGateway && r.GetName() == gateway && (r.GetNamespace() == "" || r.GetNamespace() == ns) {
			return true
		}
	}
	return false
}

// AttachesToWaypoint reports whether policy p of namespace ns applies in waypoint w's
// chains of service svc (nil: the waypoint as a whole, e.g. a chain of no service):
// a target naming w's Gateway (in w's namespace), svc (in svc's namespace: a Service,
// or the ServiceEntry of svc's host), or the class istio-waypoint from root, the mesh
// root namespace.
func AttachesToWaypoint(p Targetable, ns, root string, w *Waypoint, svc *Service) bool {
	for _, r := range PolicyTargets(p) {
		switch PolicyTargetKind(r) {
		case TargetService:
			if svc != nil && svc.Host == "" && r.GetName() == svc.Name && ns == svc.Namespace {
				return true
			}
		case TargetServiceEntry:
			// svc is the waypoint's service of one of the ServiceEntry's hosts.
			if svc != nil && svc.Host != "" && r.GetName() == svc.Name && ns == svc.Namespace {
				return true
			}
		case TargetGatewayClass:
			if ns == root && r.GetName() == WaypointGatewayClass {
				return true
			}
		case TargetGateway:
			if ns == w.Namespace && r.GetName() == w.Name && (r.GetNamespace() == "" || r.GetNamespace() == ns) {
				return true
			}
		}
	}
	return false
}

// TargetRefs is a Targetable of targetRefs alone, for the kinds that have no older
// single targetRef (TrafficExtension).
type TargetRefs []*typev1beta1.PolicyTargetReference

// GetTargetRef is nil: the kind has no targetRef field.
func (TargetRefs) GetTargetRef() *typev1beta1.PolicyTargetReference { return nil }

// GetTargetRefs returns the references.
func (t TargetRefs) GetTargetRefs() []*typev1beta1.PolicyTargetReference { return t }
