package xds

import (
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// MTLSMode is the effective PeerAuthentication mode of one pod's port.
type MTLSMode = security.PeerAuthentication_MutualTLS_Mode

// Effective mTLS modes (never UNSET).
const (
	MTLSPermissive = security.PeerAuthentication_MutualTLS_PERMISSIVE
	MTLSStrict     = security.PeerAuthentication_MutualTLS_STRICT
	MTLSDisable    = security.PeerAuthentication_MutualTLS_DISABLE
)

// EffectiveMTLSMode returns the PeerAuthentication mode that applies to inbound traffic
// on the pod's container port, as Istio resolves it: the port-level mode of the
// workload-selector policy, else that policy's mode, else the namespace policy's (no
// selector, the pod's namespace), else the mesh policy's (no selector, the root
// namespace), else PERMISSIVE. UNSET inherits from the next level. When several
// policies tie at one level the oldest wins; meshlab has no creation times, so the
// first by (namespace, name) wins, which is the model's order.
func EffectiveMTLSMode(m *model.Model, pod *model.Pod, port uint16) MTLSMode {
	var workload, namespace, mesh *security.PeerAuthentication
	root := m.Mesh.Root()
	for _, pa := range m.Istio.PeerAuthentications {
		if pa == nil || pa.Spec == nil {
			continue
		}
		sel := pa.Spec.GetSelector().GetMatchLabels()
		switch {
		case len(sel) > 0:
			if workload == nil && pa.Namespace == pod.Namespace && labelsMatch(sel, pod.Labels) {
				workload = pa.Spec
			}
		case pa.Namespace == pod.Namespace:
			if namespace == nil {
				namespace = pa.Spec
			}
		case pa.Namespace == root:
			if mesh == nil {
				mesh = pa.Spec
			}
		}
	}
	if workload != nil {
		if mode := workload.GetPortLevelMtls()[uint32(port)].GetMode(); mode != security.PeerAuthentication_MutualTLS_UNSET {
			return mode
		}
	}
	for _, pa := range []*security.PeerAuthentication{workload, namespace, mesh} {
		if mode := pa.GetMtls().GetMode(); mode != security.PeerAuthentication_MutualTLS_UNSET {
			return mode
		}
	}
	return MTLSPermissive
}

// PolicySelects reports whether a security policy (PeerAuthentication,
// AuthorizationPolicy, RequestAuthentication) of namespace ns with selector sel applies
// to pod: a selector picks pods of ns by labels, no selector every pod of ns, and no
// selector in the root namespace root every pod. The RBAC and JWT filters are built with
// it, and `describe service` lists the policies that apply with it.
func PolicySelects(ns string, sel *typev1beta1.WorkloadSelector, root string, pod *model.Pod) bool {
	if labels := sel.GetMatchLabels(); len(labels) > 0 {
		return ns == pod.Namespace && labelsMatch(labels, pod.Labels)
	}
	return ns == pod.Namespace || ns == root
}
