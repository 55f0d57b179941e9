package xds

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

const ingressPod = "istio-ingressgateway-abc"

// gatewayModel is istioModel with istioctl's ingress gateway (Service 80->8080,
// 443->8443 and a router pod in istio-system) and the given Gateways and
// VirtualServices.
func gatewayModel(gws []*model.IstioConfig[*networking.Gateway], vss ...*model.IstioConfig[*networking.VirtualService]) *model.Model {
	base := istioModel()
	labels := model.GatewayLabels(model.IngressGatewayName)
	svc := &model.Service{
		Name: model.IngressGatewayName, Namespace: "istio-system", VIP: netip.MustParseAddr("10.96.0.23"), Selector: labels,
		Ports: []model.ServicePort{
			{Name: "status-port", Port: 15021, TargetPort: 15021, Protocol: model.ProtocolTCP},
			{Name: "http2", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP2},
			{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.ProtocolHTTPS},
		},
	}
	pod := &model.Pod{
		Name: ingressPod, Namespace: "istio-system", Workload: model.IngressGatewayName, Labels: labels,
		ServiceAccount: "istio-ingressgateway-service-account", IP: netip.MustParseAddr("10.244.0.16"),
		Sidecar: model.SidecarSpec{Inject: true}, Router: true,
	}
	m := model.New(append(base.Services, svc), append(base.Pods, pod))
	m.Istio.Gateways = gws
	m.Istio.VirtualServices = vss
	return m
}

func gateway(name string, servers ...*networking.Server) *model.IstioConfig[*networking.Gateway] {
	return &model.IstioConfig[*networking.Gateway]{
		Name: name, Namespace: "default",
		Spec:   &networking.Gateway{Selector: map[string]string{"istio": "ingressgateway"}, Servers: servers},
		Origin: model.Origin{File: "istio.yaml", Kind: "Gateway", Namespace: "default", Name: name},
	}
}

func httpServer(port uint32, hosts ...string) *networking.Server {
	return &networking.Server{Port: &networking.Port{Number: port, Name: "http", Protocol: "HTTP"}, Hosts: hosts}
}

// bookinfoVS is the ingress task's VirtualService: /productpage and /static to
// productpage, bound to bookinfo-gateway only.
func bookinfoVS(hosts ...string) *model.IstioConfig[*networking.VirtualService] {
	return vs("bookinfo", &networking.VirtualService{
		Hosts: hosts, Gateways: []string{"bookinfo-gateway"},
		Http: []*networking.HTTPRoute{{
			Match: []*networking.HTTPMatchRequest{
				{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Exact{Exact: "/productpage"}}},
				{Uri: &networking.StringMatch{MatchType: &networking.StringMatch_Prefix{Prefix: "/static"}}},
			},
			Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{
				Host: "productpage.default.svc.cluster.local", Port: &networking.PortSelector{Number: 9080},
			}}},
		}},
	})
}

// generateGateway generates pod's resources, deep-validated, in one consistent snapshot.
func generateGateway(t *testing.T, m *model.Model, pod string) map[resource.Type][]types.Resource {
	t.Helper()
	res, err := Generate(m, m.Pod(pod))
	if err != nil {
		t.Fatalf("Generate(%s): %v", pod, err)
	}
	for typ, rs := range res {
		for _, r := range rs {
			validateDeep(t, pod+":"+typ+"/"+cachev3.GetResourceName(r), r)
		}
	}
	snap, err := cachev3.NewSnapshot("v1", res)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Errorf("snapshot of %s inconsistent: %v", pod, err)
	}
	return res
}

