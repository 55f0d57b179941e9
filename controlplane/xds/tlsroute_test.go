package xds

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

const egressPod = "istio-egressgateway-abc"

// egressGatewayModel is istioModel with istioctl's egress gateway (Service 80->8080,
// 443->8443, a router pod in istio-system), a web Service with an https port (two
// versions), and the objects given.
func egressGatewayModel(mutate func(*model.Model)) *model.Model {
	base := istioModel()
	labels := model.GatewayLabels(model.EgressGatewayName)
	gw := &model.Service{
		Name: model.EgressGatewayName, Namespace: "istio-system", VIP: netip.MustParseAddr("10.96.0.24"), Selector: labels,
		Ports: []model.ServicePort{
			{Name: "http2", Port: 80, TargetPort: 8080, Protocol: model.ProtocolHTTP2},
			{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.ProtocolHTTPS},
		},
	}
	web := &model.Service{
		Name: "web", Namespace: "default", VIP: netip.MustParseAddr("10.96.0.25"), Selector: map[string]string{"app": "web"},
		Ports:  []model.ServicePort{{Name: "https", Port: 443, TargetPort: 8443, Protocol: model.ProtocolHTTPS}},
		Origin: model.Origin{File: "web.yaml", Kind: "Service", Namespace: "default", Name: "web"},
	}
	pods := []*model.Pod{{
		Name: egressPod, Namespace: "istio-system", Workload: model.EgressGatewayName, Labels: labels,
		ServiceAccount: "istio-egressgateway-service-account", IP: netip.MustParseAddr("10.244.0.17"),
		Sidecar: model.SidecarSpec{Inject: true}, Router: true,
	}}
	for i, v := range []string{"v1", "v2"} {
		pods = append(pods, &model.Pod{
			Name: "web-" + v, Namespace: "default", Workload: "web-" + v, Labels: map[string]string{"app": "web", "version": v},
			ServiceAccount: "web", IP: netip.MustParseAddr(fmt.Sprintf("10.244.0.%d", 18+i)), Ports: []uint16{8443},
			Sidecar: model.SidecarSpec{Inject: true},
		})
	}
	m := model.New(append(base.Services, gw, web), append(base.Pods, pods...))
	mutate(m)
	return m
}

// The HTTPS section of Istio's "Egress Gateways" task, its objects as the task writes
// them (the Gateway, DestinationRule and VirtualService in the default namespace).
func cnnTLSEntry() *model.IstioConfig[*networking.ServiceEntry] {
	return se("cnn", &networking.ServiceEntry{
		Hosts:      []string{"edition.cnn.com"},
		Ports:      []*networking.ServicePort{{Number: 443, Name: "tls", Protocol: "TLS"}},
		Resolution: networking.ServiceEntry_DNS,
	})
}

func egressHTTPSTask(m *model.Model) {
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnTLSEntry())
	g := gateway("istio-egressgateway", &networking.Server{
		Port:  &networking.Port{Number: 443, Name: "tls", Protocol: "TLS"},
		Hosts: []string{"edition.cnn.com"}, Tls: &networking.ServerTLSSettings{Mode: networking.ServerTLSSettings_PASSTHROUGH},
	})
	g.Spec.Selector = model.GatewayLabels(model.EgressGatewayName)
	m.Istio.Gateways = append(m.Istio.Gateways, g)
	m.Istio.DestinationRules = append(m.Istio.DestinationRules, dr("egressgateway-for-cnn", &networking.DestinationRule{
		Host: "istio-egressgateway.istio-system.svc.cluster.local", Subsets: []*networking.Subset{{Name: "cnn"}},
	}))
	toGateway := tlsDest("istio-egressgateway.istio-system.svc.cluster.local", 443, 0)
	toGateway.Destination.Subset = "cnn"
	m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("direct-cnn-through-egress-gateway", &networking.VirtualService{
		Hosts: []string{"edition.cnn.com"}, Gateways: []string{"mesh", "istio-egressgateway"},
		Tls: []*networking.TLSRoute{
			tlsRoute([]string{"edition.cnn.com"}, 443, []string{"mesh"}, toGateway),
			tlsRoute([]string{"edition.cnn.com"}, 443, []string{"istio-egressgateway"}, tlsDest("edition.cnn.com", 443, 100)),
		},
	}))
}

