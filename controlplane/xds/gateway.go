package xds

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A router pod (a standalone gateway, model.Pod.Router) gets what istiod builds for a
// gateway proxy: no virtualOutbound or virtualInbound, one listener per port its
// Gateways' servers listen on, bound to the port ("0.0.0.0_8080"), route configurations
// named as Istio's ("http.8080" for plaintext HTTP servers, "https.443.https.<gateway>.
// <namespace>" for each HTTPS server terminating TLS) whose virtual hosts are the hosts
// the bound VirtualServices share with the servers, and the outbound clusters of the
// mesh (see gatewayClusters).

// gatewayServer is one server of a Gateway bound to a router pod.
type gatewayServer struct {
	gw *model.IstioConfig[*networking.Gateway]
	s  *networking.Server
	// port is the port the proxy listens on: the target port of the gateway Service's
	// port numbered as the server's (80 -> 8080), else the server's own number, as
	// istiod resolves it.
	port  uint16
	proto string // upper case
}

// terminatesTLS reports whether the server is HTTPS or TLS with TLS terminated here
// (SIMPLE, MUTUAL, ISTIO_MUTUAL).
func (g gatewayServer) terminatesTLS() bool {
	return (g.proto == "HTTPS" || g.proto == "TLS") && g.s.GetTls() != nil && !g.passthrough()
}

// passthrough reports whether the server passes the client's TLS through untouched,
// routed by SNI with the bound VirtualServices' tls routes (mode PASSTHROUGH).
func (g gatewayServer) passthrough() bool {
	// PASSTHROUGH is the zero mode: a server without tls is not one.
	return g.s.GetTls() != nil && g.s.GetTls().GetMode() == networking.ServerTLSSettings_PASSTHROUGH
}

// terminatesHTTPS reports whether the server is HTTPS with TLS terminated here, so
// its requests are routed by HTTP routes.
func (g gatewayServer) terminatesHTTPS() bool {
	return g.proto == "HTTPS" && g.terminatesTLS()
}

// isHTTP reports whether the server is plaintext HTTP (HTTP, HTTP2, GRPC).
func (g gatewayServer) isHTTP() bool {
	return g.proto == "HTTP" || g.proto == "HTTP2" || g.proto == "GRPC"
}

// routeName is the server's route configuration name, as Istio's gatewayRDSRouteName;
// "" for servers without HTTP routes (TCP, TLS, passthrough).
func (g gatewayServer) routeName() string {
	switch {
	case g.isHTTP():
		return GatewayHTTPRouteName(g.port)
	case g.terminatesHTTPS():
		return fmt.Sprintf("https.%d.%s.%s.%s", g.s.GetPort().GetNumber(), g.s.GetPort().GetName(), g.gw.Name, g.gw.Namespace)
	}
	return ""
}

// GatewayHTTPRouteName is the route configuration of a gateway's plaintext HTTP servers
// on a listen port: "http.8080".
func GatewayHTTPRouteName(port uint16) string {
	return "http." + strconv.Itoa(int(port))
}

// GatewayListenerName is the name of a gateway listener: "0.0.0.0_8080".
func GatewayListenerName(port uint16) string {
	return wildcardAddr + "_" + strconv.Itoa(int(port))
}

// gatewayServers returns the servers of the Gateways bound to a router pod, in model
// order, each with the port the proxy listens on.
func gatewayServers(m *model.Model, pod *model.Pod) []gatewayServer {
	targets := map[uint32]uint16{}
	for _, svc := range m.ServicesFor(pod) {
		for _, p := range svc.Ports {
			if _, ok := targets[uint32(p.Port)]; !ok {
				targets[uint32(p.Port)] = p.TargetPort
			}
		}
	}
	var out []gatewayServer
	for _, gw := range m.GatewaysFor(pod) {
		for _, s := range gw.Spec.GetServers() {
			n := s.GetPort().GetNumber()
			port := uint16(n)
			if t, ok := targets[n]; ok {
				port = t
			}
			out = append(out, gatewayServer{gw: gw, s: s, port: port, proto: strings.ToUpper(s.GetPort().GetProtocol())})
		}
	}
	return out
}

