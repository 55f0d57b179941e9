// Package waypoint is what Istio's deployment controller does for a waypoint once its
// objects exist, through a narrow Deps: whether the waypoint is ready (its Deployment
// has a ready pod) and the Gateway status the controller then writes (addresses,
// Accepted, Programmed), which `get gateway`, `wait --for=condition=programmed` and
// `waypoint apply --wait|status` read. The waypoint's Service and pod themselves are
// made with the model (controlplane/config/waypoint.go) and started as gateway pods are
// (a Router pod, node type waypoint).
package waypoint

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Deps is what the package needs of a lab: its model and which pods are ready.
type Deps struct {
	Model *model.Model
	// PodReady reports whether a pod is ready (its proxy answers /healthz/ready).
	PodReady func(*model.Pod) bool
}

// Ready reports whether waypoint w has a ready pod: what makes Istio's deployment
// controller write its status addresses and istiod count it.
func (d Deps) Ready(w *model.Waypoint) bool {
	for _, p := range d.Model.WaypointPods(w) {
		if d.PodReady != nil && d.PodReady(p) {
			return true
		}
	}
	return false
}

// Status returns the Gateway status of waypoint w as Istio writes it: Accepted; once a
// pod is ready, the addresses of its Service (the VIP, then the hostname: the
// istio-waypoint class reports both) and Programmed with the Service's host and port,
// before that Programmed False.
func (d Deps) Status(w *model.Waypoint) gwv1.GatewayStatus {
	var st gwv1.GatewayStatus
	svc := d.Model.WaypointService(w)
	programmed := metav1.Condition{
		Type: string(gwv1.GatewayConditionProgrammed), Status: metav1.ConditionFalse, ObservedGeneration: 1,
		Reason:  string(gwv1.GatewayReasonPending),
		Message: fmt.Sprintf("Waypoint %s has no ready pod yet", w.ResourceName()),
	}
	if svc != nil && d.Ready(w) {
		ip, host := gwv1.IPAddressType, gwv1.HostnameAddressType
		if svc.VIP.IsValid() {
			st.Addresses = append(st.Addresses, gwv1.GatewayStatusAddress{Type: &ip, Value: svc.VIP.String()})
		}
		st.Addresses = append(st.Addresses, gwv1.GatewayStatusAddress{Type: &host, Value: w.Hostname()})
		programmed.Status, programmed.Reason = metav1.ConditionTrue, string(gwv1.GatewayReasonProgrammed)
		programmed.Message = fmt.Sprintf("Resource programmed, assigned to service(s) %s:%d", w.Hostname(), model.WaypointPort)
	}
	st.Conditions = []metav1.Condition{
		{Type: string(gwv1.GatewayConditionAccepted), Status: metav1.ConditionTrue, Reason: string(gwv1.GatewayReasonAccepted), Message: "Resource accepted", ObservedGeneration: 1},
		programmed,
	}
	return st
}
