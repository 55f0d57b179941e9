package xds

import (
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Sidecar routing of TLS and HTTPS ports by SNI, as istiod's
// buildSidecarOutboundTLSFilterChainOpts and buildListenerFromEntry: the client's TLS
// is not terminated; the tls_inspector reads the SNI of its ClientHello and the filter
// chain whose server_names hold it proxies the bytes. A mesh-bound VirtualService's
// tls routes give one chain per applying match (server_names = its sniHosts) to the
// route's destinations, weighted when several; without one, the port's own chain goes
// to the service's cluster, matched on the service's host when the listener is the
// port's wildcard "0.0.0.0_<port>" (a ServiceEntry without addresses, where the host is
// all that tells services apart) and on nothing behind a VIP. A listener whose chains
// all match on something gets istiod's default PassthroughFilterChain (PassthroughCluster,
// BlackHoleCluster under REGISTRY_ONLY), so an SNI no chain names goes where traffic to
// an unknown destination goes.

// networkChain is one network (tcp_proxy) filter chain of an outbound listener before
// the listener is assembled, istiod's filterChainOpts without HTTP.
type networkChain struct {
	sni      []string // server_names; none (or "*") matches any
	filter   *listener.Filter
	metadata *core.Metadata
}

// matchAll reports whether the chain matches every connection, as istiod's isMatchAll.
func (c networkChain) matchAll() bool {
	return len(c.sni) == 0 || slices.Contains(c.sni, "*")
}

// conflicts reports whether c and o match the same connections, as istiod's
// conflictsWith for chains that differ only in SNI: the same set of server names,
// ignoring "*" and order. istiod keeps the first of two such chains.
func (c networkChain) conflicts(o networkChain) bool {
	set := func(sni []string) []string {
		var out []string
		for _, s := range sni {
			if s != "*" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(set(c.sni), set(o.sni))
}

// mergeNetworkChains appends the chains of incoming that conflict with none already in
// chains, as istiod's mergeTCPFilterChains.
func mergeNetworkChains(chains, incoming []networkChain) []networkChain {
	for _, in := range incoming {
		if !slices.ContainsFunc(chains, in.conflicts) {
			chains = append(chains, in)
		}
	}
	return chains
}

// sidecarTLSChains returns the chains of one TLS or HTTPS service port on a sidecar;
// wildcard says the port's listener is "0.0.0.0_<port>" rather than its VIP's. As
// istiod: the tls routes of the host's mesh-bound VirtualService with destinations,
// each match applying to the port (see tlsMatchAppliesToSidecar) once per
// distinct SNI list; else the service's own chain.
func sidecarTLSChains(m *model.Model, sp servicePort, wildcard bool, byHost map[string][]servicePort) ([]networkChain, error) {
	var out []networkChain
	handled := map[string]bool{}
	if vs := virtualServiceFor(m, sp.host); vs != nil {
		for _, tr := range vs.Spec.GetTls() {
			if len(tr.GetRoute()) == 0 {
				continue
			}
			for _, match := range tr.GetMatch() {
				if !tlsMatchAppliesToSidecar(match, sp.port.Port) {
					continue
				}
				key := strings.Join(match.GetSniHosts(), ",")
				if handled[key] {
					continue
				}
				handled[key] = true
				f, err := networkRouteFilter(m, vs, tr.GetRoute(), sp.port.Port, byHost) // gateway_passthrough.go
				if err != nil {
					return nil, err
				}
				out = append(out, networkChain{
					sni:      slices.Clone(match.GetSniHosts()),
					filter:   f,
					metadata: configMetadata(IstioConfigPath("virtual-service", vs.Namespace, vs.Name), ""),
				})
			}
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	f, err := tcpProxyFilter(sp.clusterName(), sp.clusterName())
	if err != nil {
		return nil, err
	}
	c := networkChain{filter: f, metadata: configMetadata(sp.configPath(), "")}
	if wildcard {
		c.sni = []string{sp.host}
	}
	return []networkChain{c}, nil
}

// tlsMatchAppliesToSidecar reports whether a tls route match applies to a sidecar's
// listener for port, as istiod's matchTLS with the gateway set {mesh}: its gateways are
// unset or name "mesh", and its port is unset or port. (sourceLabels, sourceNamespace
// and destinationSubnets are refused by the loader.)
func tlsMatchAppliesToSidecar(match *networking.TLSMatchAttributes, port uint16) bool {
	if p := match.GetPort(); p != 0 && p != uint32(port) {
		return false
	}
	gws := match.GetGateways()
	return len(gws) == 0 || slices.Contains(gws, model.MeshGateway)
}

// outboundNetworkListener assembles an outbound listener of network chains as istiod's
// buildListenerFromEntry: a tls_inspector when a chain matches on SNI, no listener
// filter timeout, a match-all chain as the default chain when there are others (alone,
// the only chain), else the PassthroughFilterChain to the policy's catch-all;
// server_names sorted.
func outboundNetworkListener(name, addr string, port uint16, chains []networkChain, policy model.OutboundTrafficPolicy) (*listener.Listener, error) {
	l := &listener.Listener{
		Name:                             name,
		Address:                          socketAddress(addr, port),
		BindToPort:                       wrapperspb.Bool(false),
		TrafficDirection:                 core.TrafficDirection_OUTBOUND,
		ContinueOnListenerFiltersTimeout: true,
		ListenerFiltersTimeout:           durationpb.New(0),
	}
	if slices.ContainsFunc(chains, func(c networkChain) bool { return len(c.sni) > 0 }) {
		ti, err := typed(&tlsinspector.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)}) // istiod's xdsfilters.TLSInspector
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listener.ListenerFilter{{Name: wellknown.TlsInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: ti}}}
	}
	for _, c := range chains {
		fc := &listener.FilterChain{
			Filters:                       []*listener.Filter{c.filter},
			TransportSocketConnectTimeout: transportSocketConnectTimeout,
			Metadata:                      c.metadata,
		}
		if c.matchAll() {
			l.DefaultFilterChain = fc
			continue
		}
		sni := slices.Clone(c.sni)
		slices.Sort(sni)
		fc.FilterChainMatch = &listener.FilterChainMatch{ServerNames: sni}
		l.FilterChains = append(l.FilterChains, fc)
	}
	switch {
	case l.DefaultFilterChain != nil && len(l.FilterChains) == 0:
		l.FilterChains, l.DefaultFilterChain = []*listener.FilterChain{l.DefaultFilterChain}, nil
	case l.DefaultFilterChain == nil:
		passthrough, err := catchAllFilter(policy) // listeners.go
		if err != nil {
			return nil, err
		}
		l.DefaultFilterChain = &listener.FilterChain{
			Name:             PassthroughFilterChain,
			FilterChainMatch: &listener.FilterChainMatch{},
			Filters:          []*listener.Filter{passthrough},
		}
	}
	return l, nil
}

// outboundTLSListener is the listener "<vip>_<port>" of a TLS or HTTPS service port with
// an address: its chains are sidecarTLSChains' (no SNI match without tls routes, the
// address tells the service).
func outboundTLSListener(m *model.Model, sp servicePort, byHost map[string][]servicePort) (*listener.Listener, error) {
	chains, err := sidecarTLSChains(m, sp, false, byHost)
	if err != nil {
		return nil, err
	}
	l, err := outboundNetworkListener(OutboundTCPListenerName(sp.svc.VIP, sp.port.Port), sp.svc.VIP.String(), sp.port.Port, chains, m.Mesh.OutboundTrafficPolicy)
	if err != nil {
		return nil, err
	}
	l.Metadata = chains[0].metadata
	return l, nil
}
