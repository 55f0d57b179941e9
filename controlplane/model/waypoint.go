package model

import (
	"fmt"
	"slices"
)

// Waypoints, as Istio declares and attaches them. A waypoint is a Gateway API Gateway of
// class istio-waypoint; Istio's deployment controller gives it a Deployment, a Service
// and a ServiceAccount all named after it, and istiod counts it once its status has
// addresses (its pod is ready). Services, ServiceEntries, pods and whole namespaces
// choose one with the istio.io/use-waypoint label.
const (
	WaypointGatewayClass = "istio-waypoint"
	// WaypointController is the controller of the istio-waypoint GatewayClass.
	WaypointController = "istio.io/mesh-controller"
	// LabelWaypointFor says which traffic a waypoint takes (on the Gateway, or on its
	// GatewayClass): service (the default), workload, all or none.
	LabelWaypointFor = "istio.io/waypoint-for"
	// LabelUseWaypoint names the waypoint of a namespace, Service, ServiceEntry or pod;
	// WaypointNone opts the object out of its namespace's.
	LabelUseWaypoint = "istio.io/use-waypoint"
	// LabelUseWaypointNamespace is the namespace of the waypoint LabelUseWaypoint names
	// (default: the labelled object's own).
	LabelUseWaypointNamespace = "istio.io/use-waypoint-namespace"
	WaypointNone              = "none"
	// LabelGatewayManaged marks what the deployment controller made for a waypoint with
	// ManagedByMeshController (istiod never gives such a Service a waypoint).
	LabelGatewayManaged     = "gateway.istio.io/managed"
	ManagedByMeshController = "istio.io-mesh-controller"
	// LabelGatewayClassName is the class label of a deployment controller's objects.
	LabelGatewayClassName = "gateway.networking.k8s.io/gateway-class-name"
	// WaypointListener and WaypointPort are the HBONE listener every waypoint has
	// (istioctl waypoint generate's), the port clients' ztunnels tunnel to.
	WaypointListener = "mesh"
	WaypointPort     = 15008
	// DefaultWaypointName is istioctl's waypoint name when --name is not given.
	DefaultWaypointName = "waypoint"
)

// Traffic types a waypoint takes (istio.io/waypoint-for).
const (
	WaypointForService  = "service"
	WaypointForWorkload = "workload"
	WaypointForAll      = "all"
	WaypointForNone     = "none"
)

// WaypointForValues are the values of istio.io/waypoint-for, sorted.
var WaypointForValues = []string{WaypointForAll, WaypointForNone, WaypointForService, WaypointForWorkload}

// Waypoint is one Gateway of class istio-waypoint. Its Service and pods are in the model
// (Services, Pods) as the deployment controller makes them: a Service Name in Namespace,
// pods labelled GatewayAPINameLabel=Name with Pod.Waypoint set.
type Waypoint struct {
	Name, Namespace string
	// Labels are the Gateway's labels (istio.io/waypoint-for, istio.io/rev).
	Labels map[string]string
	// For is the traffic it takes: the Gateway's istio.io/waypoint-for label, else its
	// GatewayClass's, else service.
	For string
	// From says which namespaces may attach to it, as its HBONE listener's
	// allowedRoutes.namespaces: "Same" (the default), "All" or "Selector" with
	// FromSelector's matchLabels.
	From         string
	FromSelector map[string]string
	Origin       Origin
}

// Hostname returns the FQDN of the waypoint's Service, the address Istio writes in its
// Gateway's status and istiod in every WDS GatewayAddress that names it.
func (w *Waypoint) Hostname() string {
	return w.Name + "." + w.Namespace + ".svc." + DefaultClusterDomain
}

// ResourceName returns "<namespace>/<name>", as istiod names a waypoint.
func (w *Waypoint) ResourceName() string { return w.Namespace + "/" + w.Name }

// takes reports whether the waypoint takes traffic of type t (service or workload).
func (w *Waypoint) takes(t string) bool { return w.For == t || w.For == WaypointForAll }

// allowsFrom reports whether an object of namespace ns may attach to the waypoint.
func (w *Waypoint) allowsFrom(m *Model, ns string) bool {
	switch w.From {
	case "All":
		return true
	case "Selector":
		labels := map[string]string{"kubernetes.io/metadata.name": ns}
		if n := m.Namespace(ns); n != nil {
			for k, v := range n.Labels {
				labels[k] = v
			}
		}
		return len(w.FromSelector) > 0 && labelsSelect(w.FromSelector, labels)
	}
	return ns == w.Namespace
}

// Waypoint returns the waypoint namespace/name, or nil.
func (m *Model) Waypoint(namespace, name string) *Waypoint {
	i := slices.IndexFunc(m.Waypoints, func(w *Waypoint) bool { return w.Namespace == namespace && w.Name == name })
	if i < 0 {
		return nil
	}
	return m.Waypoints[i]
}

// WaypointService returns the waypoint's Service, or nil.
func (m *Model) WaypointService(w *Waypoint) *Service {
	for _, s := range m.Services {
		if s.Namespace == w.Namespace && s.Name == w.Name {
			return s
		}
	}
	return nil
}

// WaypointPods returns the waypoint's pods (its Deployment's), in model order.
func (m *Model) WaypointPods(w *Waypoint) []*Pod {
	var out []*Pod
	for _, p := range m.Pods {
		if p.Waypoint && p.Namespace == w.Namespace && p.Labels[GatewayAPINameLabel] == w.Name {
			out = append(out, p)
		}
	}
	return out
}

