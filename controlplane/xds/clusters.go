package xds

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/meshlab/meshlab/controlplane/model"
)

// clusters returns the proxy's clusters: an EDS cluster per service port in the model,
// an inbound cluster per app port of the pod, and the three fixed clusters.
func clusters(m *model.Model, pod *model.Pod) []types.Resource {
	var out []types.Resource
	for _, sp := range outboundPorts(m) {
		out = append(out, outboundCluster(sp))
	}
	for _, ip := range inboundPorts(m, pod) {
		out = append(out, originalDstCluster(InboundClusterName(ip.target), true))
	}
	return append(out,
		originalDstCluster(PassthroughCluster, false),
		originalDstCluster(InboundPassthroughCluster, true),
		blackHoleCluster(),
	)
}

// outboundCluster balances over the service port's endpoints, which arrive over EDS under
// the cluster's own name.
func outboundCluster(sp servicePort) *cluster.Cluster {
	name := sp.clusterName()
	return &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: adsConfigSource(), ServiceName: name},
		ConnectTimeout:       connectTimeout,
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
		Metadata:             serviceMetadata(sp.svc),
	}
}

// originalDstCluster connects to the connection's original destination. Inbound ones
// bind to 127.0.0.6 so the capture rules do not redirect the delivery back to the proxy.
func originalDstCluster(name string, inbound bool) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_ORIGINAL_DST},
		ConnectTimeout:       connectTimeout,
		LbPolicy:             cluster.Cluster_CLUSTER_PROVIDED,
	}
	if inbound {
		c.UpstreamBindConfig = &core.BindConfig{SourceAddress: &core.SocketAddress{
			Protocol:      core.SocketAddress_TCP,
			Address:       InboundPassthroughSource.String(),
			PortSpecifier: &core.SocketAddress_PortValue{PortValue: 0},
		}}
	}
	return c
}

// blackHoleCluster has no endpoints, so whatever is sent to it fails.
func blackHoleCluster() *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 BlackHoleCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		ConnectTimeout:       connectTimeout,
		LoadAssignment:       &endpoint.ClusterLoadAssignment{ClusterName: BlackHoleCluster},
	}
}
