package ambient

import "github.com/meshlab/meshlab/controlplane/model"

// isAmbient reports whether p is in ambient mode, as istio-cni's enablement selector
// decides (model.DataplaneMode: the pod's istio.io/dataplane-mode label over its
// namespace's; a sidecar pod or a gateway never).
func isAmbient(m *model.Model, p *model.Pod) bool {
	return model.DataplaneMode(m, p) == model.DataplaneAmbient
}