// gatewayListeners returns a router pod's listeners: one per listen port, in port
// order. On a port, plaintext HTTP servers share one chain routed by "http.<port>";
// HTTPS servers terminating TLS get a chain each, matched by SNI (their hosts); TCP
// servers a tcp_proxy. A port whose servers cannot share it (plaintext HTTP beside
// others, as Istio refuses when merging gateways) keeps the first kind and drops the
// rest, as istiod does.
func gatewayListeners(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	byPort := map[uint16][]gatewayServer{}
	for _, g := range gatewayServers(m, pod) {
		byPort[g.port] = append(byPort[g.port], g)
	}
	var out []types.Resource
	for _, port := range slices.Sorted(mapsKeys(byPort)) {
		az, err := gatewayAuthzFor(m, pod, port)
		if err != nil {
			return nil, err
		}
		l, err := gatewayListener(m, port, byPort[port], az)
		if err != nil {
			return nil, fmt.Errorf("build listener %s: %w", GatewayListenerName(port), err)
		}
		if l != nil {
			out = append(out, l)
		}
	}
	logs, err := accessLogs(MeshFor(m, pod))
	if err != nil {
		return nil, err
	}
	if err := addPodTracing(out, m, pod, true); err != nil { // tracing.go
		return nil, err
	}
	if err := addAccessLogs(out, logs); err != nil {
		return nil, err
	}
	return out, addGatewayTelemetry(out, metricsFor(m, pod)) // telemetry.go, telemetry_metrics.go
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// gatewayAuthz are the authentication and authorization filters of a gateway pod's
// chains, as istiod's listener builder gives a gateway: on an HTTP chain the JWT filter
// of the RequestAuthentications and the RBAC filters of the AuthorizationPolicies that
// select the pod (or target its Gateway), ahead of the router; on a TCP chain (TLS
// passthrough, TLS terminated to a tcp route, TCP) the network RBAC filters, ahead of
// tcp_proxy (buildCompleteNetworkFilters).
type gatewayAuthz struct {
	http []*hcm.HttpFilter
	tcp  []*listener.Filter
}

// gatewayAuthzFor is pod's gatewayAuthz on port: its HTTP filters include the
// TrafficExtensions targeting its Gateway that match the port (trafficextension.go).
func gatewayAuthzFor(m *model.Model, pod *model.Pod, port uint16) (gatewayAuthz, error) {
	a := authzFor(m, pod, false)
	ext, err := gatewayExtensions(m, pod, port)
	if err != nil {
		return gatewayAuthz{}, err
	}
	a.ext = ext
	h, err := a.httpFilters()
	if err != nil {
		return gatewayAuthz{}, err
	}
	t, err := authzFor(m, pod, true).networkFilters()
	if err != nil {
		return gatewayAuthz{}, err
	}
	return gatewayAuthz{http: h, tcp: t}, nil
}

// onTCP returns a TCP chain's filters after the network RBAC filters.
func (az gatewayAuthz) onTCP(filters []*listener.Filter) []*listener.Filter {
	if len(az.tcp) == 0 {
		return filters
	}
	return append(slices.Clone(az.tcp), filters...)
}

func gatewayListener(m *model.Model, port uint16, servers []gatewayServer, az gatewayAuthz) (*listener.Listener, error) {
	name := GatewayListenerName(port)
	var chains []*listener.FilterChain
	sni := false
	first := servers[0]
	tlsHosts := map[string]bool{} // SNI hosts of the port's passthrough chains so far
	for i, g := range servers {
		switch {
		case first.isHTTP():
			if i > 0 {
				continue // one chain serves every plaintext HTTP server of the port
			}
			f, err := gatewayHCM(name, g.routeName(), az.http)
			if err != nil {
				return nil, err
			}
			chains = append(chains, &listener.FilterChain{Filters: []*listener.Filter{f}, Metadata: gatewayOrigin(g)})
		case g.isHTTP():
			continue // a plaintext server cannot share a port with TLS ones
		case g.terminatesHTTPS():
			f, err := gatewayHCM(name, g.routeName(), az.http)
			if err != nil {
				return nil, err
			}
			ts, err := gatewayTLSSocket(g)
			if err != nil {
				return nil, err
			}
			chains = append(chains, &listener.FilterChain{
				FilterChainMatch: &listener.FilterChainMatch{ServerNames: sniHosts(g.s)},
				Filters:          []*listener.Filter{f},
				TransportSocket:  ts,
				Metadata:         gatewayOrigin(g),
			})
			sni = sni || len(sniHosts(g.s)) > 0
		case g.passthrough():
			cs, err := gatewayPassthroughChains(m, g, tlsHosts)
			if err != nil {
				return nil, err
			}
			for _, c := range cs {
				c.Filters = az.onTCP(c.Filters)
			}
			chains = append(chains, cs...)
			sni = sni || len(cs) > 0
		case g.terminatesTLS(): // a TLS server: TLS ends here, then its tcp route
			c, err := terminatedTCPChain(m, g)
			if err != nil {
				return nil, err
			}
			if c != nil {
				c.Filters = az.onTCP(c.Filters)
				chains = append(chains, c)
				sni = sni || len(c.GetFilterChainMatch().GetServerNames()) > 0
			}
		case g.proto == "TCP":
			f, err := gatewayTCPFilter(m, g)
			if err != nil {
				return nil, err
			}
			if f != nil {
				chains = append(chains, &listener.FilterChain{Filters: az.onTCP([]*listener.Filter{f}), Metadata: gatewayOrigin(g)})
			}
		}
	}
	if len(chains) == 0 {
		return nil, nil
	}
	l := &listener.Listener{
		Name:             name,
		Address:          socketAddress(wildcardAddr, port),
		TrafficDirection: core.TrafficDirection_OUTBOUND,
		FilterChains:     chains,
		// Istio's gateway listeners take one connection per socket event, as the
		// sidecar's bound listeners.
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(maxConnectionsPerSocketEvent),
	}
	if sni {
		ti, err := typed(&tlsinspector.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)}) // istiod's xdsfilters.TLSInspector
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listener.ListenerFilter{{Name: wellknown.TlsInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: ti}}}
	}
	return l, nil
}

