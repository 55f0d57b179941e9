package xds

import (
	"fmt"
	"slices"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A waypoint routes each HTTP service port by the VirtualServices of that service (those
// a Gateway API HTTPRoute with the Service as parent becomes, GAMMA, among them), as
// istiod's buildWaypointInboundHTTPRouteConfig:
//
//   - the VirtualServices bound to the mesh, in the waypoint's namespace or the
//     service's, one of whose hosts (short names resolved in the VirtualService's
//     namespace; "*.x" a suffix) names the service; all of them, their routes merged
//     in order (a sidecar takes one VirtualService per host);
//   - their http routes as a sidecar's (vsRouteBuilder), a match with sourceLabels
//     dropped (no source labels in ambient);
//   - each destination to the waypoint's own inbound-vip cluster of that port,
//     inbound-vip|<port>|http[/<subset>]|<host>, when this waypoint serves the
//     destination service, else to the outbound cluster outbound|<port>|<subset>|<host>;
//   - one virtual host "inbound|http|<port>" of domains "*"; no VirtualService (or no
//     route left) keeps the default route to the port's cluster.

// waypointVirtualServices returns the mesh VirtualServices that route svc in waypoint w.
func waypointVirtualServices(m *model.Model, w *model.Waypoint, svc *model.Service) []*model.IstioConfig[*networking.VirtualService] {
	var out []*model.IstioConfig[*networking.VirtualService]
	for _, vs := range m.Istio.VirtualServices {
		if vs == nil || vs.Spec == nil || !model.AppliesToMesh(vs.Spec) {
			continue
		}
		if vs.Namespace != w.Namespace && vs.Namespace != svc.Namespace {
			continue
		}
		for _, h := range vs.Spec.GetHosts() {
			if hostMatches(resolveHost(m, h, vs.Namespace), svc.Hostname()) {
				out = append(out, vs)
				break
			}
		}
	}
	return out
}

// hostMatches reports whether a VirtualService host (resolved) names hostname: equal,
// "*" any, "*.suffix" any name ending in ".suffix".
func hostMatches(vsHost, hostname string) bool {
	switch {
	case vsHost == hostname, vsHost == "*":
		return true
	case strings.HasPrefix(vsHost, "*."):
		return strings.HasSuffix(hostname, vsHost[1:])
	}
	return false
}

// waypointRoutes returns the routes of service port p in waypoint w from its
// VirtualServices; nil when none routes it.
func waypointRoutes(m *model.Model, w *model.Waypoint, served map[string]*model.Service, p waypointPort) ([]*route.Route, error) {
	var out []*route.Route
	for _, vs := range waypointVirtualServices(m, w, p.svc) {
		if len(vs.Spec.GetHttp()) == 0 {
			continue
		}
		b := vsRouteBuilder{m: m, vs: vs, port: p.port.Port}
		b.cluster = func(d *networking.Destination) string {
			return waypointCluster(m, served, vs.Namespace, d, p.port.Port)
		}
		rs, err := b.routes()
		if err != nil {
			return nil, fmt.Errorf("VirtualService %s/%s: %w", vs.Namespace, vs.Name, err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// waypointCluster is the cluster of a route destination in a waypoint, as istiod's
// getWaypointDestinationCluster: the destination's port, else its service's only port,
// else the listener's; the waypoint's inbound-vip cluster of that port and protocol
// (and subset) when it serves the service, else the outbound one.
func waypointCluster(m *model.Model, served map[string]*model.Service, ns string, d *networking.Destination, listenPort uint16) string {
	host := resolveHost(m, d.GetHost(), ns)
	if host == "" {
		return "UnknownService"
	}
	port := listenPort
	svc := serviceByHostname(m, host)
	if d.GetPort() != nil {
		port = uint16(d.GetPort().GetNumber())
	} else if svc != nil && len(svc.Ports) == 1 {
		port = svc.Ports[0].Port
	}
	if served[host] == nil {
		return OutboundClusterName(port, d.GetSubset(), host)
	}
	subset := "http"
	for _, sp := range svc.Ports {
		if sp.Port == port && !sp.Protocol.IsHTTPOrSniffed() {
			subset = "tcp"
		}
	}
	if d.GetSubset() != "" {
		subset += "/" + d.GetSubset()
	}
	return InboundVIPClusterName(port, subset, host)
}

// serviceByHostname returns the Kubernetes Service of hostname, or nil.
func serviceByHostname(m *model.Model, hostname string) *model.Service {
	for _, s := range m.Services {
		if s.Hostname() == hostname {
			return s
		}
	}
	return nil
}

// waypointRouteConfig is the inline route configuration of HTTP service port p: its
// VirtualServices' routes, else the default route to the port's cluster.
func waypointRouteConfig(m *model.Model, w *model.Waypoint, served map[string]*model.Service, p waypointPort) (*route.RouteConfiguration, error) {
	name := p.name()
	vhost := "inbound|http|" + portString(p.port.Port)
	rs, err := waypointRoutes(m, w, served, p)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return inboundVIPRoute(name, vhost, name, p.svc.Hostname()+":"+portString(p.port.Port)+"/*"), nil
	}
	return &route.RouteConfiguration{
		Name:             name,
		VirtualHosts:     []*route.VirtualHost{{Name: vhost, Domains: []string{"*"}, Routes: rs}},
		ValidateClusters: wrapperspb.Bool(false),
	}, nil
}

// waypointTCPProxy sets where a TCP service port's tcp_proxy sends connections, as
// istiod's buildWaypointInboundVIPTCPFilterChain: the destinations of the port's L4 route
// (waypointL4Route), one cluster or weighted ones (weight 0 left out), each the
// waypoint's cluster of that destination; without one, the port's own cluster.
func waypointTCPProxy(m *model.Model, served map[string]*model.Service, w *model.Waypoint, p waypointPort, tp *tcpproxy.TcpProxy) *tcpproxy.TcpProxy {
	if vs, dests := waypointL4Route(waypointVirtualServices(m, w, p.svc), p.svc.Hostname(), p.port.Port); len(dests) > 0 {
		if len(dests) == 1 {
			tp.ClusterSpecifier = &tcpproxy.TcpProxy_Cluster{Cluster: waypointCluster(m, served, vs.Namespace, dests[0].GetDestination(), p.port.Port)}
			return tp
		}
		wc := &tcpproxy.TcpProxy_WeightedCluster{}
		for _, d := range dests {
			if d.GetWeight() > 0 {
				wc.Clusters = append(wc.Clusters, &tcpproxy.TcpProxy_WeightedCluster_ClusterWeight{
					Name: waypointCluster(m, served, vs.Namespace, d.GetDestination(), p.port.Port), Weight: uint32(d.GetWeight()),
				})
			}
		}
		tp.ClusterSpecifier = &tcpproxy.TcpProxy_WeightedClusters{WeightedClusters: wc}
		return tp
	}
	tp.ClusterSpecifier = &tcpproxy.TcpProxy_Cluster{Cluster: p.name()}
	return tp
}

// waypointL4Route returns the destinations a waypoint sends a TCP port's connections to,
// and the VirtualService they come from, as istiod's getWaypointTCPRoutes: a tls route of
// any of vss first (Gateway API orders TLSRoute before TCPRoute, GEP-1294), then the
// first tcp route that applies to port. The waypoint has one chain per service port and
// no SNI matching, so a tls route counts only when it has no match or a match whose only
// SNI is the service's own hostname (the form a TLSRoute with the Service as parent
// takes). None: nil.
func waypointL4Route(vss []*model.IstioConfig[*networking.VirtualService], hostname string, port uint16) (*model.IstioConfig[*networking.VirtualService], []*networking.RouteDestination) {
	for _, vs := range vss {
		for _, r := range vs.Spec.GetTls() {
			if waypointTLSRouteApplies(r, hostname, port) {
				return vs, r.GetRoute()
			}
		}
	}
	for _, vs := range vss {
		if r := tcpRouteFor(vs, port); r != nil {
			return vs, r.GetRoute()
		}
	}
	return nil, nil
}

// waypointTLSRouteApplies reports whether tls route r carries a waypoint's port
// connections to service hostname: it has no match, or a match naming hostname as its
// only SNI, the port (or none), no gateway but the mesh, and no source labels or
// namespace (a waypoint knows neither of its clients).
func waypointTLSRouteApplies(r *networking.TLSRoute, hostname string, port uint16) bool {
	if len(r.GetMatch()) == 0 {
		return true
	}
	for _, m := range r.GetMatch() {
		if len(m.GetSniHosts()) != 1 || m.GetSniHosts()[0] != hostname {
			continue
		}
		meshGateway := len(m.GetGateways()) == 0 || slices.Contains(m.GetGateways(), model.MeshGateway)
		if meshGateway && (m.GetPort() == 0 || m.GetPort() == uint32(port)) && len(m.GetSourceLabels()) == 0 && m.GetSourceNamespace() == "" {
			return true
		}
	}
	return false
}