// The ingress task's Gateway on a router pod: istiod's listener 0.0.0.0_8080 (the
// Service's target port of server port 80) routed by http.8080, a "*:80" virtual host
// with the VirtualService's routes, the mesh's outbound clusters and no inbound side;
// the VirtualService does not reach the sidecars.
func TestGatewayHTTP(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("bookinfo-gateway", httpServer(80, "*"))}, bookinfoVS("*"))
	res := generateGateway(t, m, ingressPod)
	testutil.Golden(t, "gateway-http", dumpJSON(t, res))
	if got := names(res[resource.ListenerType]); !slices.Equal(got, []string{"0.0.0.0_8080"}) {
		t.Errorf("listeners = %q", got)
	}
	if got := names(res[resource.RouteType]); !slices.Equal(got, []string{"http.8080"}) {
		t.Errorf("routes = %q", got)
	}
	rc := res[resource.RouteType][0].(*route.RouteConfiguration)
	if vh := rc.GetVirtualHosts(); len(vh) != 1 || vh[0].GetName() != "*:80" || !slices.Equal(vh[0].GetDomains(), []string{"*"}) || len(vh[0].GetRoutes()) != 2 ||
		vh[0].GetRoutes()[0].GetRoute().GetCluster() != "outbound|9080||productpage.default.svc.cluster.local" {
		t.Errorf("virtual hosts = %v", vh)
	}
	clusters := names(res[resource.ClusterType])
	if !slices.Contains(clusters, "outbound|9080||productpage.default.svc.cluster.local") || !slices.Contains(clusters, BlackHoleCluster) ||
		slices.Contains(clusters, PassthroughCluster) || slices.ContainsFunc(clusters, func(c string) bool { return strings.HasPrefix(c, "inbound|") }) {
		t.Errorf("clusters = %q", clusters)
	}
	side := generateGateway(t, m, "productpage-v1")
	for _, r := range side[resource.RouteType] {
		for _, vh := range r.(*route.RouteConfiguration).GetVirtualHosts() {
			if slices.Contains(vh.GetDomains(), "*") && vh.GetName() != AllowAnyVirtualHost {
				t.Errorf("a sidecar got the gateway's virtual host %s", vh.GetName())
			}
		}
	}
	// Sidecars reach the gateway's pod in plaintext: it has no tlsMode.
	for _, r := range side[resource.EndpointType] {
		cla := r.(*endpoint.ClusterLoadAssignment)
		if !strings.Contains(cla.GetClusterName(), "istio-ingressgateway") {
			continue
		}
		for _, e := range cla.GetEndpoints()[0].GetLbEndpoints() {
			if e.GetMetadata() != nil {
				t.Errorf("gateway endpoint %s carries metadata %v", cla.GetClusterName(), e.GetMetadata())
			}
		}
	}
}

// Hosts are intersected as Istio's: a server "*" with VirtualService hosts gives each
// VirtualService host; "*.example.com" keeps a.example.com and drops other.org; a
// route configuration no VirtualService fills gets the 404 blackhole virtual host.
func TestGatewayHostsAndBlackhole(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{
		gateway("bookinfo-gateway", httpServer(80, "*.example.com"), httpServer(8081, "*")),
	}, bookinfoVS("a.example.com", "other.org", "*.b.example.com"))
	res := generateGateway(t, m, ingressPod)
	byName := map[string][]string{}
	for _, r := range res[resource.RouteType] {
		for _, vh := range r.(*route.RouteConfiguration).GetVirtualHosts() {
			byName[cachev3.GetResourceName(r)] = append(byName[cachev3.GetResourceName(r)], vh.GetName())
		}
	}
	// Server 8081 has no Service port: it listens on 8081 itself. Its server hosts "*"
	// take every host of the VirtualService.
	want := map[string][]string{
		"http.8080": {"*.b.example.com:80", "a.example.com:80"},
		"http.8081": {"*.b.example.com:8081", "a.example.com:8081", "other.org:8081"},
	}
	for k, v := range want {
		if !slices.Equal(byName[k], v) {
			t.Errorf("%s virtual hosts = %q, want %q", k, byName[k], v)
		}
	}
	m = gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("bookinfo-gateway", httpServer(80, "*"))})
	res = generateGateway(t, m, ingressPod)
	vh := res[resource.RouteType][0].(*route.RouteConfiguration).GetVirtualHosts()
	if len(vh) != 1 || vh[0].GetName() != "blackhole:80" || len(vh[0].GetRoutes()) != 0 {
		t.Errorf("without a VirtualService: %v", vh)
	}
}

