package listener

import (
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	redisv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/redis_proxy/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustAny(tb testing.TB, m proto.Message) *anypb.Any {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func tcpFilter(tb testing.TB, cluster string) []*listenerv3.Filter {
	tb.Helper()
	return []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
		TypedConfig: mustAny(tb, &tcpv3.TcpProxy{StatPrefix: cluster, ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: cluster}}),
	}}}
}

func addr(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func cidr(p string, l uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: p, PrefixLen: wrapperspb.UInt32(l)}
}

func baseListener(tb testing.TB) *listenerv3.Listener {
	tb.Helper()
	return &listenerv3.Listener{
		Name: "l", Address: addr("0.0.0.0", 15006),
		FilterChains: []*listenerv3.FilterChain{
			{Name: "port-8080", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080)}, Filters: tcpFilter(tb, "a")},
			{Name: "port-8080-10.1/16", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080),
				PrefixRanges: []*corev3.CidrRange{cidr("10.1.0.0", 16)}}, Filters: tcpFilter(tb, "b")},
			{Name: "port-8080-10.1.2/24", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(8080),
				PrefixRanges: []*corev3.CidrRange{cidr("10.1.2.0", 24)}}, Filters: tcpFilter(tb, "c")},
			{Name: "src-192.168", FilterChainMatch: &listenerv3.FilterChainMatch{
				SourcePrefixRanges: []*corev3.CidrRange{cidr("192.168.0.0", 16)}}, Filters: tcpFilter(tb, "d")},
			{Name: "catch-all", Filters: tcpFilter(tb, "e")},
			{Name: "port-9090-10.9/16", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(9090),
				PrefixRanges: []*corev3.CidrRange{cidr("10.9.0.0", 16)}}, Filters: tcpFilter(tb, "f")},
		},
	}
}

func TestSelectChainFollowsEnvoyOrder(t *testing.T) {
	cfg, err := Compile(baseListener(t))
	if err != nil {
		t.Fatal(err)
	}
	withDefault := baseListener(t)
	withDefault.DefaultFilterChain = &listenerv3.FilterChain{Name: "default", Filters: tcpFilter(t, "z")}
	withDefault.FilterChains = withDefault.FilterChains[5:] // only the 9090/10.9 chain
	dcfg, err := Compile(withDefault)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		cfg           *Config
		local, remote string
		want          string
	}{
		{"destination port without IP match", cfg, "10.2.0.1:8080", "1.1.1.1:1", "port-8080"},
		{"longest destination prefix wins", cfg, "10.1.2.3:8080", "1.1.1.1:1", "port-8080-10.1.2/24"},
		{"shorter destination prefix", cfg, "10.1.9.9:8080", "1.1.1.1:1", "port-8080-10.1/16"},
		{"a port match excludes port-less chains even with a source match", cfg, "10.2.0.1:8080", "192.168.1.1:1", "port-8080"},
		{"source prefix among port-less chains", cfg, "10.2.0.1:7000", "192.168.1.1:1", "src-192.168"},
		{"catch-all chain", cfg, "10.2.0.1:7000", "1.1.1.1:1", "catch-all"},
		{"a more specific port that then fails the IP is not rescued by less specific chains", cfg, "10.2.0.1:9090", "1.1.1.1:1", ""},
		{"default filter chain when nothing matches", dcfg, "10.2.0.1:9090", "1.1.1.1:1", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := tc.cfg.SelectChain(netip.MustParseAddrPort(tc.local), netip.MustParseAddrPort(tc.remote))
			got := ""
			if fc != nil {
				got = fc.Name
			}
			if got != tc.want {
				t.Errorf("SelectChain = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCompileRefusesWhatIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*listenerv3.Listener)
		want   string
	}{
		{"unsupported network filter names the type", func(l *listenerv3.Listener) {
			l.FilterChains[0].Filters = []*listenerv3.Filter{{Name: "envoy.filters.network.redis_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
				TypedConfig: mustAny(t, &redisv3.RedisProxy{StatPrefix: "r", Settings: &redisv3.RedisProxy_ConnPoolSettings{OpTimeout: durationpb.New(1)}}),
			}}}
		}, "listener 'l': filter_chains[0].filters[0].typed_config: unsupported type envoy.extensions.filters.network.redis_proxy.v3.RedisProxy"},
		{"source_ports match", func(l *listenerv3.Listener) {
			l.FilterChains[1].FilterChainMatch.SourcePorts = []uint32{80}
		}, "listener 'l': filter_chains[1].filter_chain_match.source_ports: field is not supported by meshlab proxy"},
		{"unknown transport_protocol", func(l *listenerv3.Listener) {
			l.FilterChains[0].FilterChainMatch.TransportProtocol = "quic"
		}, `filter_chains[0].filter_chain_match.transport_protocol: unknown transport protocol "quic"`},
		{"transport socket without typed_config", func(l *listenerv3.Listener) {
			l.FilterChains[0].TransportSocket = &corev3.TransportSocket{Name: "tls"}
		}, "filter_chains[0].transport_socket.name: unsupported transport socket tls"},
		{"proxy_protocol listener filter", func(l *listenerv3.Listener) {
			l.ListenerFilters = []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.proxy_protocol"}}
		}, "listener_filters[0].name: unsupported listener filter envoy.filters.listener.proxy_protocol"},
		{"tcp_proxy max_connect_attempts", func(l *listenerv3.Listener) {
			l.FilterChains[0].Filters = []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy", ConfigType: &listenerv3.Filter_TypedConfig{
				TypedConfig: mustAny(t, &tcpv3.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "x"}, MaxConnectAttempts: wrapperspb.UInt32(2)}),
			}}}
		}, "filter_chains[0].filters[0].typed_config: max_connect_attempts: field is not supported"},
		{"pipe address", func(l *listenerv3.Listener) {
			l.Address = &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: "/x"}}}
		}, "address: only socket addresses are supported"},
		{"validation error", func(l *listenerv3.Listener) {
			l.FilterChains[0].FilterChainMatch.DestinationPort = wrapperspb.UInt32(70000)
		}, "DestinationPort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := baseListener(t)
			tc.mutate(l)
			_, err := Compile(l)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func FuzzApplyListener(f *testing.F) {
	seed, err := proto.Marshal(baseListener(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x01, 0x78})
	f.Fuzz(func(t *testing.T, data []byte) {
		var l listenerv3.Listener
		if err := proto.Unmarshal(data, &l); err != nil {
			return
		}
		cfg, err := Compile(&l)
		if err != nil {
			return
		}
		// An accepted listener must be usable: chain selection never panics.
		cfg.SelectChain(netip.MustParseAddrPort("10.1.2.3:8080"), netip.MustParseAddrPort("192.168.0.1:5"))
	})
}
