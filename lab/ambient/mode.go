package ambient

import "github.com/meshlab/meshlab/controlplane/model"

// isAmbient reports whether p is in ambient mode: model.DataplaneMode decides, as
// istio-cni's enablement selector does (the pod's istio.io/dataplane-mode label over its
// namespace's; a sidecar pod or a gateway never).
func isAmbient(m *model.Model, p *model.Pod) bool {
	if p.Sidecar.Inject || p.Router {
		return false
	}
	return p.Labels["istio.io/dataplane-mode"] == "ambient"
}
