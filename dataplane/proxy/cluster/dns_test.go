package cluster

import (
	"net"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/types/known/durationpb"

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