// gatewayOrigin names the Gateway a chain serves, as the config metadata istioctl reads.
func gatewayOrigin(g gatewayServer) *core.Metadata {
	return configMetadata(IstioConfigPath("gateway", g.gw.Namespace, g.gw.Name), "")
}

// gatewayHCM is a gateway chain's HTTP connection manager, as Istio's
// buildGatewayConnectionManager: the client's address is the remote address
// (use_remote_address), x-forwarded-client-cert is sanitized and set from a client
// certificate, the server header is istio-envoy (a gateway's listener class is not
// sidecar outbound, the one that keeps Envoy's "envoy"), and routes come over RDS. The
// gateway's authentication and authorization filters (pre) go first.
func gatewayHCM(listenerName, routeName string, pre []*hcm.HttpFilter) (*listener.Filter, error) {
	return hcmFilter("outbound_"+listenerName, true, func(m *hcm.HttpConnectionManager) {
		if len(pre) > 0 {
			m.HttpFilters = append(slices.Clone(pre), m.HttpFilters...)
		}
		m.ServerName = InboundServerName
		m.UseRemoteAddress = wrapperspb.Bool(true)
		m.ForwardClientCertDetails = hcm.HttpConnectionManager_SANITIZE_SET
		// Istio also sets cert (the PEM of the client's certificate), which the built-in
		// proxy does not implement; Subject, URI and DNS are what Istio's tasks read.
		m.SetCurrentClientCertDetails = &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
			Subject: wrapperspb.Bool(true), Dns: true, Uri: true,
		}
		m.RouteSpecifier = &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: routeName,
			ConfigSource:    adsConfigSource(),
		}}
	})
}