// chainSummary is what a test reads of one filter chain: its SNI match and the
// tcp_proxy's clusters (weights after a colon when weighted).
type chainSummary struct {
	sni      string
	clusters string
}

func summarize(t *testing.T, fc *listener.FilterChain) chainSummary {
	t.Helper()
	fs := fc.GetFilters()
	if len(fs) == 0 {
		t.Fatalf("chain %q has no filters", fc.GetName())
	}
	tp := tcpProxyOf(t, fs[len(fs)-1])
	var cs []string
	if c := tp.GetCluster(); c != "" {
		cs = append(cs, c)
	}
	for _, w := range tp.GetWeightedClusters().GetClusters() {
		cs = append(cs, fmt.Sprintf("%s:%d", w.GetName(), w.GetWeight()))
	}
	return chainSummary{sni: strings.Join(fc.GetFilterChainMatch().GetServerNames(), ","), clusters: strings.Join(cs, " ")}
}

// listenerNamed returns the listener called name of res, failing without it.
func listenerNamed(t *testing.T, res map[resource.Type][]types.Resource, name string) *listener.Listener {
	t.Helper()
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == name {
			return l
		}
	}
	t.Fatalf("no listener %s in %q", name, names(res[resource.ListenerType]))
	return nil
}

// listenerShape is a listener's routing as a test reads it: whether it inspects TLS,
// its chains in order and its default chain ("" when none).
type listenerShape struct {
	inspector bool
	chains    []chainSummary
	def       chainSummary
}

func shapeOf(t *testing.T, l *listener.Listener) listenerShape {
	t.Helper()
	var s listenerShape
	for _, lf := range l.GetListenerFilters() {
		s.inspector = s.inspector || lf.GetName() == wellknown.TlsInspector
	}
	for _, fc := range l.GetFilterChains() {
		s.chains = append(s.chains, summarize(t, fc))
	}
	if d := l.GetDefaultFilterChain(); d != nil {
		s.def = summarize(t, d)
	}
	return s
}

const (
	cnnCluster     = "outbound|443||edition.cnn.com"
	egressCNN      = "outbound|443|cnn|istio-egressgateway.istio-system.svc.cluster.local"
	egressCluster  = "outbound|443||istio-egressgateway.istio-system.svc.cluster.local"
	googleCluster  = "outbound|443||www.google.com"
	webCluster     = "outbound|443||web.default.svc.cluster.local"
	webV1, webV2   = "outbound|443|v1|web.default.svc.cluster.local", "outbound|443|v2|web.default.svc.cluster.local"
	passthroughDef = PassthroughCluster
)

// The HTTPS egress gateway task, as istiod builds it: the sidecar's 0.0.0.0_443 (the
// ServiceEntry has no address) inspects TLS and sends SNI edition.cnn.com to the
// gateway's cnn subset, anything else to PassthroughCluster; the gateway Service's own
// HTTPS port is a VIP listener with one match-less chain; the gateway's 0.0.0.0_8443
// passes SNI edition.cnn.com through to the site. The VirtualService's gateway match
// does not reach the sidecar, nor its mesh match the gateway.
func TestSidecarTLSRouteEgressGateway(t *testing.T) {
	t.Parallel()
	m := egressGatewayModel(egressHTTPSTask)
	side := generate(t, m, "productpage-v1")
	testutil.Golden(t, "sidecar-tls-egress-gateway", dumpJSON(t, map[resource.Type][]types.Resource{
		resource.ListenerType: {listenerNamed(t, side, "0.0.0.0_443"), listenerNamed(t, side, "10.96.0.24_443")},
	}))
	want := map[string]listenerShape{
		"0.0.0.0_443": {
			inspector: true,
			chains:    []chainSummary{{sni: "edition.cnn.com", clusters: egressCNN}},
			def:       chainSummary{clusters: passthroughDef},
		},
		"10.96.0.24_443": {chains: []chainSummary{{clusters: egressCluster}}},
	}
	for name, w := range want {
		if got := shapeOf(t, listenerNamed(t, side, name)); !shapesEqual(got, w) {
			t.Errorf("sidecar listener %s = %+v, want %+v", name, got, w)
		}
	}
	if !slices.Contains(names(side[resource.ClusterType]), egressCNN) {
		t.Errorf("sidecar clusters %q lack %s", names(side[resource.ClusterType]), egressCNN)
	}
	gw := generateGateway(t, m, egressPod)
	wantGW := listenerShape{inspector: true, chains: []chainSummary{{sni: "edition.cnn.com", clusters: cnnCluster}}}
	if got := shapeOf(t, listenerNamed(t, gw, "0.0.0.0_8443")); !shapesEqual(got, wantGW) {
		t.Errorf("gateway listener 0.0.0.0_8443 = %+v, want %+v", got, wantGW)
	}
}

