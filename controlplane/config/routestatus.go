package config

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// istioGatewayController is the controller name istiod writes in a route's parent status.
const istioGatewayController = "istio.io/gateway-controller"

// RouteStatus returns the status istiod's gateway controller writes on route o (an
// HTTPRoute, GRPCRoute or TCPRoute) among objs: per parent, Accepted (a Service parent,
// GAMMA, when the Service exists, else NoMatchingParent; a Gateway parent when one of
// its listeners takes the route's kind from its namespace, else NotAllowedByListeners,
// or NoMatchingParent for a Gateway the lab lacks), ResolvedRefs (False, BackendNotFound,
// while a backend names a Service the lab lacks: the last such backend, as istiod
// reports the last rule's error) and ResolvedWaypoints (istiod reports it with ambient
// on).
func RouteStatus(objs []*Object, o *Object) gwv1.RouteStatus {
	var st gwv1.RouteStatus
	parents, backends := routeRefs(o)
	if parents == nil {
		return st
	}
	nsLabels := map[string]map[string]string{}
	gateways := map[string]*Object{}
	services := map[string]bool{}
	for _, x := range objs {
		if x.KubeNamespace != nil {
			nsLabels[x.Origin.Name] = x.KubeNamespace.Labels
		}
		if x.KubeGateway != nil {
			gateways[x.Origin.Namespace+"/"+x.Origin.Name] = x
		}
		if x.Service != nil {
			services[x.Origin.Namespace+"/"+x.Origin.Name] = true
		}
	}
	cond := func(typ, reason, msg string, ok bool) metav1.Condition {
		s := metav1.ConditionTrue
		if !ok {
			s = metav1.ConditionFalse
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: 1}
	}
	resolved := cond(string(gwv1.RouteConditionResolvedRefs), string(gwv1.RouteReasonResolvedRefs), "All references resolved", true)
	for _, b := range backends {
		if ptrOr(b.ref.Weight, 1) == 0 || isHostnameBackend(b.ref) {
			continue // istiod skips a backend of weight 0; a Hostname is the registry's
		}
		if !services[o.Origin.Namespace+"/"+string(b.ref.Name)] {
			host := string(b.ref.Name) + "." + o.Origin.Namespace + ".svc." + model.DefaultClusterDomain
			resolved = cond(string(gwv1.RouteConditionResolvedRefs), string(gwv1.RouteReasonBackendNotFound), "backend("+host+") not found", false)
		}
	}
	for _, pr := range parents {
		accepted := cond(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonAccepted), "Route was valid", true)
		if isServiceParent(pr) && !services[parentNamespace(pr, o)+"/"+string(pr.Name)] {
			accepted = cond(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonNoMatchingParent), fmt.Sprintf("parent service: %q not found", pr.Name), false)
		}
		if !isServiceParent(pr) && !isServiceEntryParent(pr) {
			ns := o.Origin.Namespace
			if pr.Namespace != nil {
				ns = string(*pr.Namespace)
			}
			g := gateways[ns+"/"+string(pr.Name)]
			switch {
			case g == nil:
				accepted = cond(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonNoMatchingParent), "parent "+ns+"/"+string(pr.Name)+" not found", false)
			case !routeAdmitted(g, pr, ns, o.Origin.Namespace, routeKind(o), nsLabels):
				accepted = cond(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonNotAllowedByListeners), "no listener of "+ns+"/"+string(pr.Name)+" allows routes from namespace "+o.Origin.Namespace, false)
			}
		}
		st.Parents = append(st.Parents, gwv1.RouteParentStatus{
			ParentRef:      pr,
			ControllerName: istioGatewayController,
			Conditions: []metav1.Condition{
				accepted,
				resolved,
				cond("ResolvedWaypoints", "ResolvedWaypoints", "All waypoints resolved", true),
			},
		})
	}
	return st
}

// routeAdmitted reports whether a listener of Gateway g (of namespace gwNS) selected by
// pr takes routes of kind k from namespace ns.
func routeAdmitted(g *Object, pr gwv1.ParentReference, gwNS, ns, k string, nsLabels map[string]map[string]string) bool {
	for _, l := range g.KubeGateway.Spec.Listeners {
		if pr.SectionName != nil && *pr.SectionName != l.Name {
			continue
		}
		if admitsRoutesFrom(l, gwNS, ns, nsLabels) && admitsKind(l, k) {
			return true
		}
	}
	return false
}

// parentNamespace is the namespace of route o's parent pr: its own, else the route's.
func parentNamespace(pr gwv1.ParentReference, o *Object) string {
	if pr.Namespace != nil {
		return string(*pr.Namespace)
	}
	return o.Origin.Namespace
}
