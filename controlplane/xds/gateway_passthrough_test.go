package xds

import (
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

func tlsServer(proto, name string, mode networking.ServerTLSSettings_TLSmode, cred string, hosts ...string) *networking.Server {
	return &networking.Server{
		Port:  &networking.Port{Number: 443, Name: name, Protocol: proto},
		Hosts: hosts, Tls: &networking.ServerTLSSettings{Mode: mode, CredentialName: cred},
	}
}

func tlsRoute(sni []string, port uint32, gateways []string, dsts ...*networking.RouteDestination) *networking.TLSRoute {
	return &networking.TLSRoute{
		Match: []*networking.TLSMatchAttributes{{SniHosts: sni, Port: port, Gateways: gateways}},
		Route: dsts,
	}
}

func tlsDest(host string, port uint32, weight int32) *networking.RouteDestination {
	return &networking.RouteDestination{Destination: &networking.Destination{Host: host, Port: &networking.PortSelector{Number: port}}, Weight: weight}
}

// Istio's "ingress gateway without TLS termination" task: an HTTPS server in mode
// PASSTHROUGH gets a chain per tls route match, on server_names = its sniHosts, with a
// tcp_proxy to the route's destination (weighted when several) and no TLS context and
// no route configuration; the listener inspects TLS for the SNI. A match for another
// port or another Gateway, and a second match repeating an SNI host, get no chain.
func TestGatewayPassthrough(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("mygateway",
		tlsServer("HTTPS", "https", networking.ServerTLSSettings_PASSTHROUGH, "", "nginx.example.com", "*.shop.example.com"),
	)}, vs("nginx", &networking.VirtualService{
		Hosts: []string{"nginx.example.com", "*.shop.example.com"}, Gateways: []string{"mygateway"},
		Tls: []*networking.TLSRoute{
			tlsRoute([]string{"nginx.example.com"}, 443, nil, tlsDest("productpage.default.svc.cluster.local", 9080, 0)),
			tlsRoute([]string{"*.shop.example.com"}, 0, []string{"default/mygateway"},
				tlsDest("reviews.default.svc.cluster.local", 9080, 80), tlsDest("db.default.svc.cluster.local", 5432, 20)),
			tlsRoute([]string{"other.example.com"}, 8443, nil, tlsDest("db.default.svc.cluster.local", 5432, 0)),
			tlsRoute([]string{"gw.example.com"}, 0, []string{"other-gateway"}, tlsDest("db.default.svc.cluster.local", 5432, 0)),
			tlsRoute([]string{"nginx.example.com"}, 0, nil, tlsDest("db.default.svc.cluster.local", 5432, 0)),
		},
	}))
	res := generateGateway(t, m, ingressPod)
	testutil.Golden(t, "gateway-passthrough", dumpJSON(t, res))
	if len(res[resource.RouteType]) != 0 || len(res[resource.SecretType]) != 0 {
		t.Errorf("routes %q, secrets %q: want none for a passthrough server", names(res[resource.RouteType]), names(res[resource.SecretType]))
	}
	if len(res[resource.ListenerType]) != 1 {
		t.Fatalf("listeners = %q", names(res[resource.ListenerType]))
	}
	l := res[resource.ListenerType][0].(*listener.Listener)
	if l.GetName() != "0.0.0.0_8443" || len(l.GetListenerFilters()) != 1 || l.GetListenerFilters()[0].GetName() != wellknown.TlsInspector {
		t.Errorf("listener %s, listener filters %v", l.GetName(), l.GetListenerFilters())
	}
	type chain struct {
		sni      []string
		clusters []string
	}
	var got []chain
	for _, fc := range l.GetFilterChains() {
		if fc.GetTransportSocket() != nil {
			t.Errorf("chain %v ends TLS", fc.GetFilterChainMatch())
		}
		tp := tcpProxyOf(t, lastFilter(fc))
		c := chain{sni: fc.GetFilterChainMatch().GetServerNames()}
		if tp.GetCluster() != "" {
			c.clusters = []string{tp.GetCluster()}
		}
		for _, w := range tp.GetWeightedClusters().GetClusters() {
			c.clusters = append(c.clusters, w.GetName())
		}
		got = append(got, c)
	}
	want := []chain{
		{[]string{"nginx.example.com"}, []string{"outbound|9080||productpage.default.svc.cluster.local"}},
		{[]string{"*.shop.example.com"}, []string{"outbound|9080||reviews.default.svc.cluster.local", "outbound|5432||db.default.svc.cluster.local"}},
	}
	if !slices.EqualFunc(got, want, func(a, b chain) bool { return slices.Equal(a.sni, b.sni) && slices.Equal(a.clusters, b.clusters) }) {
		t.Errorf("chains = %v, want %v", got, want)
	}
}

// A TLS server in mode SIMPLE ends TLS with its credential on its SNI hosts and proxies
// the bytes by the bound VirtualService's tcp route; its credential is sent over ADS.
func TestGatewayTLSTerminatedTCP(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("db-gateway",
		tlsServer("TLS", "tls-db", networking.ServerTLSSettings_SIMPLE, "db-credential", "db.example.com"),
	)}, vs("db", &networking.VirtualService{
		Hosts: []string{"db.example.com"}, Gateways: []string{"db-gateway"},
		Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{tlsDest("db.default.svc.cluster.local", 5432, 0)}}},
	}))
	m.Secrets = []*model.Secret{{Name: "db-credential", Namespace: "istio-system", Cert: []byte("CERT"), Key: []byte("KEY")}}
	res := generateGateway(t, m, ingressPod)
	if got := names(res[resource.SecretType]); !slices.Equal(got, []string{"kubernetes://db-credential"}) {
		t.Errorf("secrets = %q", got)
	}
	if len(res[resource.RouteType]) != 0 || len(res[resource.ListenerType]) != 1 {
		t.Fatalf("routes %q, listeners %q", names(res[resource.RouteType]), names(res[resource.ListenerType]))
	}
	l := res[resource.ListenerType][0].(*listener.Listener)
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("chains = %v", l.GetFilterChains())
	}
	fc := l.GetFilterChains()[0]
	var ctx tlsv3.DownstreamTlsContext
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
		t.Fatalf("chain has no TLS context: %v", err)
	}
	if got := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName(); got != "kubernetes://db-credential" {
		t.Errorf("certificate = %q", got)
	}
	if !slices.Equal(fc.GetFilterChainMatch().GetServerNames(), []string{"db.example.com"}) ||
		tcpProxyOf(t, lastFilter(fc)).GetCluster() != "outbound|5432||db.default.svc.cluster.local" {
		t.Errorf("chain = %v", fc)
	}
}
