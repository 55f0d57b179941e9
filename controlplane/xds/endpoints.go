package xds

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// endpoints returns a load assignment for every outbound EDS cluster the proxy has,
// subsets included, even for services with no pods: a cluster the proxy asks for must
// get an answer, even empty. A subset's assignment holds the endpoints whose labels
// match the subset's.
func endpoints(m *model.Model, pod *model.Pod) []types.Resource {
	return hostEndpoints(m, pod, nil)
}

// hostEndpoints is endpoints, of the hosts in hosts only when hosts is not nil.
func hostEndpoints(m *model.Model, pod *model.Pod, hosts map[string]bool) []types.Resource {
	var out []types.Resource
	hbone := sendsHBONE(m) // hbone_send.go
	for _, sp := range outboundPorts(m) {
		if hosts != nil && !hosts[sp.host] {
			continue
		}
		if sp.dnsResolved() || sp.passthroughResolved() {
			continue // STRICT_DNS clusters carry their own load assignment, ORIGINAL_DST ones need none
		}
		all := sp.instances(m)
		for _, oc := range outboundClustersOf(m, pod, sp) {
			ins := subsetInstances(all, oc.labels)
			cla := loadAssignment(m, oc.name, ins)
			if hbone {
				tunnelEndpoints(cla, ins)
			}
			out = append(out, cla)
		}
	}
	return out
}

// loadAssignment lists the addresses behind one cluster, in order, in a single locality,
// each pod's endpoint with its metadata (see endpointMetadata). As istiod's endpoint
// builder, every endpoint says it is HEALTHY (a lab's pods are ready once the lab is up;
// Envoy's active health checking is not used in Istio) and weighs 1, and the locality
// weighs the sum of its endpoints' weights.
func loadAssignment(m *model.Model, name string, ins []instance) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	if len(ins) == 0 {
		return cla
	}
	lbs := make([]*endpoint.LbEndpoint, 0, len(ins))
	for _, in := range ins {
		lbs = append(lbs, &endpoint.LbEndpoint{
			HostIdentifier:      &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: socketAddress(in.addr, in.port)}},
			HealthStatus:        core.HealthStatus_HEALTHY,
			LoadBalancingWeight: wrapperspb.UInt32(1),
			Metadata:            endpointMetadata(m, in.pod, in.port),
		})
	}
	// A lab has no topology labels: one locality, empty as Istio writes it.
	cla.Endpoints = []*endpoint.LocalityLbEndpoints{{Locality: &core.Locality{}, LbEndpoints: lbs, LoadBalancingWeight: wrapperspb.UInt32(uint32(len(lbs)))}}
	return cla
}
