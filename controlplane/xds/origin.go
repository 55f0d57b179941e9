package xds

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// MeshConfigPath returns the API path of the mesh configuration, which meshlab records
// as the origin of the listeners every proxy gets whatever the services are
// (virtualOutbound, virtualInbound, the per-port outbound HTTP listeners): Istio reads
// that configuration from the ConfigMap "istio" in the root namespace.
func MeshConfigPath(root string) string {
	return "/api/v1/namespaces/" + root + "/configmaps/istio"
}

// meshOrigin is the metadata of a listener generated from the mesh configuration.
func meshOrigin(m *model.Model) *core.Metadata {
	return configMetadata(MeshConfigPath(m.Mesh.Root()), "")
}

// inboundOrigin is the metadata of the inbound chains of target port: the first service
// (in model order) selecting pod with that target port, the one inboundPorts let decide.
func inboundOrigin(m *model.Model, pod *model.Pod, target uint16) *core.Metadata {
	for _, s := range m.ServicesFor(pod) {
		for _, p := range s.Ports {
			if p.TargetPort == target {
				return configMetadata(ServiceConfigPath(s), "")
			}
		}
	}
	return nil
}

// tcpOrigin is the metadata of the outbound TCP listener of a service port: its
// VirtualService when a tcp route shapes it, else the service (or ServiceEntry).
func tcpOrigin(m *model.Model, sp servicePort) *core.Metadata {
	if vs := virtualServiceFor(m, sp.host); tcpRouteFor(vs, sp.port.Port) != nil {
		return configMetadata(IstioConfigPath("virtual-service", vs.Namespace, vs.Name), "")
	}
	return configMetadata(sp.configPath(), "")
}
