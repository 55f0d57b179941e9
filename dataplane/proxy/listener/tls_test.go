package listener

import (
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx/tlstest"
	"github.com/meshlab/meshlab/internal/testutil"
)

const (
	frontendID = "spiffe://cluster.local/ns/default/sa/frontend"
	backendID  = "spiffe://cluster.local/ns/default/sa/backend"
)

func tlsMatch(port uint32, transport string, alpn ...string) *listenerv3.FilterChainMatch {
	return &listenerv3.FilterChainMatch{DestinationPort: wrapperspb.UInt32(port), TransportProtocol: transport, ApplicationProtocols: alpn}
}

// TestSelectMatchesTLSInEnvoyOrder pins Envoy's filter chain order for the chains Istio
// builds on virtualInbound with PERMISSIVE mTLS: server names, then transport protocol,
// then application protocols, each narrowing to the most specific chains.
func TestSelectMatchesTLSInEnvoyOrder(t *testing.T) {
	sni := tlsMatch(8080, "")
	sni.ServerNames = []string{"*.example.com"}
	sniExact := tlsMatch(8080, "")
	sniExact.ServerNames = []string{"a.example.com"}
	cfg, err := Compile(&listenerv3.Listener{Name: "virtualInbound", Address: addr("0.0.0.0", 15006),
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: tlsctx.InspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspv3.TlsInspector{})}}},
		FilterChains: []*listenerv3.FilterChain{
			{Name: "mtls-http", FilterChainMatch: tlsMatch(8080, "tls", "istio-http/1.0", "istio-http/1.1", "istio-h2"), Filters: tcpFilter(t, "a")},
			{Name: "plain-http", FilterChainMatch: tlsMatch(8080, "raw_buffer", "http/1.1", "h2c"), Filters: tcpFilter(t, "a")},
			{Name: "mtls-tcp", FilterChainMatch: tlsMatch(8080, "tls", "istio-peer-exchange", "istio"), Filters: tcpFilter(t, "a")},
			{Name: "tls-oneway", FilterChainMatch: tlsMatch(8080, "tls"), Filters: tcpFilter(t, "a")},
			{Name: "plain-tcp", FilterChainMatch: tlsMatch(8080, "raw_buffer"), Filters: tcpFilter(t, "a")},
			{Name: "sni-wildcard", FilterChainMatch: sni, Filters: tcpFilter(t, "a")},
			{Name: "sni-exact", FilterChainMatch: sniExact, Filters: tcpFilter(t, "a")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.TLSInspector {
		t.Fatal("tls_inspector not compiled")
	}
	tests := []struct {
		name, transport, sni string
		alpn                 []string
		want                 string
	}{
		{name: "mtls_http_by_istio_alpn", transport: "tls", alpn: []string{"istio-http/1.1", "http/1.1"}, want: "mtls-http"},
		{name: "mtls_tcp_by_peer_exchange", transport: "tls", alpn: []string{"istio-peer-exchange", "istio"}, want: "mtls-tcp"},
		{name: "tls_without_known_alpn_takes_the_chain_without_application_protocols", transport: "tls", alpn: []string{"h2"}, want: "tls-oneway"},
		{name: "plaintext_http_detected_by_http_inspector", transport: "raw_buffer", alpn: []string{"http/1.1"}, want: "plain-http"},
		{name: "plaintext_tcp", transport: "raw_buffer", want: "plain-tcp"},
		{name: "server_name_is_matched_before_transport_protocol", transport: "tls", sni: "b.example.com", alpn: []string{"istio"}, want: "sni-wildcard"},
		{name: "exact_server_name_beats_wildcard", transport: "tls", sni: "a.example.com", want: "sni-exact"},
		{name: "unmatched_server_name_falls_back_to_chains_without_server_names", transport: "tls", sni: "other.org", alpn: []string{"istio"}, want: "mtls-tcp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := cfg.Select(ConnInfo{
				Local: netip.MustParseAddrPort("10.0.0.2:8080"), Remote: netip.MustParseAddrPort("10.0.0.1:40000"),
				TransportProtocol: tc.transport, ServerName: tc.sni, ALPN: tc.alpn,
			})
			if fc == nil || fc.Name != tc.want {
				t.Fatalf("Select = %v, want %s", fc, tc.want)
			}
		})
	}
}

// tagServer accepts connections and answers each with tag, then closes it.
func tagServer(t *testing.T, tag string) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, tag)
			_ = c.Close()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String())
}

func staticCluster(t *testing.T, name string, to netip.AddrPort, ts *corev3.TransportSocket) *cluster.Config {
	t.Helper()
	cfg, err := cluster.Compile(&clusterv3.Cluster{
		Name: name, ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}, TransportSocket: ts,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address: addr(to.Addr().String(), uint32(to.Port())),
			}}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

type proxyUnderTest struct {
	stats     *stats.Store
	clusters  *cluster.Manager
	listeners *Manager
	secrets   *tlsctx.Store
}