// An HTTPS server terminating TLS gets a chain matched by SNI with the credential over
// ADS and its own route configuration; MUTUAL asks for a client certificate verified by
// the "-cacert" secret; the secrets come from the gateway's namespace.
func TestGatewayTLS(t *testing.T) {
	t.Parallel()
	https := func(name, cred string, mode networking.ServerTLSSettings_TLSmode, hosts ...string) *networking.Server {
		return &networking.Server{
			Port:  &networking.Port{Number: 443, Name: name, Protocol: "HTTPS"},
			Hosts: hosts, Tls: &networking.ServerTLSSettings{Mode: mode, CredentialName: cred},
		}
	}
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("mygateway",
		https("https", "httpbin-credential", networking.ServerTLSSettings_SIMPLE, "httpbin.example.com"),
		https("https-mutual", "helloworld-credential", networking.ServerTLSSettings_MUTUAL, "helloworld.example.com"),
	)}, vs("httpbin", &networking.VirtualService{
		Hosts: []string{"httpbin.example.com", "helloworld.example.com"}, Gateways: []string{"mygateway"},
		Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews.default.svc.cluster.local"}}}}},
	}))
	m.Secrets = []*model.Secret{
		{Name: "httpbin-credential", Namespace: "istio-system", Cert: []byte("CERT"), Key: []byte("KEY")},
		{Name: "helloworld-credential", Namespace: "istio-system", Cert: []byte("CERT2"), Key: []byte("KEY2")},
		{Name: "helloworld-credential-cacert", Namespace: "istio-system", CACert: []byte("CA")},
		{Name: "httpbin-credential", Namespace: "default", Cert: []byte("WRONG"), Key: []byte("WRONG")},
	}
	res := generateGateway(t, m, ingressPod)
	testutil.Golden(t, "gateway-tls", dumpJSON(t, res))
	if got := names(res[resource.RouteType]); !slices.Equal(got, []string{"https.443.https-mutual.mygateway.default", "https.443.https.mygateway.default"}) {
		t.Errorf("routes = %q", got)
	}
	if got := names(res[resource.SecretType]); !slices.Equal(got, []string{"kubernetes://helloworld-credential", "kubernetes://helloworld-credential-cacert", "kubernetes://httpbin-credential"}) {
		t.Errorf("secrets = %q", got)
	}
	for _, r := range res[resource.SecretType] {
		if s := r.(*tlsv3.Secret); s.GetName() == "kubernetes://httpbin-credential" && string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes()) != "CERT" {
			t.Errorf("httpbin-credential is not istio-system's: %v", s)
		}
	}
	l := res[resource.ListenerType][0].(*listener.Listener)
	if l.GetName() != "0.0.0.0_8443" || len(l.GetFilterChains()) != 2 || len(l.GetListenerFilters()) != 1 {
		t.Fatalf("listener = %v", l)
	}
	for _, fc := range l.GetFilterChains() {
		var ctx tlsv3.DownstreamTlsContext
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
			t.Fatal(err)
		}
		sni := fc.GetFilterChainMatch().GetServerNames()
		mutual := ctx.GetRequireClientCertificate().GetValue()
		switch {
		case slices.Equal(sni, []string{"httpbin.example.com"}) && !mutual:
		case slices.Equal(sni, []string{"helloworld.example.com"}) && mutual &&
			ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig().GetName() == "kubernetes://helloworld-credential-cacert":
		default:
			t.Errorf("chain %v: mutual %v, %v", sni, mutual, &ctx)
		}
	}
}