// sniHosts are the server names a TLS server's chain matches, as Istio's
// GetSNIHostsForServer: its hosts without the namespace part; none when one is "*".
func sniHosts(s *networking.Server) []string {
	var out []string
	for _, h := range s.GetHosts() {
		_, host, ok := strings.Cut(h, "/")
		if !ok {
			host = h
		}
		if host == "*" {
			return nil
		}
		if !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	slices.Sort(out)
	return out
}

// gatewayTCPFilter is the tcp_proxy of a TCP server: the first tcp route of a
// VirtualService bound to the Gateway whose match (if any) names the server's port; nil
// when none does (istiod then builds no chain).
func gatewayTCPFilter(m *model.Model, g gatewayServer) (*listener.Filter, error) {
	byHost := servicePortsByHost(m)
	for _, vs := range boundVirtualServices(m, g.gw) {
		if len(gatewayHostsFor(g, vs)) == 0 {
			continue
		}
		r := tcpRouteFor(vs, uint16(g.s.GetPort().GetNumber()))
		if r == nil || len(r.GetRoute()) == 0 {
			continue
		}
		return networkRouteFilter(m, vs, r.GetRoute(), uint16(g.s.GetPort().GetNumber()), byHost)
	}
	return nil, nil
}

// boundVirtualServices returns the VirtualServices naming the Gateway in their gateways.
func boundVirtualServices(m *model.Model, gw *model.IstioConfig[*networking.Gateway]) []*model.IstioConfig[*networking.VirtualService] {
	var out []*model.IstioConfig[*networking.VirtualService]
	for _, vs := range m.Istio.VirtualServices {
		if model.BindsGateway(vs.Spec, vs.Namespace, gw.Namespace, gw.Name) {
			out = append(out, vs)
		}
	}
	return out
}

// gatewayHostsFor returns the hosts a VirtualService serves on a server, as Istio's
// host intersection: a server host "[ns/]h" counts for the VirtualService when ns is
// "*", its namespace, or "." and the Gateway's namespace is its; then each pair of
// hosts where one covers the other gives the narrower one ("*" and "a.com" give
// "a.com"; "*.example.com" and "*.example.com" give "*.example.com").
func gatewayHostsFor(g gatewayServer, vs *model.IstioConfig[*networking.VirtualService]) []string {
	var out []string
	for _, sh := range g.s.GetHosts() {
		ns, host, ok := strings.Cut(sh, "/")
		if !ok {
			ns, host = "*", sh
		}
		if ns != "*" && (ns != "." || g.gw.Namespace != vs.Namespace) && ns != vs.Namespace {
			continue
		}
		for _, vh := range vs.Spec.GetHosts() {
			var h string
			switch {
			case model.HostCovers(host, vh):
				h = vh
			case model.HostCovers(vh, host):
				h = host
			default:
				continue
			}
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// gatewayRoutes returns a router pod's route configurations, one per route name its
// servers have (see gatewayServer.routeName), as Istio's buildGatewayHTTPRouteConfig:
// a virtual host "<host>:<server port>" per host the bound VirtualServices share with a
// server, the routes of every VirtualService with that host appended in order; a route
// configuration without any gets Istio's "blackhole:<port>" virtual host, which answers
// every request 404.
func gatewayRoutes(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	byName := map[string][]gatewayServer{}
	for _, g := range gatewayServers(m, pod) {
		if n := g.routeName(); n != "" {
			byName[n] = append(byName[n], g)
		}
	}
	byHost := servicePortsByHost(m)
	var out []types.Resource
	for _, name := range slices.Sorted(mapsKeys(byName)) {
		servers := byName[name]
		vhosts := map[string]*route.VirtualHost{}
		for _, g := range servers {
			port := uint16(g.s.GetPort().GetNumber())
			for _, vs := range boundVirtualServices(m, g.gw) {
				hosts := gatewayHostsFor(g, vs)
				if len(hosts) == 0 {
					continue
				}
				rs, err := vsRouteBuilder{m: m, pod: pod, vs: vs, port: port, byHost: byHost, gateway: g.gw}.routes()
				if err != nil {
					return nil, fmt.Errorf("build route %s: VirtualService %s/%s: %w", name, vs.Namespace, vs.Name, err)
				}
				for _, h := range hosts {
					h = strings.ToLower(h)
					if vh, ok := vhosts[h]; ok {
						vh.Routes = append(vh.Routes, rs...)
						continue
					}
					vhosts[h] = &route.VirtualHost{
						Name:                       h + ":" + strconv.Itoa(int(port)),
						Domains:                    []string{h},
						Routes:                     slices.Clone(rs),
						IncludeRequestAttemptCount: true,
					}
				}
			}
		}
		var vs []*route.VirtualHost
		for _, vh := range vhosts {
			vs = append(vs, vh)
		}
		slices.SortFunc(vs, func(a, b *route.VirtualHost) int { return cmp.Compare(a.GetName(), b.GetName()) })
		if len(vs) == 0 {
			vs = []*route.VirtualHost{{
				Name:    "blackhole:" + strconv.Itoa(int(servers[0].s.GetPort().GetNumber())),
				Domains: []string{"*"},
			}}
		}
		out = append(out, &route.RouteConfiguration{
			Name:                           name,
			VirtualHosts:                   vs,
			ValidateClusters:               wrapperspb.Bool(false),
			IgnorePortInHostMatching:       true,
			MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(1 << 20),
		})
	}
	return out, nil
}
