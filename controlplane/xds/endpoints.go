package xds

import (
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshlab/meshlab/controlplane/model"
)

// endpoints returns a load assignment for every outbound EDS cluster, including those of
// services with no pods: a cluster the proxy asks for must get an answer, even empty.
func endpoints(m *model.Model) []types.Resource {
	var out []types.Resource
	for _, sp := range outboundPorts(m) {
		out = append(out, loadAssignment(sp, m.Endpoints(sp.svc, sp.port)))
	}
	return out
}

// loadAssignment lists the pod addresses behind one service port, in model order, in a
// single locality.
func loadAssignment(sp servicePort, eps []model.Endpoint) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: sp.clusterName()}
	if len(eps) == 0 {
		return cla
	}
	lbs := make([]*endpoint.LbEndpoint, 0, len(eps))
	for _, ep := range eps {
		lbs = append(lbs, &endpoint.LbEndpoint{HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
			Address: socketAddress(ep.Addr.Addr().String(), ep.Addr.Port()),
		}}})
	}
	cla.Endpoints = []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}}
	return cla
}
