package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	origdstv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	cachetypes "github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Resources shaped exactly as the walking-skeleton agreement between controlplane/xds and
// the proxy says, except that the capture listeners bind 127.0.0.1:0 and the original
// destination comes from a fake instead of iptables.

func virtualOutbound(tb testing.TB) *listenerv3.Listener {
	tb.Helper()
	return &listenerv3.Listener{
		Name: "virtualOutbound", Address: socketAddr("127.0.0.1", 0),
		UseOriginalDst:   wrapperspb.Bool(true),
		TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains: []*listenerv3.FilterChain{
			{Name: "virtualOutbound-blackhole", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(15001)},
				Filters: []*listenerv3.Filter{tcpProxy(tb, "BlackHoleCluster", "BlackHoleCluster")}},
			{Name: "virtualOutbound-catchall-tcp", Filters: []*listenerv3.Filter{tcpProxy(tb, "PassthroughCluster", "PassthroughCluster")}},
		},
	}
}

func outboundHTTP(tb testing.TB, port uint32) *listenerv3.Listener {
	tb.Helper()
	return &listenerv3.Listener{
		Name: fmt.Sprintf("0.0.0.0_%d", port), Address: socketAddr("0.0.0.0", port),
		BindToPort: wrapperspb.Bool(false), TrafficDirection: corev3.TrafficDirection_OUTBOUND,
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{hcmRDS(tb, fmt.Sprintf("outbound_0.0.0.0_%d", port), fmt.Sprint(port))}}},
	}
}

func virtualInbound(tb testing.TB, targetPort uint32) *listenerv3.Listener {
	tb.Helper()
	cluster := fmt.Sprintf("inbound|%d||", targetPort)
	rc := routeConfig(cluster, vhostTo(fmt.Sprintf("inbound|http|%d", targetPort), []string{"*"}, cluster))
	return &listenerv3.Listener{
		Name: "virtualInbound", Address: socketAddr("127.0.0.1", 0),
		TrafficDirection: corev3.TrafficDirection_INBOUND,
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.listener.original_dst",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAnyT(tb, &origdstv3.OriginalDst{})}}},
		FilterChains: []*listenerv3.FilterChain{
			{Name: "virtualInbound-blackhole", FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(15006)},
				Filters: []*listenerv3.Filter{tcpProxy(tb, "BlackHoleCluster", "BlackHoleCluster")}},
			{Name: fmt.Sprintf("0.0.0.0_%d", targetPort), FilterChainMatch: &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(targetPort)},
				Filters: []*listenerv3.Filter{hcmInline(tb, fmt.Sprintf("inbound_0.0.0.0_%d", targetPort), rc)}},
			{Name: "virtualInbound", Filters: []*listenerv3.Filter{tcpProxy(tb, "InboundPassthroughCluster", "InboundPassthroughCluster")}},
		},
	}
}

func sidecarSnapshot(tb testing.TB, outboundEndpoint netip.AddrPort, inboundPort uint32) map[resource.Type][]cachetypes.Resource {
	tb.Helper()
	const svcPort = 8080
	out := fmt.Sprintf("outbound|%d||backend.default.svc.cluster.local", svcPort)
	clusters := []cachetypes.Resource{
		edsCluster(out),
		origDstCluster("PassthroughCluster", ""),
		origDstCluster("InboundPassthroughCluster", "127.0.0.6"),
		blackHoleCluster(),
	}
	listeners := []cachetypes.Resource{virtualOutbound(tb), outboundHTTP(tb, svcPort)}
	if inboundPort != 0 {
		clusters = append(clusters, origDstCluster(fmt.Sprintf("inbound|%d||", inboundPort), "127.0.0.6"))
		listeners = append(listeners, virtualInbound(tb, inboundPort))
	}
	var endpoints []netip.AddrPort
	if outboundEndpoint.IsValid() {
		endpoints = append(endpoints, outboundEndpoint)
	}
	return map[resource.Type][]cachetypes.Resource{
		resource.ClusterType:  clusters,
		resource.EndpointType: {assignment(out, endpoints...)},
		resource.ListenerType: listeners,
		resource.RouteType: {routeConfig(fmt.Sprint(svcPort),
			vhostTo("backend.default.svc.cluster.local:8080", []string{"backend.default.svc.cluster.local", "backend.default.svc.cluster.local:8080", "backend", "backend:8080", "10.96.0.10", "10.96.0.10:8080"}, out),
			vhostTo("allow_any", []string{"*"}, "PassthroughCluster"),
		)},
	}
}

func fixedOriginalDst(dst netip.AddrPort) func(*net.TCPConn) (netip.AddrPort, error) {
	return func(*net.TCPConn) (netip.AddrPort, error) { return dst, nil }
}

// TestSidecarToSidecar sends app -> sidecar A (virtualOutbound, handed off to 0.0.0.0_8080,
// RDS, EDS) -> sidecar B (virtualInbound, chain 0.0.0.0_<port>, ORIGINAL_DST from
// 127.0.0.6) -> app B, and checks both sidecars' stats under Envoy's names.
func TestSidecarToSidecar(t *testing.T) { testSidecarToSidecar(t, false) }

// TestSidecarToSidecarOverDeltaADS is TestSidecarToSidecar with both sidecars on
// DELTA_GRPC, as Istio's bootstrap configures ADS, against go-control-plane's delta server.
func TestSidecarToSidecarOverDeltaADS(t *testing.T) { testSidecarToSidecar(t, true) }

