package xds

import (
	"slices"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Gateway servers that do not end in HTTP routes, as istiod's
// createGatewayTCPFilterChainOpts: a PASSTHROUGH server (HTTPS or TLS) gets a chain per
// matching tls route of a bound VirtualService, matched by the route's SNI hosts and
// proxying the client's TLS untouched (the backend presents its own certificate); a
// TLS server with SIMPLE or MUTUAL ends TLS with its credential and proxies the bytes
// by the bound VirtualService's tcp route.

// gatewayPassthroughChains returns the chains of a PASSTHROUGH server, as Istio's
// buildGatewayNetworkFiltersFromTLSRoutes: for each bound VirtualService sharing a
// host with the server, each tls route with destinations, each match applying to the
// server (port unset or the server's number, gateways unset or naming this Gateway)
// becomes a chain on server_names = the match's sniHosts. A match repeating an SNI
// host an earlier chain of the listen port has (seen) is skipped, as istiod does,
// since Envoy refuses two chains with the same match.
func gatewayPassthroughChains(m *model.Model, g gatewayServer, seen map[string]bool) ([]*listener.FilterChain, error) {
	byHost := servicePortsByHost(m)
	port := uint16(g.s.GetPort().GetNumber())
	var out []*listener.FilterChain
	for _, vs := range boundVirtualServices(m, g.gw) {
		if len(gatewayHostsFor(g, vs)) == 0 {
			continue
		}
		for _, tr := range vs.Spec.GetTls() {
			if len(tr.GetRoute()) == 0 {
				continue
			}
			for _, match := range tr.GetMatch() {
				if !tlsMatchApplies(match, vs, g) {
					continue
				}
				if slices.ContainsFunc(match.GetSniHosts(), func(h string) bool { return seen[h] }) {
					continue
				}
				for _, h := range match.GetSniHosts() {
					seen[h] = true
				}
				f, err := networkRouteFilter(m, vs, tr.GetRoute(), port, byHost)
				if err != nil {
					return nil, err
				}
				out = append(out, &listener.FilterChain{
					FilterChainMatch: &listener.FilterChainMatch{ServerNames: slices.Clone(match.GetSniHosts())},
					Filters:          []*listener.Filter{f},
					Metadata:         gatewayOrigin(g),
				})
			}
		}
	}
	return out, nil
}

// tlsMatchApplies reports whether a tls route match applies to a gateway server, as
// Istio's l4SingleMatch: its port is unset or the server's number, and its gateways
// are unset or name the server's Gateway ("<ns>/<name>", or a bare name in the
// VirtualService's namespace).
func tlsMatchApplies(match *networking.TLSMatchAttributes, vs *model.IstioConfig[*networking.VirtualService], g gatewayServer) bool {
	if p := match.GetPort(); p != 0 && p != g.s.GetPort().GetNumber() {
		return false
	}
	if len(match.GetGateways()) == 0 {
		return true
	}
	return model.BindsGateway(&networking.VirtualService{Gateways: match.GetGateways()}, vs.Namespace, g.gw.Namespace, g.gw.Name)
}

// terminatedTCPChain is the chain of a TLS server ending TLS (SIMPLE, MUTUAL): the
// server's credential on its SNI hosts, then the bound VirtualService's tcp route; nil
// when no tcp route applies (istiod then builds no chain).
func terminatedTCPChain(m *model.Model, g gatewayServer) (*listener.FilterChain, error) {
	f, err := gatewayTCPFilter(m, g)
	if err != nil || f == nil {
		return nil, err
	}
	ts, err := gatewayTLSSocket(g)
	if err != nil {
		return nil, err
	}
	return &listener.FilterChain{
		FilterChainMatch: &listener.FilterChainMatch{ServerNames: sniHosts(g.s)},
		Filters:          []*listener.Filter{f},
		TransportSocket:  ts,
		Metadata:         gatewayOrigin(g),
	}, nil
}

// networkRouteFilter is the tcp_proxy of a tcp or tls route's destinations, as Istio's
// buildOutboundNetworkFilters: one destination uses its cluster as stat prefix, several
// use weighted clusters (zero weights dropped) with stat prefix "<vs name>.<vs ns>".
// port is the port a destination without one takes.
func networkRouteFilter(m *model.Model, vs *model.IstioConfig[*networking.VirtualService], dsts []*networking.RouteDestination, port uint16, byHost map[string][]servicePort) (*listener.Filter, error) {
	if len(dsts) == 1 {
		c := destinationCluster(m, vs.Namespace, dsts[0].GetDestination(), port, byHost)
		return tcpProxyFilter(c, c)
	}
	var weighted []*tcpproxy.TcpProxy_WeightedCluster_ClusterWeight
	for _, d := range dsts {
		if d.GetWeight() <= 0 {
			continue
		}
		weighted = append(weighted, &tcpproxy.TcpProxy_WeightedCluster_ClusterWeight{
			Name:   destinationCluster(m, vs.Namespace, d.GetDestination(), port, byHost),
			Weight: uint32(d.GetWeight()),
		})
	}
	return tcpProxyWeightedFilter(vs.Name+"."+vs.Namespace, weighted)
}
