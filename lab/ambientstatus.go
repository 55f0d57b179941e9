package lab

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// istiod's ambient status (AMBIENT_ENABLE_STATUS, on by default): on every Service
// bound to a waypoint by istio.io/use-waypoint (its own label or its namespace's), or
// naming one it cannot bind to, istiod writes the condition istio.io/WaypointBound
// (pilot/pkg/model/service.go's ServiceInfo.GetConditions, the reasons of its ambient
// status.go): True, WaypointAccepted, "Successfully attached to waypoint NS/NAME" and
// what the istio.io/ingress-use-waypoint label makes of ingress traffic; or False with
// the reason it was not bound. A Service naming no waypoint has none.

// Condition types and reasons as istiod writes them.
const (
	conditionWaypointBound  = "istio.io/WaypointBound"
	reasonWaypointAccepted  = "WaypointAccepted"
	labelIngressUseWaypoint = "istio.io/ingress-use-waypoint"
)

// waypointBoundCondition returns the istio.io/WaypointBound condition istiod writes on
// Service s of m, false when it writes none. Its lastTransitionTime is the caller's.
func waypointBoundCondition(m *model.Model, s *model.Service) (metav1.Condition, bool) {
	b := m.WaypointOfService(s.Namespace, s.Labels, nil)
	switch {
	case b.Waypoint != nil:
		msg := "Successfully attached to waypoint " + b.Waypoint.ResourceName()
		v, present := s.Labels[labelIngressUseWaypoint]
		if !present {
			if ns := m.Namespace(s.Namespace); ns != nil {
				v, present = ns.Labels[labelIngressUseWaypoint]
			}
		}
		switch {
		case present && v == "true":
			msg += ". Ingress traffic will traverse the waypoint"
		case present:
			msg += ". Ingress traffic is not using the waypoint, set the istio.io/ingress-use-waypoint label to true if desired."
		}
		return metav1.Condition{Type: conditionWaypointBound, Status: metav1.ConditionTrue, Reason: reasonWaypointAccepted, Message: msg}, true
	case b.Reason != "":
		return metav1.Condition{Type: conditionWaypointBound, Status: metav1.ConditionFalse, Reason: b.Reason, Message: waypointProblemMessage(b)}, true
	}
	return metav1.Condition{}, false
}

// waypointProblemMessage is istiod's message for a binding's problem (its ambient
// status.go's Report* functions).
func waypointProblemMessage(b model.WaypointBinding) string {
	switch b.Reason {
	case "WaypointIsNotReady":
		return fmt.Sprintf("waypoint %q is not ready", b.Name)
	case "AttachmentDenied":
		return fmt.Sprintf("we are not permitted to attach to waypoint %q (missing allowedRoutes?)", b.Name)
	case "UnsupportedTrafficType":
		return fmt.Sprintf("attempting to bind to traffic type %q which the waypoint %q does not support", model.WaypointForService, b.Name)
	}
	return b.Problem
}
