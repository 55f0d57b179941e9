package cluster

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

func tlsSocket(t *testing.T, sni string) *corev3.TransportSocket {
	t.Helper()
	a, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni})
	if err != nil {
		t.Fatal(err)
	}
	return &corev3.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a}}
}

func mdStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTransportSocketMatchesPerEndpoint checks Envoy's per-endpoint choice over EDS
// metadata: the first match whose every key/value is in the endpoint's
// envoy.transport_socket_match metadata, else the cluster's transport_socket.
func TestTransportSocketMatchesPerEndpoint(t *testing.T) {
	cfg, err := Compile(&clusterv3.Cluster{
		Name: "outbound|8080||backend", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
		TransportSocket:  tlsSocket(t, "cluster-default"),
		TransportSocketMatches: []*clusterv3.Cluster_TransportSocketMatch{
			{Name: "tlsMode-istio", Match: mdStruct(t, map[string]any{"tlsMode": "istio"}), TransportSocket: tlsSocket(t, "istio")},
			{Name: "two-keys", Match: mdStruct(t, map[string]any{"tlsMode": "other", "v": 2.0}), TransportSocket: tlsSocket(t, "two")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	lb := func(ip string, md map[string]any) *endpointv3.LbEndpoint {
		e := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock(ip, 8080)}}}
		if md != nil {
			e.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				SocketMatchFilter: mdStruct(t, md),
				"istio":           mdStruct(t, map[string]any{"workload": "backend-v1;default;backend;v1;Kubernetes"}),
			}}
		}
		return e
	}
	hosts, err := CompileAssignment(&endpointv3.ClusterLoadAssignment{ClusterName: "outbound|8080||backend", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
		lb("10.0.0.1", map[string]any{"tlsMode": "istio", "extra": "ignored"}),
		lb("10.0.0.2", nil),
		lb("10.0.0.3", map[string]any{"tlsMode": "other", "v": 2}),
		lb("10.0.0.4", map[string]any{"tlsMode": "other"}),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, sni string }{{"tlsMode-istio", "istio"}, {"default", "cluster-default"}, {"two-keys", "two"}, {"default", "cluster-default"}}
	for i, h := range hosts {
		tc, name := cfg.Transport(h)
		if name != want[i].name || tc == nil || tc.SNI != want[i].sni {
			t.Errorf("host %s: match %q sni %v, want %q %q", h, name, tc, want[i].name, want[i].sni)
		}
	}
	plain := *cfg
	plain.TLS = nil
	if tc, name := plain.Transport(hosts[1]); tc != nil || name != "default" {
		t.Errorf("no match and no transport_socket: %v %q, want plaintext", tc, name)
	}
}