func testSidecarToSidecar(t *testing.T, delta bool) {
	t.Helper()
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "from %s", strings.Split(r.RemoteAddr, ":")[0])
	}))
	t.Cleanup(app.Close)
	appAddr := netip.MustParseAddrPort(app.Listener.Addr().String())
	inPort := uint32(appAddr.Port())
	x := startXDS(t)
	dir := t.TempDir()
	bs := testBootstrap(x.socket)
	if delta {
		bs.GetDynamicResources().GetAdsConfig().ApiType = corev3.ApiConfigSource_DELTA_GRPC
	}
	boot := writeBootstrap(t, dir, bs)

	// Sidecar B first: its inbound capture address is A's endpoint.
	const nodeB = "sidecar~127.0.0.1~backend-0.default~default.svc.cluster.local"
	x.set(nodeB, "1", sidecarSnapshot(t, netip.AddrPort{}, inPort))
	b := newTestServer(t, boot, nodeB, fixedOriginalDst(appAddr))
	eventually(t, "B LIVE", func() bool { c, _ := adminGet(t, b, "/ready"); return c == 200 })
	if n := len(x.requests()); delta && n != 0 {
		t.Fatalf("%d state-of-the-world requests on a DELTA_GRPC sidecar", n)
	}
	bIn, ok := b.ListenerAddr("virtualInbound")
	if !ok {
		t.Fatal("B has no virtualInbound")
	}

	const nodeA = "sidecar~127.0.0.1~web-0.default~default.svc.cluster.local"
	x.set(nodeA, "1", sidecarSnapshot(t, bIn, 0))
	a := newTestServer(t, boot, nodeA, fixedOriginalDst(netip.MustParseAddrPort("10.96.0.10:8080")))
	eventually(t, "A LIVE", func() bool { c, _ := adminGet(t, a, "/ready"); return c == 200 })
	aOut, _ := a.ListenerAddr("virtualOutbound")

	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	code, body, _ := get(t, client, "http://"+aOut.String()+"/", "backend:8080")
	if code != 200 || body != "from 127.0.0.6" {
		t.Fatalf("got %d %q, want 200 \"from 127.0.0.6\" (delivered by B from 127.0.0.6)", code, body)
	}
	inCluster := fmt.Sprintf("inbound|%d||", inPort)
	for _, c := range []struct {
		srv  *Server
		name string
	}{
		{a, "cluster.outbound|8080||backend.default.svc.cluster.local.upstream_rq_total"},
		{a, "http.outbound_0.0.0.0_8080.downstream_rq_total"},
		{a, "listener.0.0.0.0_8080.downstream_cx_total"},
		{b, "cluster." + inCluster + ".upstream_rq_total"},
		{b, "cluster." + inCluster + ".upstream_rq_200"},
		{b, fmt.Sprintf("http.inbound_0.0.0.0_%d.downstream_rq_total", inPort)},
		{b, "listener.127.0.0.1_0.downstream_cx_total"},
	} {
		if got := c.srv.StatsStore().Value(c.name); got != 1 {
			t.Errorf("%s = %d, want 1", c.name, got)
		}
	}
	if got := a.StatsStore().Value("listener.127.0.0.1_0.downstream_cx_total"); got != 0 {
		t.Errorf("A's virtualOutbound counted %d connections; a handed-off connection counts on its target only", got)
	}
}

func newTestServer(t *testing.T, boot, node string, od func(*net.TCPConn) (netip.AddrPort, error)) *Server {
	t.Helper()
	return startProxyWith(t, boot, func(o *Options) { o.ServiceNode = node }, func(s *Server) { s.originalDst = od })
}

// TestPassthroughTCPHalfClose sends raw TCP through virtualOutbound's catch-all chain to
// PassthroughCluster (ORIGINAL_DST) and checks the half-close reaches the upstream.
func TestPassthroughTCPHalfClose(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		c, err := echo.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		data, _ := io.ReadAll(c) // until the proxied half-close
		_, _ = c.Write([]byte("echo:" + string(data)))
	}()
	x := startXDS(t)
	const node = "sidecar~127.0.0.1~web-0.default~default.svc.cluster.local"
	x.set(node, "1", sidecarSnapshot(t, netip.AddrPort{}, 0))
	srv := newTestServer(t, writeBootstrap(t, t.TempDir(), testBootstrap(x.socket)), node,
		fixedOriginalDst(netip.MustParseAddrPort(echo.Addr().String())))
	eventually(t, "LIVE", func() bool { c, _ := adminGet(t, srv, "/ready"); return c == 200 })
	out, _ := srv.ListenerAddr("virtualOutbound")
	conn, err := net.Dial("tcp", out.String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(bufio.NewReader(conn))
	if err != nil || string(got) != "echo:ping" {
		t.Fatalf("read %q, %v; want echo:ping", got, err)
	}
	st := srv.StatsStore()
	eventually(t, "tcp stats", func() bool { return st.Value("tcp.PassthroughCluster.downstream_cx_total") == 1 })
	if got := st.Value("cluster.PassthroughCluster.upstream_cx_total"); got != 1 {
		t.Errorf("cluster.PassthroughCluster.upstream_cx_total = %d, want 1", got)
	}
}
