package xds

import (
	"fmt"
	"sort"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// VirtualInboundCatchAllHTTPChain is the name of the virtualInbound passthrough chains
// that serve HTTP (detected by ALPN: mTLS from a sidecar, or the HTTP inspector's
// http/1.1 and h2c); the TCP ones are named VirtualInboundListener, as in Istio.
const VirtualInboundCatchAllHTTPChain = "virtualInbound-catchall-http"

// InboundServerName is the server header inbound connection managers answer with, as
// Istio's (outbound ones keep Envoy's "envoy").
const InboundServerName = "istio-envoy"

// inboundConnectionManager sets what istiod sets on every inbound connection manager
// (buildSidecarInboundHTTPOpts), whether its chain terminates mTLS or not: the server
// name, and the client certificate's subject, URI and DNS SANs appended to
// x-forwarded-client-cert (a plaintext connection has none to append).
func inboundConnectionManager(m *hcm.HttpConnectionManager) {
	m.ServerName = InboundServerName
	m.ForwardClientCertDetails = hcm.HttpConnectionManager_APPEND_FORWARD
	m.SetCurrentClientCertDetails = &hcm.HttpConnectionManager_SetCurrentClientCertDetails{
		Subject: wrapperspb.Bool(true), Dns: true, Uri: true,
	}
}

// PassthroughFilterChain is the name of the default filter chain of an outbound HTTP
// listener: what the HTTP inspector does not detect as HTTP passes through, as in Istio.
const PassthroughFilterChain = "PassthroughFilterChain"

// ALPN lists of Istio's passthrough chain matches (pilot/pkg/networking/core/listener.go).
var (
	// alpnMTLSHTTP is what a client sidecar offers when it detected HTTP (mtlsHTTPALPNs).
	alpnMTLSHTTP = []string{"istio-http/1.0", "istio-http/1.1", "istio-h2"}
	// alpnPlaintextHTTP is what the HTTP inspector reports for plaintext HTTP
	// (plaintextHTTPALPNs without HTTP/1.0, Istio's default).
	alpnPlaintextHTTP = []string{"http/1.1", "h2c"}
	// alpnMTLSTCP is what a client sidecar offers for TCP (mtlsTCPWithMxcALPNs).
	alpnMTLSTCP = []string{"istio-peer-exchange", "istio"}
)

// chainOption is one filter chain of a passthrough match table: its match, whether it
// serves HTTP (else TCP), and whether it terminates mTLS.
type chainOption struct {
	alpn      []string
	transport string
	http      bool
	mtls      bool
}

// passthroughOptions returns the passthrough chains of one mTLS mode, as Istio's
// getFilterChainMatchOptions for a port of unknown protocol
// (inbound{Strict,PermissiveWithMxc,PlainText}FilterChainMatchOptions):
//   - STRICT: mTLS only, HTTP when the client sidecar offered an HTTP ALPN, else TCP.
//     A plaintext connection matches no chain and is closed: STRICT refuses plaintext on
//     every port, declared by a Service or not.
//   - PERMISSIVE: mTLS HTTP, plaintext HTTP, mTLS TCP, plaintext TCP, and one-way TLS
//     from a client without a sidecar passed through as TCP.
//   - DISABLE: plaintext HTTP and plaintext TCP.
func passthroughOptions(mode MTLSMode) []chainOption {
	switch mode {
	case MTLSStrict:
		return []chainOption{
			{alpn: alpnMTLSHTTP, transport: transportTLS, http: true, mtls: true},
			{transport: transportTLS, mtls: true},
		}
	case MTLSPermissive:
		return []chainOption{
			{alpn: alpnMTLSHTTP, transport: transportTLS, http: true, mtls: true},
			{alpn: alpnPlaintextHTTP, transport: transportRawBuffer, http: true},
			{alpn: alpnMTLSTCP, transport: transportTLS, mtls: true},
			{transport: transportRawBuffer},
			{transport: transportTLS},
		}
	}
	return []chainOption{
		{alpn: alpnPlaintextHTTP, transport: transportRawBuffer, http: true},
		{transport: transportRawBuffer},
	}
}

// passthroughChains returns the virtualInbound chains for traffic to ports no Service
// of the pod declares, delivered through InboundPassthroughCluster, as Istio's
// buildInboundPassthroughChains: the chains of the pod's workload-level mTLS mode with
// no port match, then, for each port a workload PeerAuthentication sets a port-level
// mode on and no Service declares, the chains of that mode matching the port. The
// AuthorizationPolicies selecting the pod apply to them as to declared ports: HTTP
// chains get the HTTP RBAC filters, TCP chains the network ones.
func passthroughChains(m *model.Model, pod *model.Pod, declared map[uint16]bool) ([]*listener.FilterChain, error) {
	out, err := passthroughChainsFor(m, pod, EffectiveMTLSMode(m, pod, 0), 0)
	if err != nil {
		return nil, err
	}
	for _, port := range portLevelPorts(m, pod) {
		if declared[port] {
			continue
		}
		cs, err := passthroughChainsFor(m, pod, EffectiveMTLSMode(m, pod, port), port)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// passthroughChainsFor returns the passthrough chains of mode, matching port (0: any).
func passthroughChainsFor(m *model.Model, pod *model.Pod, mode MTLSMode, port uint16) ([]*listener.FilterChain, error) {
	var out []*listener.FilterChain
	for _, opt := range passthroughOptions(mode) {
		match := &listener.FilterChainMatch{TransportProtocol: opt.transport, ApplicationProtocols: opt.alpn}
		if port != 0 {
			match.DestinationPort = wrapperspb.UInt32(uint32(port))
		}
		fc := &listener.FilterChain{Name: VirtualInboundListener, FilterChainMatch: match}
		var err error
		if opt.http {
			fc.Name = VirtualInboundCatchAllHTTPChain
			fc.Filters, err = passthroughHTTPFilters(authzFor(m, pod, false))
		} else {
			fc.Filters, err = passthroughTCPFilters(authzFor(m, pod, true))
		}
		if err != nil {
			return nil, fmt.Errorf("build chain %s: %w", fc.Name, err)
		}
		if opt.mtls {
			protocol := model.ProtocolTCP
			if opt.http {
				protocol = model.ProtocolHTTP
			}
			if fc.TransportSocket, err = downstreamMTLSSocket(protocol, m.Mesh); err != nil {
				return nil, err
			}
		}
		out = append(out, fc)
	}
	return out, nil
}

// passthroughTCPFilters are the network RBAC filters, then a tcp_proxy to
// InboundPassthroughCluster.
func passthroughTCPFilters(az authz) ([]*listener.Filter, error) {
	out, err := az.networkFilters()
	if err != nil {
		return nil, err
	}
	tp, err := tcpProxyFilter(InboundPassthroughCluster, InboundPassthroughCluster)
	if err != nil {
		return nil, err
	}
	return append(out, tp), nil
}

// passthroughHTTPFilters is an HCM with the HTTP RBAC filters and Istio's passthrough
// route configuration: "InboundPassthroughCluster", one virtual host "inbound|http|0"
// for every domain, its default route to the cluster; the connection manager is an
// inbound one (see inboundConnectionManager), as on declared ports.
func passthroughHTTPFilters(az authz) ([]*listener.Filter, error) {
	rbacFilters, err := az.httpFilters()
	if err != nil {
		return nil, err
	}
	f, err := hcmFilter(InboundPassthroughCluster, false, func(m *hcm.HttpConnectionManager) {
		inboundConnectionManager(m)
		m.HttpFilters = append(rbacFilters, m.HttpFilters...)
		m.RouteSpecifier = &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: InboundPassthroughCluster,
			VirtualHosts: []*route.VirtualHost{{
				Name:    "inbound|http|0",
				Domains: []string{"*"},
				Routes:  []*route.Route{defaultInboundRoute(InboundPassthroughCluster, traceOperation("", 0), model.ProtocolHTTP)},
			}},
			ValidateClusters: wrapperspb.Bool(false),
		}}
	})
	if err != nil {
		return nil, err
	}
	return []*listener.Filter{f}, nil
}

// portLevelPorts returns, sorted, the ports the pod's workload PeerAuthentication (the
// first selecting it, as EffectiveMTLSMode) sets a port-level mode on.
func portLevelPorts(m *model.Model, pod *model.Pod) []uint16 {
	for _, pa := range m.Istio.PeerAuthentications {
		if pa == nil || pa.Spec == nil {
			continue
		}
		sel := pa.Spec.GetSelector().GetMatchLabels()
		if len(sel) == 0 || pa.Namespace != pod.Namespace || !labelsMatch(sel, pod.Labels) {
			continue
		}
		var out []uint16
		for p := range pa.Spec.GetPortLevelMtls() {
			if p > 0 && p <= 65535 {
				out = append(out, uint16(p))
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	return nil
}
