package xds

import (
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Transport protocols the TLS inspector reports, as filter chains match them.
const (
	transportTLS       = "tls"
	transportRawBuffer = "raw_buffer"
)

// inboundChains returns the virtualInbound chains of one app port, split by transport
// protocol as Istio's for a port of known protocol (listener_inbound.go's
// inbound{Permissive,Strict,PlainText}{HTTP,TCP}FilterChainMatchOptions), all named
// "0.0.0.0_<target>":
//   - STRICT: one mTLS chain (transport "tls", any ALPN), terminated with the workload
//     certificate, a client certificate required. A plaintext connection matches no chain
//     of its port and is closed.
//   - PERMISSIVE: the mTLS chain, matched on Istio's ALPNs (a sidecar always offers them),
//     then a plaintext chain (transport "raw_buffer"); a TCP port also passes one-way TLS
//     from a client without a sidecar through untouched (transport "tls", no ALPN).
//   - DISABLE: the plaintext chain only.
func inboundChains(m *model.Model, pod *model.Pod, ip inboundPort) ([]*listener.FilterChain, error) {
	mode := EffectiveMTLSMode(m, pod, ip.target)
	port := wrapperspb.UInt32(uint32(ip.target))
	origin := inboundOrigin(m, pod, ip.target)
	chain := func(match *listener.FilterChainMatch, mtls bool) (*listener.FilterChain, error) {
		return inboundChain(m, pod, ip, origin, match, mtls)
	}
	if ip.protocol.IsAuto() && (ip.tls == nil || mode != MTLSDisable) {
		// A sniffed port: the chains of a port of unknown protocol, as the passthrough
		// ones (istiod's getFilterChainMatchOptions for ListenerProtocolAuto), matching
		// the port, each an HTTP or a TCP chain of the port's inbound cluster.
		var out []*listener.FilterChain
		for _, opt := range passthroughOptions(mode) {
			as := ip
			as.protocol = model.ProtocolTCP
			if opt.http {
				as.protocol = model.ProtocolHTTP
			}
			fc, err := inboundChain(m, pod, as, origin, &listener.FilterChainMatch{DestinationPort: port, TransportProtocol: opt.transport, ApplicationProtocols: opt.alpn}, opt.mtls)
			if err != nil {
				return nil, err
			}
			out = append(out, fc)
		}
		return out, nil
	}

	if ip.tls != nil && mode == MTLSDisable {
		// A Sidecar ingress listener's own TLS (sidecar.go), where the mesh's mTLS is
		// off on its port: one chain, TLS terminated with its files, as istiod's
		// getTLSFilterChainMatchOptions.
		fc, err := chain(&listener.FilterChainMatch{DestinationPort: port, TransportProtocol: transportTLS}, false)
		if err != nil {
			return nil, err
		}
		if fc.TransportSocket, err = sidecarIngressTLSSocket(ip.tls); err != nil {
			return nil, err
		}
		return []*listener.FilterChain{fc}, nil
	}
	var matches []*listener.FilterChainMatch
	var mtls []bool
	add := func(transport string, alpn []string, terminate bool) {
		matches = append(matches, &listener.FilterChainMatch{DestinationPort: port, TransportProtocol: transport, ApplicationProtocols: alpn})
		mtls = append(mtls, terminate)
	}
	switch mode {
	case MTLSStrict:
		add(transportTLS, nil, true)
	case MTLSPermissive:
		add(transportTLS, alpnInboundMTLS, true)
		if !ip.protocol.IsHTTP() {
			add(transportTLS, nil, false)
		}
		add(transportRawBuffer, nil, false)
	default:
		add(transportRawBuffer, nil, false)
	}
	out := make([]*listener.FilterChain, 0, len(matches))
	for i, match := range matches {
		fc, err := chain(match, mtls[i])
		if err != nil {
			return nil, err
		}
		out = append(out, fc)
	}
	return out, nil
}

// inboundChain is one virtualInbound chain of an app port: match, the port's filters for
// its protocol (the HTTP or network RBAC filters of the policies selecting pod, see
// inboundFilters) and, when mtls, the workload certificate's mTLS termination.
func inboundChain(m *model.Model, pod *model.Pod, ip inboundPort, origin *core.Metadata, match *listener.FilterChainMatch, mtls bool) (*listener.FilterChain, error) {
	filters, err := inboundFilters(ip, authzFor(m, pod, !ip.protocol.IsHTTP()))
	if err != nil {
		return nil, err
	}
	fc := &listener.FilterChain{Name: InboundChainName(ip.target), FilterChainMatch: match, Filters: filters, Metadata: origin}
	if ip.sidecar != nil {
		// istiod names a Sidecar ingress listener's chains after its bind address,
		// the pod's IP (getSidecarInboundBindIPs' GlobalUnicastIP), and records the
		// Sidecar as where they came from.
		fc.Name = pod.IP.String() + "_" + strconv.Itoa(int(ip.target))
		fc.Metadata = configMetadata(IstioConfigPath("sidecar", ip.sidecar.Namespace, ip.sidecar.Name), "")
	}
	if mtls {
		if fc.TransportSocket, err = downstreamMTLSSocket(ip.protocol, m.Mesh); err != nil {
			return nil, err
		}
	}
	return fc, nil
}