func newProxyUnderTest(t *testing.T, ca *tlstest.CA, id string) *proxyUnderTest {
	t.Helper()
	p := &proxyUnderTest{stats: stats.NewStore(), secrets: tlsctx.NewStore()}
	for _, s := range []*tlsv3.Secret{ca.Leaf(t, "default", id), ca.Root("ROOTCA")} {
		sec, err := tlsctx.CompileSecret(s, "1")
		if err != nil {
			t.Fatal(err)
		}
		p.secrets.Set(sec)
	}
	p.clusters = cluster.NewManager(p.stats)
	p.clusters.SetSecrets(p.secrets)
	p.listeners = NewManager(Deps{Clusters: p.clusters, Routes: httpconn.NewRouteStore(), Stats: p.stats, Logger: testutil.Logger(t), Secrets: p.secrets})
	t.Cleanup(func() { p.listeners.Close(); p.clusters.Close() })
	return p
}

func (p *proxyUnderTest) listen(t *testing.T, l *listenerv3.Listener) (netip.AddrPort, *Config) {
	t.Helper()
	cfg, err := Compile(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.listeners.ApplyLDS(append(p.listeners.Configs(), cfg)); err != nil {
		t.Fatal(err)
	}
	a, _ := p.listeners.Addr(l.GetName())
	return a, cfg
}

func readAll(t *testing.T, to netip.AddrPort) string {
	t.Helper()
	c, err := net.Dial("tcp", to.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// Client first: tls_inspector waits for the first bytes, as Envoy's does.
	_, _ = io.WriteString(c, "ping")
	b, _ := io.ReadAll(c)
	return string(b)
}

func waitStat(t *testing.T, st *stats.Store, name string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for st.Value(name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d, want %d", name, st.Value(name), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMutualTLSBetweenTwoProxies runs a client proxy whose cluster originates Istio mTLS
// (SDS certificates, ALPN, SAN verification) to a server proxy whose tls_inspector sends
// TLS to the mTLS chain and plaintext to the raw_buffer chain. A cluster expecting the
// wrong SAN is refused with Envoy's stats and no byte reaches the backend.
func TestMutualTLSBetweenTwoProxies(t *testing.T) {
	ca := tlstest.NewCA(t)
	server := newProxyUnderTest(t, ca, backendID)
	server.clusters.AddStatic([]*cluster.Config{
		staticCluster(t, "inbound|tls", tagServer(t, "via-mtls-chain"), nil),
		staticCluster(t, "inbound|plain", tagServer(t, "via-plaintext-chain"), nil),
	})
	down := tlstest.Socket(t, &tlsv3.DownstreamTlsContext{
		CommonTlsContext:         tlstest.IstioCommon([]string{"istio-peer-exchange", "h2", "http/1.1"}, tlstest.Prefix("spiffe://cluster.local/")),
		RequireClientCertificate: wrapperspb.Bool(true),
	})
	inbound, inCfg := server.listen(t, &listenerv3.Listener{Name: "virtualInbound", Address: addr("127.0.0.1", 0),
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: tlsctx.InspectorName, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(t, &tlsinspv3.TlsInspector{})}}},
		FilterChains: []*listenerv3.FilterChain{
			{Name: "mtls", FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "tls"}, TransportSocket: down, Filters: tcpFilter(t, "inbound|tls")},
			{Name: "plaintext", FilterChainMatch: &listenerv3.FilterChainMatch{TransportProtocol: "raw_buffer"}, Filters: tcpFilter(t, "inbound|plain")},
		},
	})

	client := newProxyUnderTest(t, ca, frontendID)
	upstream := func(san string) *corev3.TransportSocket {
		return tlstest.Socket(t, &tlsv3.UpstreamTlsContext{
			Sni:              "outbound_.8080_._.backend.default.svc.cluster.local",
			CommonTlsContext: tlstest.IstioCommon([]string{"istio-peer-exchange", "istio"}, tlstest.Exact(san)),
		})
	}
	client.clusters.AddStatic([]*cluster.Config{
		staticCluster(t, "outbound|8080||backend", inbound, upstream(backendID)),
		staticCluster(t, "outbound|8080||impostor", inbound, upstream("spiffe://cluster.local/ns/default/sa/reviews")),
	})
	good, _ := client.listen(t, &listenerv3.Listener{Name: "good", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "outbound|8080||backend")}}})
	wrong, _ := client.listen(t, &listenerv3.Listener{Name: "wrong", Address: addr("127.0.0.1", 0),
		FilterChains: []*listenerv3.FilterChain{{Filters: tcpFilter(t, "outbound|8080||impostor")}}})

	if got := readAll(t, good); got != "via-mtls-chain" {
		t.Fatalf("through the client proxy: %q, want via-mtls-chain", got)
	}
	if got := readAll(t, inbound); got != "via-plaintext-chain" {
		t.Fatalf("plaintext to the server proxy: %q, want via-plaintext-chain", got)
	}
	if got := readAll(t, wrong); got != "" {
		t.Fatalf("through a cluster expecting the wrong SAN: %q, want nothing", got)
	}
	in := "listener." + inCfg.StatName + "."
	waitStat(t, client.stats, "cluster.outbound|8080||backend.ssl.handshake", 1)
	waitStat(t, server.stats, in+"ssl.handshake", 1)
	waitStat(t, client.stats, "cluster.outbound|8080||impostor.ssl.fail_verify_san", 1)
	waitStat(t, client.stats, "cluster.outbound|8080||impostor.ssl.connection_error", 1)
	waitStat(t, client.stats, "cluster.outbound|8080||impostor.upstream_cx_connect_fail", 1)
	waitStat(t, server.stats, in+"ssl.connection_error", 1)
	waitStat(t, server.stats, "cluster.inbound|tls.upstream_cx_total", 1)
}
