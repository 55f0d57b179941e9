package model

import "slices"

// Namespace is a Kubernetes Namespace the scenario declares, with its metadata: its
// labels choose sidecar injection (istio-injection, istio.io/rev) and ambient enrollment
// (istio.io/dataplane-mode). A namespace that no object declares has no labels.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// Namespace returns the declared namespace of that name, or nil when the scenario
// declares none (its pods then see no namespace labels).
func (m *Model) Namespace(name string) *Namespace {
	i, ok := slices.BinarySearchFunc(m.Namespaces, name, func(n *Namespace, name string) int {
		switch {
		case n.Name < name:
			return -1
		case n.Name > name:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return m.Namespaces[i]
}

// Ambient enrollment, as Istio spells it. The label is read by istio-cni's node agent only
// (its default enablement selectors): a pod labelled ambient is enrolled whatever its
// namespace says; a pod of a namespace labelled ambient is enrolled unless the pod is
// labelled none. istiod never reads the label: it reads the annotation, which the node
// agent sets once the pod's traffic is redirected to ztunnel, and gives only such pods
// tunnel protocol HBONE.
const (
	LabelDataplaneMode           = "istio.io/dataplane-mode"
	DataplaneModeAmbient         = "ambient"
	DataplaneModeNone            = "none"
	AnnotationAmbientRedirection = "ambient.istio.io/redirection"
	AmbientRedirectionEnabled    = "enabled"
)

// AnnotationPodLabels, on a Deployment, ReplicaSet, StatefulSet or DaemonSet, holds the
// labels of those of its pods that were labelled one by one (`meshlab label pod`, as
// `kubectl label pod` changes a running pod and not its template): a JSON object from a
// pod's name to its whole label set. A pod it does not name has its template's labels.
const AnnotationPodLabels = "meshlab.dev/pod-labels"

// AnnotationExternalTrafficPolicy, on the lab's MeshConfig, holds the externalTrafficPolicy
// `kubectl patch` gave the gateways' LoadBalancer Services the lab makes (istioctl's,
// a Gateway's automated one), which have no object of their own to keep it: a JSON object
// from "namespace/name" to Cluster or Local. It is shown, not acted on: a lab's clients
// reach a gateway with their own source address, as Local keeps it in a cluster.
const AnnotationExternalTrafficPolicy = "meshlab.dev/external-traffic-policy"

// AnnotationDeletedPods, on a Deployment, ReplicaSet or DaemonSet, lists (JSON) the names
// of its pods deleted one by one (`kubectl delete pod`): Kubernetes' ReplicaSet makes a
// new pod, of a new name, for each, and so does the lab, naming each successor apart
// from the pods deleted before it.
const AnnotationDeletedPods = "meshlab.dev/deleted-pods"

// Dataplane is how a pod's traffic joins the mesh.
type Dataplane int

// Data-plane modes. DataplaneNone is the zero value: a pod outside the mesh, or a
// gateway or waypoint, whose proxy is the pod itself.
const (
	DataplaneNone Dataplane = iota
	DataplaneSidecar
	DataplaneAmbient
)

// String returns the mode as `meshlab get pods -o wide` shows it.
func (d Dataplane) String() string {
	switch d {
	case DataplaneSidecar:
		return "sidecar"
	case DataplaneAmbient:
		return "ambient"
	}
	return "none"
}

// DataplaneMode returns the data-plane mode of pod p of m: a pod with a sidecar is
// Sidecar, never captured a second time (istio-cni skips injected pods); a gateway is
// None; otherwise the pod's istio.io/dataplane-mode label (ambient or none) wins over its
// namespace's, as istio-cni's default enablement selectors decide. A label value other
// than ambient or none on the pod leaves the choice to the namespace (the selector on a
// namespaced pod is "not none"); `meshlab analyze` reports such a value.
func DataplaneMode(m *Model, p *Pod) Dataplane {
	switch {
	case p.Waypoint:
		return DataplaneNone // its proxy is the pod itself, labelled dataplane-mode none
	case p.Sidecar.Inject:
		return DataplaneSidecar
	case p.Router:
		return DataplaneNone
	}
	switch p.Labels[LabelDataplaneMode] {
	case DataplaneModeAmbient:
		return DataplaneAmbient
	case DataplaneModeNone:
		return DataplaneNone
	}
	if ns := m.Namespace(p.Namespace); ns != nil && ns.Labels[LabelDataplaneMode] == DataplaneModeAmbient {
		return DataplaneAmbient
	}
	return DataplaneNone
}

// AmbientRedirected reports whether the pod carries the node agent's redirection
// annotation (ambient.istio.io/redirection: enabled): what makes istiod give it tunnel
// protocol HBONE.
func (p *Pod) AmbientRedirected() bool {
	return p.Annotations[AnnotationAmbientRedirection] == AmbientRedirectionEnabled
}
