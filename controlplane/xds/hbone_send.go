package xds

import (
	"fmt"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	internalupstream "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Sending HBONE from sidecars and gateways, as istiod does once ambient is on
// (PILOT_ENABLE_SENDING_HBONE, true by default with PILOT_ENABLE_AMBIENT): a destination
// pod that speaks HBONE (the node agent's redirection annotation, or a pod without a
// sidecar labelled networking.istio.io/tunnel: http) is reached by CONNECT over mutual
// TLS to its port 15008, where ztunnel takes it, rather than Istio mTLS or plaintext to
// the app's port, which ztunnel refuses under STRICT. istiod's shapes
// (pilot/pkg/xds/endpoints/endpoint_builder.go supportTunnel, core/cluster_tls.go
// hboneTransportSocket, buildConnectOriginate, buildConnectOriginateListener):
//
//   - the endpoint is the internal listener connect_originate with the pod's
//     "ip:port" as endpoint id, metadata original_dst {local: ip:port} (the address the
//     tunnel's :authority names) and transport socket match {tunnel: http};
//   - every outbound cluster of auto mTLS gets the transport socket match "hbone" first
//     (internal upstream, passing the host's original_dst and istio metadata and the
//     cluster's istio metadata to the internal connection);
//   - every sidecar and gateway has the connect_originate listener and cluster the
//     waypoint has (waypoint_listeners.go, waypoint_clusters.go).
//
// istiod turns this on for the whole mesh with ambient; meshlab turns it on for a lab
// that has an ambient pod (sendsHBONE), so that a lab without one keeps the sidecar
// output the fidelity's sidecar run (ambient off) holds it to.

// TunnelMatchKey and TunnelHTTP are the transport socket match of an HBONE endpoint.
const (
	TunnelMatchKey = "tunnel"
	TunnelHTTP     = "http"
	// HBONEMatch names the transport socket match of HBONE endpoints in a cluster.
	HBONEMatch = "hbone"
)

// sendsHBONE reports whether sidecars and gateways of m send HBONE to pods that speak
// it: m has a namespace or a pod in ambient mode, or a pod already redirected.
func sendsHBONE(m *model.Model) bool {
	for _, ns := range m.Namespaces {
		if ns.Labels[model.LabelDataplaneMode] == model.DataplaneModeAmbient {
			return true
		}
	}
	for _, p := range m.Pods {
		if p.Labels[model.LabelDataplaneMode] == model.DataplaneModeAmbient || p.AmbientRedirected() {
			return true
		}
	}
	return false
}

// tunnelsTo reports whether a sidecar or gateway reaches pod over HBONE (istiod's
// supportTunnel and its legacy-mTLS preference): the pod is redirected to ztunnel, or
// natively speaks HBONE and has no sidecar (one with a sidecar takes Istio mTLS, which
// istiod prefers unless PILOT_PREFER_SENDING_HBONE).
func tunnelsTo(pod *model.Pod) bool {
	if pod == nil || pod.Sidecar.Inject {
		return false
	}
	return pod.AmbientRedirected() || pod.Labels[tunnelLabel] == TunnelHTTP
}

// tunnelEndpoints turns the endpoints of cla that speak HBONE into connect_originate's
// (see above); ins are the instances cla was made of, in order. A nil cla is fine.
func tunnelEndpoints(cla *endpoint.ClusterLoadAssignment, ins []instance) {
	if cla == nil || len(cla.Endpoints) == 0 {
		return
	}
	lbs := cla.Endpoints[0].LbEndpoints
	for i, in := range ins {
		if i >= len(lbs) || !tunnelsTo(in.pod) {
			continue
		}
		target := in.addr + ":" + portString(in.port)
		ep := internalEndpoint(ConnectOriginateListener, target)
		lb := lbs[i]
		lb.HostIdentifier = ep.HostIdentifier
		if lb.Metadata == nil {
			lb.Metadata = &core.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
		}
		lb.Metadata.FilterMetadata["istio"] = &structpb.Struct{Fields: map[string]*structpb.Value{"workload": structpb.NewStringValue(workloadID(in.pod))}}
		lb.Metadata.FilterMetadata[originalDstMetadata] = &structpb.Struct{Fields: map[string]*structpb.Value{"local": structpb.NewStringValue(target)}}
		lb.Metadata.FilterMetadata[TransportSocketMatchKey] = &structpb.Struct{Fields: map[string]*structpb.Value{TunnelMatchKey: structpb.NewStringValue(TunnelHTTP)}}
	}
}

// hboneSocketMatch is the transport socket match "hbone" istiod puts first in a cluster
// that may reach HBONE endpoints: the internal upstream to connect_originate, passing it
// the endpoint's original destination and istio metadata and the cluster's, over the
// plaintext inner socket.
func hboneSocketMatch() (*cluster.Cluster_TransportSocketMatch, error) {
	raw, err := rawBufferSocket()
	if err != nil {
		return nil, err
	}
	host := &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Host_{Host: &metadatav3.MetadataKind_Host{}}}
	clusterKind := &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Cluster_{Cluster: &metadatav3.MetadataKind_Cluster{}}}
	cfg, err := typed(&internalupstream.InternalUpstreamTransport{
		PassthroughMetadata: []*internalupstream.InternalUpstreamTransport_MetadataValueSource{
			{Kind: host, Name: originalDstMetadata},
			{Kind: clusterKind, Name: "istio"},
			{Kind: host, Name: "istio"},
		},
		TransportSocket: raw,
	})
	if err != nil {
		return nil, err
	}
	return &cluster.Cluster_TransportSocketMatch{
		Name:            HBONEMatch,
		Match:           &structpb.Struct{Fields: map[string]*structpb.Value{TunnelMatchKey: structpb.NewStringValue(TunnelHTTP)}},
		TransportSocket: &core.TransportSocket{Name: "envoy.transport_sockets.internal_upstream", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: cfg}},
	}, nil
}

// disableMXWhenAllTunnel marks c's istio metadata disable_mx when every endpoint of it
// speaks HBONE (istiod's allInstancesHBONE): metadata exchange has nothing to talk to
// there.
func disableMXWhenAllTunnel(c *cluster.Cluster, ins []instance) {
	if len(ins) == 0 || c.GetMetadata().GetFilterMetadata()["istio"] == nil {
		return
	}
	for _, in := range ins {
		if !tunnelsTo(in.pod) {
			return
		}
	}
	c.Metadata.FilterMetadata["istio"].Fields["disable_mx"] = structpb.NewBoolValue(true)
}

// connectOriginateCluster is a sidecar's or gateway's connect_originate cluster: HBONE
// to the destination pod's 15008, any identity of the trust domain.
func connectOriginateCluster(m *model.Model) ([]types.Resource, error) {
	if !sendsHBONE(m) {
		return nil, nil
	}
	c, err := hboneOriginateCluster(ConnectOriginateListener, true, m.Mesh.TrustDomains())
	if err != nil {
		return nil, err
	}
	return []types.Resource{c}, nil
}

// listeners returns pod's listeners (proxyListeners) and, when it sends HBONE, the
// connect_originate internal listener last, as istiod appends it.
func listeners(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	ls, err := proxyListeners(m, pod)
	if err != nil || !sendsHBONE(m) {
		return ls, err
	}
	logs, err := accessLogs(MeshFor(m, pod))
	if err != nil {
		return nil, err
	}
	l, err := connectOriginateListener(logs)
	if err != nil {
		return nil, fmt.Errorf("build listener %s: %w", ConnectOriginateListener, err)
	}
	return append(ls, l), nil
}