func shapesEqual(a, b listenerShape) bool {
	return a.inspector == b.inspector && slices.Equal(a.chains, b.chains) && a.def == b.def
}

// Sidecar TLS routing cases, each the shape of one listener on productpage-v1.
func TestSidecarTLSRoutes(t *testing.T) {
	t.Parallel()
	googleTLS := func(m *model.Model) {
		m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("google", &networking.ServiceEntry{
			Hosts:      []string{"www.google.com"},
			Ports:      []*networking.ServicePort{{Number: 443, Name: "https", Protocol: "HTTPS"}},
			Resolution: networking.ServiceEntry_DNS, Location: networking.ServiceEntry_MESH_EXTERNAL,
		}))
	}
	webSubsets := dr("web", &networking.DestinationRule{Host: "web", Subsets: []*networking.Subset{
		{Name: "v1", Labels: map[string]string{"version": "v1"}}, {Name: "v2", Labels: map[string]string{"version": "v2"}},
	}})
	webDest := func(subset string, weight int32) *networking.RouteDestination {
		d := tlsDest("web.default.svc.cluster.local", 443, weight)
		d.Destination.Subset = subset
		return d
	}
	tests := []struct {
		name     string
		mutate   func(*model.Model)
		listener string
		want     listenerShape
	}{{
		name:     "https Service port without tls routes: one match-less chain to the service",
		mutate:   func(*model.Model) {},
		listener: "10.96.0.25_443",
		want:     listenerShape{chains: []chainSummary{{clusters: webCluster}}},
	}, {
		name: "tls routes on a VIP: a chain per match applying to the mesh and port, weighted; the rest falls through",
		mutate: func(m *model.Model) {
			m.Istio.DestinationRules = append(m.Istio.DestinationRules, webSubsets)
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("web", &networking.VirtualService{
				Hosts: []string{"web", "*.web.example.com"},
				Tls: []*networking.TLSRoute{
					tlsRoute([]string{"web.default.svc.cluster.local", "a.web.example.com"}, 443, []string{"mesh"}, webDest("v1", 80), webDest("v2", 20)),
					tlsRoute([]string{"b.web.example.com"}, 8443, nil, webDest("v2", 0)),                   // another port
					tlsRoute([]string{"c.web.example.com"}, 0, []string{"some-gateway"}, webDest("v2", 0)), // not the mesh
					tlsRoute([]string{"web.default.svc.cluster.local", "a.web.example.com"}, 0, nil, webDest("v2", 0)),
					tlsRoute([]string{"*.web.example.com"}, 0, nil, webDest("v2", 0)),
				},
				// istiod ignores tcp routes on a TLS port.
				Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{tlsDest("db.default.svc.cluster.local", 5432, 0)}}},
			}))
		},
		listener: "10.96.0.25_443",
		want: listenerShape{inspector: true, chains: []chainSummary{
			{sni: "a.web.example.com,web.default.svc.cluster.local", clusters: webV1 + ":80 " + webV2 + ":20"},
			{sni: "*.web.example.com", clusters: webV2},
		}, def: chainSummary{clusters: PassthroughCluster}},
	}, {
		name: "an SNI no route names under REGISTRY_ONLY goes to the black hole",
		mutate: func(m *model.Model) {
			m.Mesh.OutboundTrafficPolicy = model.RegistryOnly
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("web", &networking.VirtualService{
				Hosts: []string{"web"},
				Tls:   []*networking.TLSRoute{tlsRoute([]string{"web"}, 0, nil, tlsDest("web", 443, 0))},
			}))
		},
		listener: "10.96.0.25_443",
		want: listenerShape{inspector: true, chains: []chainSummary{{sni: "web", clusters: webCluster}},
			def: chainSummary{clusters: BlackHoleCluster}},
	}, {
		name: "two external TLS hosts on one port: a chain per host by SNI",
		mutate: func(m *model.Model) {
			googleTLS(m)
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnTLSEntry())
		},
		listener: "0.0.0.0_443",
		want: listenerShape{inspector: true, chains: []chainSummary{
			{sni: "www.google.com", clusters: googleCluster},
			{sni: "edition.cnn.com", clusters: cnnCluster},
		}, def: chainSummary{clusters: PassthroughCluster}},
	}, {
		name: "a mesh tls route of one external host: its SNI to the route's weighted destinations, the other host as before",
		mutate: func(m *model.Model) {
			googleTLS(m)
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnTLSEntry())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("google", &networking.VirtualService{
				Hosts: []string{"www.google.com"},
				Tls: []*networking.TLSRoute{tlsRoute([]string{"www.google.com"}, 443, nil,
					tlsDest("www.google.com", 443, 50), tlsDest("edition.cnn.com", 443, 50))},
			}))
		},
		listener: "0.0.0.0_443",
		want: listenerShape{inspector: true, chains: []chainSummary{
			{sni: "www.google.com", clusters: googleCluster + ":50 " + cnnCluster + ":50"},
			{sni: "edition.cnn.com", clusters: cnnCluster},
		}, def: chainSummary{clusters: PassthroughCluster}},
	}, {
		name: "a route claiming another host's SNI wins it (the first chain of a match is kept)",
		mutate: func(m *model.Model) {
			googleTLS(m)
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, cnnTLSEntry())
			m.Istio.VirtualServices = append(m.Istio.VirtualServices, vs("google", &networking.VirtualService{
				Hosts: []string{"www.google.com", "edition.cnn.com"},
				Tls:   []*networking.TLSRoute{tlsRoute([]string{"edition.cnn.com"}, 0, nil, tlsDest("www.google.com", 443, 0))},
			}))
		},
		listener: "0.0.0.0_443",
		want: listenerShape{inspector: true, chains: []chainSummary{
			{sni: "edition.cnn.com", clusters: googleCluster},
		}, def: chainSummary{clusters: PassthroughCluster}},
	}, {
		name: "a TCP entry on the port of TLS entries is the default chain",
		mutate: func(m *model.Model) {
			googleTLS(m)
			m.Istio.ServiceEntries = append(m.Istio.ServiceEntries, se("raw", &networking.ServiceEntry{
				Hosts:      []string{"raw.example.com"},
				Ports:      []*networking.ServicePort{{Number: 443, Name: "tcp", Protocol: "TCP"}},
				Resolution: networking.ServiceEntry_DNS,
			}))
		},
		listener: "0.0.0.0_443",
		want: listenerShape{inspector: true, chains: []chainSummary{{sni: "www.google.com", clusters: googleCluster}},
			def: chainSummary{clusters: "outbound|443||raw.example.com"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := egressGatewayModel(tc.mutate)
			res := generate(t, m, "productpage-v1")
			for _, r := range res[resource.ListenerType] {
				validateDeep(t, "listener", r)
			}
			if got := shapeOf(t, listenerNamed(t, res, tc.listener)); !shapesEqual(got, tc.want) {
				t.Errorf("listener %s =\n  %+v\nwant\n  %+v", tc.listener, got, tc.want)
			}
		})
	}
}
