package fidelity

import (
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	// Every extension type istiod sends, registered so its Anys decode.
	_ "istio.io/istio/pkg/config/xds"
)

// The four resource types a sidecar receives, by type URL, and their short names.
const (
	listenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	clusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	routeType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	endpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
)

// typeOrder is the order tables and lists print the types in.
var typeOrder = []string{listenerType, clusterType, routeType, endpointType}

var shortNames = map[string]string{listenerType: "LDS", clusterType: "CDS", routeType: "RDS", endpointType: "EDS"}

// resourceName returns the name of an xDS resource (a cluster load assignment's cluster
// name), or "" when it does not decode.
func resourceName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	return messageName(m)
}

func messageName(m proto.Message) string {
	switch r := m.(type) {
	case *listenerv3.Listener:
		return r.GetName()
	case *clusterv3.Cluster:
		return r.GetName()
	case *routev3.RouteConfiguration:
		return r.GetName()
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName()
	}
	return ""
}
