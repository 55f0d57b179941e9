package xds

import (
	"sort"

	"github.com/meshlab/meshlab/controlplane/model"
)

// servicePort is one port of one service, the unit outbound config is generated for.
type servicePort struct {
	svc  *model.Service
	port model.ServicePort
}

// clusterName returns the port's outbound cluster (no subset).
func (sp servicePort) clusterName() string {
	return OutboundClusterName(sp.port.Port, "", sp.svc.Hostname())
}

// outboundPorts returns every port of every service of m, in model order: Istio's default
// sidecar scope makes every service visible to every proxy.
func outboundPorts(m *model.Model) []servicePort {
	var out []servicePort
	for _, s := range m.Services {
		for _, p := range s.Ports {
			out = append(out, servicePort{svc: s, port: p})
		}
	}
	return out
}

// httpPorts returns the distinct port numbers of HTTP service ports, ascending.
func httpPorts(m *model.Model) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, sp := range outboundPorts(m) {
		if sp.port.Protocol.IsHTTP() && !seen[sp.port.Port] {
			seen[sp.port.Port] = true
			out = append(out, sp.port.Port)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// inboundPort is one port the pod's app serves for the services that select it.
type inboundPort struct {
	target   uint16
	protocol model.Protocol
}

// inboundPorts returns the distinct target ports of the services selecting pod,
// ascending. When two services use one target port with different protocols, the first
// service in model order decides, so the result stays deterministic.
func inboundPorts(m *model.Model, pod *model.Pod) []inboundPort {
	seen := map[uint16]bool{}
	var out []inboundPort
	for _, s := range m.ServicesFor(pod) {
		for _, p := range s.Ports {
			if !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				out = append(out, inboundPort{target: p.TargetPort, protocol: p.Protocol})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].target < out[j].target })
	return out
}
