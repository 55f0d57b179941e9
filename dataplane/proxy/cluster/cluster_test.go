package cluster

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sock(ip string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func cla(name string, health []corev3.HealthStatus, addrs ...string) *endpointv3.ClusterLoadAssignment {
	var lbs []*endpointv3.LbEndpoint
	for i, a := range addrs {
		ap := netip.MustParseAddrPort(a)
		lb := &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: sock(ap.Addr().String(), uint32(ap.Port())),
		}}}
		if i < len(health) {
			lb.HealthStatus = health[i]
		}
		lbs = append(lbs, lb)
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}}
}

func TestCompileRefusesWhatEnvoyRefusesOrIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *clusterv3.Cluster
		want string
	}{
		{"ORIGINAL_DST needs CLUSTER_PROVIDED", &clusterv3.Cluster{Name: "p", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST}},
			"cluster 'p': lb_policy: LB policy ROUND_ROBIN is not valid for Cluster type ORIGINAL_DST"},
		{"CLUSTER_PROVIDED only for ORIGINAL_DST", &clusterv3.Cluster{Name: "s", LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED},
			"LB policy CLUSTER_PROVIDED is not valid for Cluster type STATIC"},
		{"ring hash", &clusterv3.Cluster{Name: "s", LbPolicy: clusterv3.Cluster_RING_HASH}, "unsupported load balancing policy RING_HASH"},
		{"LOGICAL_DNS", &clusterv3.Cluster{Name: "d", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_LOGICAL_DNS}}, "type: unsupported cluster type LOGICAL_DNS"},
		{"retry budget", &clusterv3.Cluster{Name: "c", CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{RetryBudget: &clusterv3.CircuitBreakers_Thresholds_RetryBudget{}}}}},
			"cluster 'c': circuit_breakers.thresholds[0].retry_budget: field is not supported"},
		{"success rate outlier detection", &clusterv3.Cluster{Name: "o", OutlierDetection: &clusterv3.OutlierDetection{SuccessRateMinimumHosts: wrapperspb.UInt32(3)}},
			"outlier_detection.success_rate_minimum_hosts: field is not supported"},
		{"enforcing success rate", &clusterv3.Cluster{Name: "o", OutlierDetection: &clusterv3.OutlierDetection{EnforcingSuccessRate: wrapperspb.UInt32(100)}},
			"outlier_detection.enforcing_success_rate: only 0 is supported"},
		{"outlier detection as Istio sets it", &clusterv3.Cluster{Name: "o", OutlierDetection: &clusterv3.OutlierDetection{
			Consecutive_5Xx: wrapperspb.UInt32(3), EnforcingSuccessRate: wrapperspb.UInt32(0), Interval: durationpb.New(time.Second)}}, ""},
		{"least request", &clusterv3.Cluster{Name: "s", LbPolicy: clusterv3.Cluster_LEAST_REQUEST}, ""},
		{"transport socket", &clusterv3.Cluster{Name: "t", TransportSocket: &corev3.TransportSocket{Name: "tls"}}, "transport_socket.name: unsupported transport socket tls"},
		{"hostname endpoint", &clusterv3.Cluster{Name: "h", LoadAssignment: cla("h", nil, "1.2.3.4:80")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(tc.c)
			if tc.want == "" {
				if err != nil {
					t.Errorf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	la := cla("x", nil)
	la.Endpoints[0].LbEndpoints = []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: sock("backend.local", 80)}}}}
	if _, err := CompileAssignment(la); err == nil || !strings.Contains(err.Error(), "malformed IP address: backend.local") {
		t.Errorf("DNS names in EDS must be refused, got %v", err)
	}
}

func TestRoundRobinSkipsUnhealthyAndEDSUpdatesMembership(t *testing.T) {
	store := stats.NewStore()
	m := NewManager(store)
	t.Cleanup(m.Close)
	cfg, err := Compile(&clusterv3.Cluster{
		Name: "outbound|80||a", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{EdsConfig: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ServiceName != "outbound|80||a" {
		t.Errorf("service name defaults to the cluster name, got %q", cfg.ServiceName)
	}
	m.ApplyCDS([]*Config{cfg})
	c, _ := m.Get("outbound|80||a")
	if _, err := c.Pick(netip.AddrPort{}); !errors.Is(err, ErrNoHealthyUpstream) {
		t.Errorf("Pick before EDS = %v, want no healthy upstream", err)
	}
	hosts, err := CompileAssignment(cla("outbound|80||a", []corev3.HealthStatus{corev3.HealthStatus_HEALTHY, corev3.HealthStatus_UNHEALTHY, corev3.HealthStatus_UNKNOWN},
		"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"))
	if err != nil {
		t.Fatal(err)
	}
	m.ApplyEDS(map[string][]Host{"outbound|80||a": hosts})
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		h, err := c.Pick(netip.AddrPort{})
		if err != nil {
			t.Fatal(err)
		}
		seen[h.String()]++
	}
	if seen["10.0.0.1:80"] != 3 || seen["10.0.0.3:80"] != 3 || seen["10.0.0.2:80"] != 0 {
		t.Errorf("round robin over healthy hosts = %v", seen)
	}
	if store.Value("cluster.outbound|80||a.membership_total") != 3 || store.Value("cluster.outbound|80||a.membership_healthy") != 2 {
		t.Errorf("membership stats wrong: %d/%d", store.Value("cluster.outbound|80||a.membership_total"), store.Value("cluster.outbound|80||a.membership_healthy"))
	}
	// An unchanged CDS update keeps the cluster object (and its pools).
	m.ApplyCDS([]*Config{cfg})
	if c2, _ := m.Get("outbound|80||a"); c2 != c {
		t.Error("unchanged cluster was replaced")
	}
	if m.EDSNames()[0] != "outbound|80||a" {
		t.Errorf("EDSNames = %v", m.EDSNames())
	}
}

func TestOriginalDstDialsFromBindAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	from := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		from <- c.RemoteAddr().String()
		c.Close()
	}()
	cfg, err := Compile(&clusterv3.Cluster{
		Name: "inbound|80||", ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy: clusterv3.Cluster_CLUSTER_PROVIDED, ConnectTimeout: durationpb.New(time.Second),
		UpstreamBindConfig: &corev3.BindConfig{SourceAddress: &corev3.SocketAddress{Address: "127.0.0.6", PortSpecifier: &corev3.SocketAddress_PortValue{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store := stats.NewStore()
	m := NewManager(store)
	t.Cleanup(m.Close)
	m.ApplyCDS([]*Config{cfg})
	c, _ := m.Get("inbound|80||")
	h, err := c.Pick(netip.MustParseAddrPort(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c.Dial(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-from; !strings.HasPrefix(got, "127.0.0.6:") {
		t.Errorf("upstream saw %s, want 127.0.0.6", got)
	}
	if store.Value("cluster.inbound|80||.upstream_cx_active") != 1 {
		t.Error("upstream_cx_active not counted")
	}
	conn.Close()
	if store.Value("cluster.inbound|80||.upstream_cx_active") != 0 || store.Value("cluster.inbound|80||.upstream_cx_total") != 1 {
		t.Error("upstream_cx_active not released on close")
	}
}
