package tcpproxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeCountsNoRouteAndConnectFailure(t *testing.T) {
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	t.Cleanup(cm.Close)
	od, err := cluster.Compile(&clusterv3.Cluster{Name: "PassthroughCluster",
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_ORIGINAL_DST},
		LbPolicy:             clusterv3.Cluster_CLUSTER_PROVIDED, ConnectTimeout: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	cm.ApplyCDS([]*cluster.Config{od})
	deps := Deps{Clusters: cm, Stats: store, Logger: testutil.Logger(t)}

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	Serve(context.Background(), &Config{StatPrefix: "nr", Cluster: "missing"}, deps, b, Downstream{})
	if store.Value("tcp.nr.downstream_cx_no_route") != 1 {
		t.Error("downstream_cx_no_route not counted for an unknown cluster")
	}
	dead := testutil.RefusingAddr(t)
	Serve(context.Background(), &Config{StatPrefix: "pt", Cluster: "PassthroughCluster"}, deps, b, Downstream{Local: dead})
	if store.Value("cluster.PassthroughCluster.upstream_cx_connect_fail") != 1 || store.Value("tcp.pt.downstream_cx_total") != 1 {
		t.Error("connect failure not counted")
	}
}

func TestCompileRefusesMaxConnectAttempts(t *testing.T) {
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpv3.TcpProxy_Cluster{Cluster: "a"}, MaxConnectAttempts: wrapperspb.UInt32(3)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(a); err == nil || !strings.Contains(err.Error(), "max_connect_attempts: field is not supported") {
		t.Errorf("max_connect_attempts: got %v", err)
	}
}

// nameServer accepts connections and writes name to each.
func nameServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(name))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func staticCluster(t *testing.T, name, addr string) *cluster.Config {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	c, err := cluster.Compile(&clusterv3.Cluster{Name: name, ConnectTimeout: durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: ap.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())}}}}}},
		}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWeightedClustersSplitConnectionsAndAccessLogNamesTheCluster(t *testing.T) {
	store := stats.NewStore()
	cm := cluster.NewManager(store)
	t.Cleanup(cm.Close)
	cm.AddStatic([]*cluster.Config{staticCluster(t, "v1", nameServer(t, "v1")), staticCluster(t, "v2", nameServer(t, "v2"))})
	logPath := filepath.Join(t.TempDir(), "tcp.log")
	fl, _ := anypb.New(&filev3.FileAccessLog{Path: logPath, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{
			InlineString: "%UPSTREAM_CLUSTER% %RESPONSE_FLAGS% %BYTES_SENT%\n"}}}}}})
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "w", ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{
		WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "v1", Weight: 80}, {Name: "v2", Weight: 20}}},
	}, AccessLog: []*accesslogv3.AccessLog{{Name: "envoy.access_loggers.file", ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: fl}}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Clusters: cm, Stats: store, Logger: testutil.Logger(t)}
	const n = 500
	got := map[string]int{}
	for i := 0; i < n; i++ {
		c, s := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			Serve(context.Background(), cfg, deps, s, Downstream{})
			s.Close()
		}()
		b, _ := io.ReadAll(c)
		c.Close()
		<-done
		got[string(b)]++
	}
	if got["v1"] < 350 || got["v1"] > 450 || got["v1"]+got["v2"] != n {
		t.Errorf("80/20 split over %d connections = %v", n, got)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != n || (lines[0] != "v1 - 2" && lines[0] != "v2 - 2") {
		t.Errorf("access log: %d lines, first %q", len(lines), lines[0])
	}
}
