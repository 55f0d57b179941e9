package xds

import (
	"slices"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	httpinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	originaldst "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_dst/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	envoytype "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// inspectorNeeds is what the chains of one destination port (0: the chains without a
// port, the passthrough ones) need detected.
type inspectorNeeds struct{ tls, http bool }

// inboundListenerFilters returns virtualInbound's listener filters for its chains, as
// Istio's populateListenerFilters: original_dst, then the TLS inspector where some chain
// matches transport "tls", then the HTTP inspector where some chain matches the
// http/1.1 or h2c ALPN it detects. An inspector not needed on every port is turned off
// on the others with filter_disabled, so it never waits for the first bytes of a
// connection no chain of its port inspects (a server-first protocol on a declared TCP
// port, the blackhole port).
func inboundListenerFilters(chains []*listener.FilterChain) ([]*listener.ListenerFilter, error) {
	needs := map[uint32]inspectorNeeds{}
	for _, fc := range chains {
		m := fc.GetFilterChainMatch()
		n := needs[m.GetDestinationPort().GetValue()]
		n.tls = n.tls || m.GetTransportProtocol() == transportTLS
		n.http = n.http || slices.ContainsFunc(m.GetApplicationProtocols(), func(p string) bool { return p == "http/1.1" || p == "h2c" })
		needs[m.GetDestinationPort().GetValue()] = n
	}
	ports := make([]uint32, 0, len(needs))
	for p := range needs {
		ports = append(ports, p)
	}
	slices.Sort(ports)

	od, err := typed(&originaldst.OriginalDst{})
	if err != nil {
		return nil, err
	}
	out := []*listener.ListenerFilter{{Name: wellknown.OriginalDestination, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: od}}}
	if slices.ContainsFunc(ports, func(p uint32) bool { return needs[p].tls }) {
		// Istio reads at most 512 bytes for the ClientHello (Envoy's default is 64 KiB).
		ti, err := typed(&tlsinspector.TlsInspector{InitialReadBufferSize: wrapperspb.UInt32(512)})
		if err != nil {
			return nil, err
		}
		f := &listener.ListenerFilter{Name: wellknown.TlsInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: ti}}
		// On by default when the passthrough chains need it: off on the ports that do
		// not. Otherwise off by default: on only where some chain needs it.
		if needs[0].tls {
			f.FilterDisabled = excludePorts(filterPorts(ports, func(p uint32) bool { return p != 0 && !needs[p].tls }))
		} else if on := filterPorts(ports, func(p uint32) bool { return p != 0 && needs[p].tls }); len(on) > 0 {
			f.FilterDisabled = &listener.ListenerFilterChainMatchPredicate{Rule: &listener.ListenerFilterChainMatchPredicate_NotMatch{NotMatch: excludePorts(on)}}
		}
		out = append(out, f)
	}
	// After the TLS inspector: a connection it finds to be TLS is not inspected for HTTP.
	if slices.ContainsFunc(ports, func(p uint32) bool { return needs[p].http }) {
		hi, err := typed(&httpinspector.HttpInspector{})
		if err != nil {
			return nil, err
		}
		out = append(out, &listener.ListenerFilter{
			Name:           wellknown.HttpInspector,
			ConfigType:     &listener.ListenerFilter_TypedConfig{TypedConfig: hi},
			FilterDisabled: excludePorts(filterPorts(ports, func(p uint32) bool { return !needs[p].http })),
		})
	}
	return out, nil
}

func filterPorts(ports []uint32, keep func(uint32) bool) []uint32 {
	var out []uint32
	for _, p := range ports {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

// excludePorts is Istio's listenerPredicateExcludePorts: a predicate matching a
// connection to any of ports (nil for none, so the filter is never disabled).
func excludePorts(ports []uint32) *listener.ListenerFilterChainMatchPredicate {
	rules := make([]*listener.ListenerFilterChainMatchPredicate, 0, len(ports))
	for _, p := range ports {
		rules = append(rules, &listener.ListenerFilterChainMatchPredicate{Rule: &listener.ListenerFilterChainMatchPredicate_DestinationPortRange{
			DestinationPortRange: &envoytype.Int32Range{Start: int32(p), End: int32(p + 1)},
		}})
	}
	switch len(rules) {
	case 0:
		return nil
	case 1:
		return rules[0]
	}
	return &listener.ListenerFilterChainMatchPredicate{Rule: &listener.ListenerFilterChainMatchPredicate_OrMatch{
		OrMatch: &listener.ListenerFilterChainMatchPredicate_MatchSet{Rules: rules},
	}}
}
