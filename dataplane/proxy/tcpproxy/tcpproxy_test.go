package tcpproxy

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

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
	Serve(context.Background(), &Config{StatPrefix: "nr", Cluster: "missing"}, deps, b, netip.AddrPort{})
	if store.Value("tcp.nr.downstream_cx_no_route") != 1 {
		t.Error("downstream_cx_no_route not counted for an unknown cluster")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	Serve(context.Background(), &Config{StatPrefix: "pt", Cluster: "PassthroughCluster"}, deps, b, dead)
	if store.Value("cluster.PassthroughCluster.upstream_cx_connect_fail") != 1 || store.Value("tcp.pt.downstream_cx_total") != 1 {
		t.Error("connect failure not counted")
	}
}

func TestCompileRefusesWeightedClusters(t *testing.T) {
	a, err := anypb.New(&tcpv3.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpv3.TcpProxy_WeightedClusters{
		WeightedClusters: &tcpv3.TcpProxy_WeightedCluster{Clusters: []*tcpv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "a", Weight: 1}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(a); err == nil {
		t.Error("weighted_clusters accepted but not implemented")
	}
}