// WaypointOfPod returns the waypoint pod p is an instance of, or nil.
func (m *Model) WaypointOfPod(p *Pod) *Waypoint {
	if !p.Waypoint {
		return nil
	}
	return m.Waypoint(p.Namespace, p.Labels[GatewayAPINameLabel])
}

// WaypointBinding is what an object's istio.io/use-waypoint resolves to: its waypoint,
// or none, and why none when a label asked for one (istiod's binding status message).
type WaypointBinding struct {
	Waypoint *Waypoint
	// Problem is set when the object or its namespace names a waypoint it does not get:
	// not a waypoint (or not yet ready), attachment not allowed, wrong traffic type.
	Problem string
	// Reason is istiod's reason for Problem in the istio.io/WaypointBound condition it
	// writes (its ambient status.go): WaypointIsNotReady, AttachmentDenied or
	// UnsupportedTrafficType; Name the waypoint named, "<namespace>/<name>".
	Reason, Name string
}

// useWaypoint reads istio.io/use-waypoint(-namespace) from labels: the waypoint named
// (namespace defaulting to ns), or none=true for the opt-out value.
func useWaypoint(labels map[string]string, ns string) (wpNS, wpName string, named, none bool) {
	v, ok := labels[LabelUseWaypoint]
	if !ok {
		return "", "", false, false
	}
	if v == WaypointNone {
		return "", "", false, true
	}
	wpNS = ns
	if o, ok := labels[LabelUseWaypointNamespace]; ok {
		wpNS = o
	}
	return wpNS, v, true, false
}

// waypointForTarget resolves the waypoint of an object of namespace ns with the given
// labels as istiod's fetchWaypointForTarget: the object's own label first ("none" opts
// out, a name is final even when that waypoint is missing), else its namespace's label;
// ready filters the waypoints that count (nil: all). inherited reports that the binding
// came from the namespace.
func (m *Model) waypointForTarget(ns string, labels map[string]string, ready func(*Waypoint) bool) (b WaypointBinding, inherited bool) {
	wpNS, name, named, none := useWaypoint(labels, ns)
	if none {
		return WaypointBinding{}, false
	}
	if !named {
		n := m.Namespace(ns)
		if n == nil {
			return WaypointBinding{}, false
		}
		if wpNS, name, named, _ = useWaypoint(n.Labels, ns); !named {
			return WaypointBinding{}, false
		}
		inherited = true
	}
	w := m.Waypoint(wpNS, name)
	if w == nil || (ready != nil && !ready(w)) {
		return WaypointBinding{Problem: fmt.Sprintf("waypoint %s/%s is not ready (no such waypoint, or its pod is not ready yet)", wpNS, name), Reason: "WaypointIsNotReady", Name: wpNS + "/" + name}, inherited
	}
	if !w.allowsFrom(m, ns) {
		return WaypointBinding{Problem: fmt.Sprintf("waypoint %s does not allow attachment from namespace %s (its %s listener's allowedRoutes)", w.ResourceName(), ns, WaypointListener), Reason: "AttachmentDenied", Name: w.ResourceName()}, inherited
	}
	return WaypointBinding{Waypoint: w}, inherited
}

// WaypointOfService returns the waypoint of a Service (or of a ServiceEntry, with its
// namespace and labels) as istiod's fetchWaypointForService: none for a Service the
// deployment controller made for a waypoint; the binding of waypointForTarget when the
// waypoint takes service traffic (waypoint-for service or all), else a problem.
func (m *Model) WaypointOfService(ns string, labels map[string]string, ready func(*Waypoint) bool) WaypointBinding {
	if labels[LabelGatewayManaged] == ManagedByMeshController {
		return WaypointBinding{}
	}
	b, _ := m.waypointForTarget(ns, labels, ready)
	if b.Waypoint != nil && !b.Waypoint.takes(WaypointForService) {
		return WaypointBinding{Problem: fmt.Sprintf("waypoint %s does not take service traffic (%s: %s)", b.Waypoint.ResourceName(), LabelWaypointFor, b.Waypoint.For), Reason: "UnsupportedTrafficType", Name: b.Waypoint.ResourceName()}
	}
	return b
}

// WaypointOfWorkload returns the waypoint of pod p as istiod's computeWaypoint: none for
// a waypoint's own pod; the binding of waypointForTarget when the waypoint takes
// workload traffic (waypoint-for workload or all); a service-only waypoint the pod
// inherits from its namespace is no waypoint and no problem, one the pod names itself
// is a problem.
func (m *Model) WaypointOfWorkload(p *Pod, ready func(*Waypoint) bool) WaypointBinding {
	if m.WaypointOfPod(p) != nil {
		return WaypointBinding{}
	}
	b, inherited := m.waypointForTarget(p.Namespace, p.Labels, ready)
	if b.Waypoint != nil && !b.Waypoint.takes(WaypointForWorkload) {
		if inherited {
			return WaypointBinding{}
		}
		return WaypointBinding{Problem: fmt.Sprintf("waypoint %s does not take workload traffic (%s: %s)", b.Waypoint.ResourceName(), LabelWaypointFor, b.Waypoint.For)}
	}
	return b
}