// An HTTPS server in mode ISTIO_MUTUAL (the egress gateway's in Istio's mutual TLS
// origination task) presents the gateway's workload certificate and asks for a mesh
// client's, both from its agent over SDS, on a chain matched by the server's host; it
// brings no credential secrets.
func TestGatewayIstioMutual(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("istio-egressgateway", &networking.Server{
		Port:  &networking.Port{Number: 443, Name: "https", Protocol: "HTTPS"},
		Hosts: []string{"my-nginx.mesh-external.svc.cluster.local"},
		Tls:   &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_ISTIO_MUTUAL},
	})}, vs("nginx", &networking.VirtualService{
		Hosts: []string{"my-nginx.mesh-external.svc.cluster.local"}, Gateways: []string{"istio-egressgateway"},
		Http: []*networking.HTTPRoute{{Route: []*networking.HTTPRouteDestination{{Destination: &networking.Destination{Host: "reviews.default.svc.cluster.local"}}}}},
	}))
	res := generateGateway(t, m, ingressPod)
	if len(res[resource.SecretType]) != 0 {
		t.Errorf("secrets %q, want none (the workload certificate comes from the agent)", names(res[resource.SecretType]))
	}
	l := res[resource.ListenerType][0].(*listener.Listener)
	if len(l.GetFilterChains()) != 1 {
		t.Fatalf("listener %s has %d chains, want 1", l.GetName(), len(l.GetFilterChains()))
	}
	fc := l.GetFilterChains()[0]
	if sni := fc.GetFilterChainMatch().GetServerNames(); !slices.Equal(sni, []string{"my-nginx.mesh-external.svc.cluster.local"}) {
		t.Errorf("chain matches SNI %q, want the server's host", sni)
	}
	var ctx tlsv3.DownstreamTlsContext
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(&ctx); err != nil {
		t.Fatal(err)
	}
	cert := ctx.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()
	roots := ctx.GetCommonTlsContext().GetCombinedValidationContext().GetValidationContextSdsSecretConfig()
	if !ctx.GetRequireClientCertificate().GetValue() || len(cert) != 1 || cert[0].GetName() != SecretCertificate ||
		cert[0].GetSdsConfig().GetApiConfigSource().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName() != SDSCluster ||
		roots.GetName() != SecretRootCA {
		t.Errorf("tls context %v: want the workload certificate and ROOTCA from %s, client certificate required", &ctx, SDSCluster)
	}
}

// A TCP server proxies to the first tcp route of a bound VirtualService, on the
// server's own port when the gateway Service has no such port.
func TestGatewayTCP(t *testing.T) {
	t.Parallel()
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gateway("tcp-gateway",
		&networking.Server{Port: &networking.Port{Number: 31400, Name: "tcp", Protocol: "TCP"}, Hosts: []string{"*"}},
	)}, vs("db", &networking.VirtualService{
		Hosts: []string{"*"}, Gateways: []string{"tcp-gateway"},
		Tcp: []*networking.TCPRoute{{
			Match: []*networking.L4MatchAttributes{{Port: 31400}},
			Route: []*networking.RouteDestination{{Destination: &networking.Destination{Host: "db.default.svc.cluster.local", Port: &networking.PortSelector{Number: 5432}}}},
		}},
	}))
	res := generateGateway(t, m, ingressPod)
	if len(res[resource.ListenerType]) != 1 {
		t.Fatalf("listeners = %q", names(res[resource.ListenerType]))
	}
	l := res[resource.ListenerType][0].(*listener.Listener)
	if l.GetName() != "0.0.0.0_31400" || len(l.GetFilterChains()) != 1 || tcpProxyOf(t, lastFilter(l.GetFilterChains()[0])).GetCluster() != "outbound|5432||db.default.svc.cluster.local" {
		t.Errorf("listener = %v", l)
	}
	if len(res[resource.RouteType]) != 0 {
		t.Errorf("routes = %q, want none for a TCP server", names(res[resource.RouteType]))
	}
}
