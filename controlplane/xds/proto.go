package xds

import (
	"fmt"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	cors "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	grpcstats "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/grpc_stats/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	alpn "istio.io/api/envoy/config/filter/http/alpn/v2alpha1"
)

// connectTimeout is every generated cluster's connect_timeout (Istio's default).
var connectTimeout = durationpb.New(10e9)

// validator is what every generated Envoy message implements (.pb.validate.go).
type validator interface {
	ValidateAll() error
}

// typed validates msg and packs it as a typed_config. Envoy checks typed configs only
// after unpacking them, so they are validated here, where they are built.
func typed(msg proto.Message) (*anypb.Any, error) {
	if v, ok := msg.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("validate %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
		}
	}
	a, err := anypb.New(msg)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return a, nil
}

// adsConfigSource fetches a resource over the proxy's ADS stream and waits for it forever
// (initial_fetch_timeout 0s), as Istio's sidecars do.
func adsConfigSource() *core.ConfigSource {
	return &core.ConfigSource{
		ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
		ResourceApiVersion:    core.ApiVersion_V3,
		InitialFetchTimeout:   durationpb.New(0),
	}
}

// socketAddress returns a TCP address.
func socketAddress(addr string, port uint16) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:      core.SocketAddress_TCP,
		Address:       addr,
		PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(port)},
	}}}
}

// tcpProxyFilter returns a tcp_proxy network filter sending every connection to cluster.
func tcpProxyFilter(statPrefix, cluster string) (*listener.Filter, error) {
	cfg, err := typed(&tcpproxy.TcpProxy{
		StatPrefix:       statPrefix,
		ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: cluster},
	})
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: wellknown.TCPProxy, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}}, nil
}

// tcpProxyWeightedFilter returns a tcp_proxy network filter spreading connections over
// clusters by weight.
func tcpProxyWeightedFilter(statPrefix string, clusters []*tcpproxy.TcpProxy_WeightedCluster_ClusterWeight) (*listener.Filter, error) {
	cfg, err := typed(&tcpproxy.TcpProxy{
		StatPrefix: statPrefix,
		ClusterSpecifier: &tcpproxy.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxy.TcpProxy_WeightedCluster{
			Clusters: clusters,
		}},
	})
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: wellknown.TCPProxy, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}}, nil
}

// Names of the HTTP filters istiod puts in every sidecar connection manager besides
// RBAC and the router.
const (
	GRPCStatsFilter = "envoy.filters.http.grpc_stats"
	ALPNFilter      = "istio.alpn"
	CORSFilter      = "envoy.filters.http.cors"
)

// hcmFilter returns an http_connection_manager network filter; the caller sets the route
// specifier and puts the RBAC filters first. The connection manager is istiod's for a
// sidecar with the default mesh config (buildHTTPConnectionManager): the client's
// address is not trusted as the remote address, paths are normalized and escaped
// slashes kept, websocket upgrades pass, a stream never times out idle, and
// 100-continue is proxied. Its HTTP filters are Istio's, in Istio's order: grpc_stats
// (per-cluster gRPC status counts), on outbound connection managers istio.alpn (the
// ALPN a sidecar offers upstream: istio-http/1.0, istio-http/1.1 or istio-h2 first, so
// the server's chains can tell HTTP), the fault filter (always: applying a fault later
// changes only routes, which reach open connections; a listener change would not), cors
// (a VirtualService corsPolicy is per route), then the router.
func hcmFilter(statPrefix string, outbound bool, routes func(*hcm.HttpConnectionManager)) (*listener.Filter, error) {
	m := &hcm.HttpConnectionManager{
		StatPrefix:                   statPrefix,
		CodecType:                    hcm.HttpConnectionManager_AUTO,
		UseRemoteAddress:             wrapperspb.Bool(false),
		NormalizePath:                wrapperspb.Bool(true),
		PathWithEscapedSlashesAction: hcm.HttpConnectionManager_KEEP_UNCHANGED,
		UpgradeConfigs:               []*hcm.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
		StreamIdleTimeout:            durationpb.New(0),
		Proxy_100Continue:            true,
	}
	filters := []struct {
		name string
		cfg  proto.Message
	}{
		{GRPCStatsFilter, &grpcstats.FilterConfig{
			EmitFilterState:        true,
			PerMethodStatSpecifier: &grpcstats.FilterConfig_StatsForAllMethods{StatsForAllMethods: wrapperspb.Bool(false)},
		}},
		{ALPNFilter, &alpn.FilterConfig{AlpnOverride: []*alpn.FilterConfig_AlpnOverride{
			{UpstreamProtocol: alpn.FilterConfig_HTTP10, AlpnOverride: []string{"istio-http/1.0", "istio", "http/1.0"}},
			{UpstreamProtocol: alpn.FilterConfig_HTTP11, AlpnOverride: alpnUpstreamHTTP},
			{UpstreamProtocol: alpn.FilterConfig_HTTP2, AlpnOverride: alpnUpstreamH2},
		}}},
		{FaultFilter, &fault.HTTPFault{}},
		{CORSFilter, &cors.Cors{}},
		{wellknown.Router, &router.Router{}},
	}
	for _, f := range filters {
		if f.name == ALPNFilter && !outbound {
			continue
		}
		cfg, err := typed(f.cfg)
		if err != nil {
			return nil, err
		}
		m.HttpFilters = append(m.HttpFilters, &hcm.HttpFilter{Name: f.name, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: cfg}})
	}
	routes(m)
	cfg, err := typed(m)
	if err != nil {
		return nil, err
	}
	return &listener.Filter{Name: wellknown.HTTPConnectionManager, ConfigType: &listener.Filter_TypedConfig{TypedConfig: cfg}}, nil
}

// configMetadata records which config object a resource was generated from, as Istio
// does in filter_metadata["istio"].config, and for a subset cluster the subset's name.
func configMetadata(path, subset string) *core.Metadata {
	fields := map[string]*structpb.Value{"config": structpb.NewStringValue(path)}
	if subset != "" {
		fields["subset"] = structpb.NewStringValue(subset)
	}
	return &core.Metadata{FilterMetadata: map[string]*structpb.Struct{"istio": {Fields: fields}}}
}
