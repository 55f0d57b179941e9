package cluster

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internalv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/internal_upstream/v3"
	rawv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/raw_buffer/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// TestHBONESocketMatch: istiod's "hbone" transport socket match (internal_upstream over
// raw_buffer) compiles, and a host marked {tunnel: http} takes its passthrough metadata
// while a host without the mark takes the cluster's (none here).
func TestHBONESocketMatch(t *testing.T) {
	t.Parallel()
	raw, _ := anypb.New(&rawv3.RawBuffer{})
	host := &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Host_{Host: &metadatav3.MetadataKind_Host{}}}
	clusterKind := &metadatav3.MetadataKind{Kind: &metadatav3.MetadataKind_Cluster_{Cluster: &metadatav3.MetadataKind_Cluster{}}}
	iu, _ := anypb.New(&internalv3.InternalUpstreamTransport{
		PassthroughMetadata: []*internalv3.InternalUpstreamTransport_MetadataValueSource{
			{Kind: host, Name: "envoy.filters.listener.original_dst"}, {Kind: clusterKind, Name: "istio"}, {Kind: host, Name: "istio"},
		},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw}},
	})
	tunnel, _ := structpb.NewStruct(map[string]any{"tunnel": "http"})
	ms, err := compileSocketMatches([]*clusterv3.Cluster_TransportSocketMatch{
		{Name: "hbone", Match: tunnel, TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.internal_upstream", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: iu}}},
		{Name: "tlsMode-disabled", Match: &structpb.Struct{}, TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: raw}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{SocketMatches: ms}
	hbone := Host{SocketMatch: `{"tunnel":"http"}`}
	if tc, name := cfg.Transport(hbone); tc != nil || name != "hbone" {
		t.Errorf("HBONE host: transport %v %q, want plaintext hbone", tc, name)
	}
	if pt := cfg.passthroughFor(hbone); pt == nil || len(pt.Host) != 2 || len(pt.Cluster) != 1 {
		t.Errorf("HBONE host passthrough %+v, want 2 host and 1 cluster namespaces", pt)
	}
	if pt := cfg.passthroughFor(Host{}); pt != nil {
		t.Errorf("plain host passthrough %+v, want none", pt)
	}
}
