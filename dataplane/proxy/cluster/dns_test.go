package cluster

import (
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	caresv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/network/dns_resolver/cares/v3"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// dnsServer answers A queries from a mutable table on a loopback UDP port.
type dnsServer struct {
	mu    sync.Mutex
	table map[string][]string
}

func (s *dnsServer) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	s.mu.Lock()
	ips, ok := s.table[q.Question[0].Name]
	s.mu.Unlock()
	if !ok {
		m.Rcode = dns.RcodeNameError
	}
	for _, ip := range ips {
		if q.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
	}
	_ = w.WriteMsg(m)
}

func startDNS(t *testing.T, s *dnsServer) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: s}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestStrictDNSResolvesLabNamesAndFollowsChanges(t *testing.T) {
	srv := &dnsServer{table: map[string][]string{"ratings.default.svc.cluster.local.": {"10.244.0.7", "10.244.0.8"}}}
	addr := startDNS(t, srv)
	la := cla("dns", nil)
	la.Endpoints[0].LbEndpoints = []*endpointv3.LbEndpoint{
		{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock("ratings.default.svc.cluster.local", 9080)}}},
		{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock("10.244.0.9", 9080)}}},
	}
	cfg, err := Compile(&clusterv3.Cluster{Name: "dns", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		DnsLookupFamily: clusterv3.Cluster_V4_ONLY, DnsRefreshRate: durationpb.New(20 * time.Millisecond), RespectDnsTtl: true, LoadAssignment: la}) //nolint:staticcheck // Istio sends the deprecated dns_refresh_rate
	if err != nil {
		t.Fatal(err)
	}
	store := stats.NewStore()
	m := NewManager(store)
	m.SetResolver(NewDNSResolver(addr))
	t.Cleanup(m.Close)
	m.ApplyCDS([]*Config{cfg})
	c, _ := m.Get("dns")
	waitHosts := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		var got []string
		for time.Now().Before(deadline) {
			got = got[:0]
			for _, h := range c.Hosts() {
				got = append(got, h.String())
			}
			sort.Strings(got)
			if len(got) == len(want) && (len(got) == 0 || got[0] == want[0] && got[len(got)-1] == want[len(want)-1]) {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Fatalf("hosts = %v, want %v", got, want)
	}
	waitHosts("10.244.0.7:9080", "10.244.0.8:9080", "10.244.0.9:9080")
	srv.mu.Lock()
	srv.table["ratings.default.svc.cluster.local."] = []string{"10.244.0.20"}
	srv.mu.Unlock()
	waitHosts("10.244.0.20:9080", "10.244.0.9:9080")
	if h, err := c.Pick(netip.AddrPort{}); err != nil || !h.Healthy {
		t.Errorf("pick from resolved hosts: %v %v", h, err)
	}
	if store.Value("cluster.dns.update_success") < 2 {
		t.Errorf("update_success = %d", store.Value("cluster.dns.update_success"))
	}
}

// dns_jitter, which istiod sets on its DNS clusters, is read: each refresh waits the
// refresh rate plus a random extra below the jitter, and exactly the rate without one.
func TestStrictDNSJitter(t *testing.T) {
	cfg, err := Compile(&clusterv3.Cluster{
		Name: "dns", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		DnsRefreshRate: durationpb.New(5 * time.Second), DnsJitter: durationpb.New(100 * time.Millisecond), //nolint:staticcheck // Istio sends the deprecated dns_refresh_rate
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "dns", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
			{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock("www.google.com", 443)}}},
		}}}},
	})
	if err != nil {
		t.Fatalf("Compile with dns_jitter: %v", err)
	}
	if cfg.DNS.Jitter != 100*time.Millisecond {
		t.Fatalf("Jitter = %v, want 100ms", cfg.DNS.Jitter)
	}
	for _, r := range []time.Duration{0, 42 * time.Millisecond, 100*time.Millisecond - 1} {
		got := cfg.DNS.nextRefresh(func(n time.Duration) time.Duration {
			if n != 100*time.Millisecond {
				t.Errorf("random extra drawn below %v, want below the jitter", n)
			}
			return r
		})
		if got != 5*time.Second+r {
			t.Errorf("next refresh with extra %v = %v, want %v", r, got, 5*time.Second+r)
		}
	}
	cfg.DNS.Jitter = 0
	if got := cfg.DNS.nextRefresh(func(time.Duration) time.Duration { t.Fatal("drew a random extra without jitter"); return 0 }); got != 5*time.Second {
		t.Errorf("next refresh without jitter = %v, want 5s", got)
	}
}

// istiod names the c-ares resolver with udp_max_queries on its DNS clusters: accepted;
// resolver addresses (which the proxy would not use) and another resolver are refused
// by name.
func TestStrictDNSResolverConfig(t *testing.T) {
	base := func(tc *corev3.TypedExtensionConfig) *clusterv3.Cluster {
		return &clusterv3.Cluster{
			Name: "dns", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS}, TypedDnsResolverConfig: tc,
			LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: "dns", Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{
				{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock("www.google.com", 443)}}},
			}}}},
		}
	}
	cares := func(cfg *caresv3.CaresDnsResolverConfig) *corev3.TypedExtensionConfig {
		a, err := anypb.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &corev3.TypedExtensionConfig{Name: "envoy.network.dns_resolver.cares", TypedConfig: a}
	}
	if _, err := Compile(base(cares(&caresv3.CaresDnsResolverConfig{UdpMaxQueries: wrapperspb.UInt32(100)}))); err != nil {
		t.Errorf("istiod's c-ares config: %v", err)
	}
	for _, tc := range []struct {
		name string
		cfg  *corev3.TypedExtensionConfig
		want string
	}{
		{"resolver addresses", cares(&caresv3.CaresDnsResolverConfig{Resolvers: []*corev3.Address{sock("8.8.8.8", 53)}}),
			"typed_dns_resolver_config.typed_config.resolvers: field is not supported by meshlab proxy"},
		{"another resolver", func() *corev3.TypedExtensionConfig {
			c := cares(&caresv3.CaresDnsResolverConfig{})
			c.Name = "envoy.network.dns_resolver.apple"
			return c
		}(), "typed_dns_resolver_config.name: unsupported DNS resolver envoy.network.dns_resolver.apple"},
	} {
		if _, err := Compile(base(tc.cfg)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
