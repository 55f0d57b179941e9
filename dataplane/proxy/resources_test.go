package proxy

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	redisv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/redis_proxy/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Builders for resources shaped like the ones controlplane/xds generates (see the
// walking-skeleton xDS shape), with 127.0.0.1 addresses.

func mustAnyT(tb testing.TB, m proto.Message) *anypb.Any {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatalf("pack %T: %v", m, err)
	}
	return a
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		ResourceApiVersion:    corev3.ApiVersion_V3,
		InitialFetchTimeout:   durationpb.New(0),
	}
}

func socketAddr(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: adsSource(), ServiceName: name},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LbPolicy:             clusterv3.Cluster_ROUND_ROBIN,
	}
}

func origDstCluster(name string, bind string) *clusterv3.Cluster {
	c := &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED,
	}
	if bind != "" {
		c.UpstreamBindConfig = &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{
			Address: bind, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}
	}
	return c
}

func blackHoleCluster() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 "BlackHoleCluster",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(10 * time.Second),
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: "BlackHoleCluster"},
	}
}

func assignment(name string, hosts ...netip.AddrPort) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for _, h := range hosts {
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: socketAddr(h.Addr().String(), uint32(h.Port()))},
		}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}}
}

func routerFilter(tb testing.TB) []*hcmv3.HttpFilter {
	tb.Helper()
	return []*hcmv3.HttpFilter{{
		Name:       "envoy.filters.http.router",
		ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAnyT(tb, &routerv3.Router{})},
	}}
}

func hcmRDS(tb testing.TB, statPrefix, routeName string) *listenerv3.Filter {
	tb.Helper()
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix,
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			RouteConfigName: routeName, ConfigSource: adsSource(),
		}},
		HttpFilters: routerFilter(tb),
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(tb, h)}}
}

func hcmInline(tb testing.TB, statPrefix string, rc *routev3.RouteConfiguration) *listenerv3.Filter {
	tb.Helper()
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     statPrefix,
		CodecType:      hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		HttpFilters:    routerFilter(tb),
	}
	return &listenerv3.Filter{Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(tb, h)}}
}

func tcpProxy(tb testing.TB, statPrefix, cluster string) *listenerv3.Filter {
	tb.Helper()
	p := &tcpv3.TcpProxy{StatPrefix: statPrefix, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}}
	return &listenerv3.Filter{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(tb, p)}}
}

func redisFilter(tb testing.TB) *listenerv3.Filter {
	tb.Helper()
	p := &redisv3.RedisProxy{StatPrefix: "redis", Settings: &redisv3.RedisProxy_ConnPoolSettings{OpTimeout: durationpb.New(time.Second)}}
	return &listenerv3.Filter{Name: "envoy.filters.network.redis_proxy", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAnyT(tb, p)}}
}

func httpListener(tb testing.TB, name, ip string, port uint32, routeName string) *listenerv3.Listener {
	tb.Helper()
	return &listenerv3.Listener{
		Name:         name,
		Address:      socketAddr(ip, port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmRDS(tb, "outbound_"+name, routeName)}}},
	}
}

func routeConfig(name string, vhosts ...*routev3.VirtualHost) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: vhosts, ValidateClusters: wrapperspb.Bool(false)}
}

func vhostTo(name string, domains []string, cluster string) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: []*routev3.Route{{
		Name:  "default",
		Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{
			ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(0),
		}},
	}}}
}

// testBootstrap returns a bootstrap like the agent writes: admin on 127.0.0.1:0 and ADS
// over the xds-grpc cluster on a unix socket.
func testBootstrap(xdsSocket string) *bootstrapv3.Bootstrap {
	return &bootstrapv3.Bootstrap{
		Node:  &corev3.Node{Id: "sidecar~127.0.0.1~web.default~default.svc.cluster.local", Cluster: "web.default"},
		Admin: &bootstrapv3.Admin{Address: socketAddr("127.0.0.1", 0)},
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{Clusters: []*clusterv3.Cluster{{
			Name:                 "xds-grpc",
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
			ConnectTimeout:       durationpb.New(time.Second),
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "xds-grpc", Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
					Address: &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: xdsSocket}}},
				}}}},
			}}},
		}}},
		DynamicResources: &bootstrapv3.Bootstrap_DynamicResources{
			LdsConfig: adsSource(),
			CdsConfig: adsSource(),
			AdsConfig: &corev3.ApiConfigSource{
				ApiType:                   corev3.ApiConfigSource_GRPC,
				TransportApiVersion:       corev3.ApiVersion_V3,
				SetNodeOnFirstMessageOnly: true,
				GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
					EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds-grpc"},
				}}},
			},
		},
	}
}

func writeBootstrap(tb testing.TB, dir string, b *bootstrapv3.Bootstrap) string {
	tb.Helper()
	data, err := protojson.Marshal(b)
	if err != nil {
		tb.Fatalf("marshal bootstrap: %v", err)
	}
	path := fmt.Sprintf("%s/envoy-rev0.json", dir)
	if err := writeFile(path, data); err != nil {
		tb.Fatal(err)
	}
	return path
}
