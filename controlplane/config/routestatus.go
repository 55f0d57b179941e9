package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// istioGatewayController is the controller name istiod writes in a route's parent status.
const istioGatewayController = "istio.io/gateway-controller"

// RouteStatus returns the status istiod's gateway controller writes on route o (an
// HTTPRoute, GRPCRoute or TCPRoute) among objs: per parent, Accepted (a Service parent,
// GAMMA, always, the loader having checked the Service exists; a Gateway parent when one
// of its listeners takes the route's kind from its namespace, else
// NotAllowedByListeners, or NoMatchingParent for a Gateway the lab lacks), ResolvedRefs
// (the loader refuses an unresolved backend) and ResolvedWaypoints (istiod reports it
// with ambient on).
func RouteStatus(objs []*Object, o *Object) gwv1.RouteStatus {
	var st gwv1.RouteStatus
	parents, _ := routeRefs(o)
	if parents == nil {
		return st
	}
	nsLabels := map[string]map[string]string{}
	gateways := map[string]*Object{}
	for _, x := range objs {
		if x.KubeNamespace != nil {
			nsLabels[x.Origin.Name] = x.KubeNamespace.Labels
		}
		if x.KubeGateway != nil {
			gateways[x.Origin.Namespace+"/"+x.Origin.Name] = x
		}
	}
	cond := func(typ, reason, msg string, ok bool) metav1.Condition {
		s := metav1.ConditionTrue
		if !ok {
			s = metav1.ConditionFalse
		}
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: 1}
	}
	for _, pr := range parents {
		accepted := cond(string(gwv1.RouteConditionAccepted), string(gwv1.RouteReasonAccepted), "Route was valid", true)
		if !isServiceParent(pr) {
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
				cond(string(gwv1.RouteConditionResolvedRefs), string(gwv1.RouteReasonResolvedRefs), "All references resolved", true),
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
