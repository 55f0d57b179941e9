package xds

import (
	"fmt"
	"strconv"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httpinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// proxyListeners returns the proxy's listeners, each with its origin in metadata (see
// origin.go): virtualOutbound, one outbound listener per HTTP port number and per TCP
// service port, and virtualInbound.
func proxyListeners(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	if pod.Router {
		return gatewayListeners(m, pod)
	}
	vo, err := virtualOutbound(m.Mesh.OutboundTrafficPolicy)
	if err != nil {
		return nil, fmt.Errorf("build listener %s: %w", VirtualOutboundListener, err)
	}
	vo.Metadata = meshOrigin(m)
	out := []types.Resource{vo}
	for _, port := range httpPorts(m) {
		l, err := outboundHTTPListener(port, m.Mesh.OutboundTrafficPolicy)
		if err != nil {
			return nil, fmt.Errorf("build listener %s: %w", OutboundHTTPListenerName(port), err)
		}
		l.Metadata = meshOrigin(m)
		l.FilterChains[0].Metadata = meshOrigin(m)
		out = append(out, l)
	}
	byHost := servicePortsByHost(m)
	for _, sp := range outboundPorts(m) {
		if sp.port.Protocol.IsHTTP() || !sp.svc.VIP.IsValid() {
			continue
		}
		if sp.sniffed() {
			l, err := outboundAutoListener(m, sp, byHost)
			if err != nil {
				return nil, fmt.Errorf("build listener %s: %w", OutboundTCPListenerName(sp.svc.VIP, sp.port.Port), err)
			}
			out = append(out, l)
			continue
		}
		if sp.port.Protocol.IsTLS() {
			l, err := outboundTLSListener(m, sp, byHost) // tlsroute.go
			if err != nil {
				return nil, fmt.Errorf("build listener %s: %w", OutboundTCPListenerName(sp.svc.VIP, sp.port.Port), err)
			}
			out = append(out, l)
			continue
		}
		l, err := outboundTCPListener(m, sp, byHost)
		if err != nil {
			return nil, fmt.Errorf("build listener %s: %w", OutboundTCPListenerName(sp.svc.VIP, sp.port.Port), err)
		}
		l.Metadata = tcpOrigin(m, sp)
		l.FilterChains[0].Metadata = tcpOrigin(m, sp)
		out = append(out, l)
	}
	wild, err := entryWildcardListeners(m) // serviceentry.go: ServiceEntry TLS/TCP ports without an address
	if err != nil {
		return nil, err
	}
	for _, l := range wild {
		out = append(out, l)
	}
	vi, err := virtualInbound(m, pod)
	if err != nil {
		return nil, fmt.Errorf("build listener %s: %w", VirtualInboundListener, err)
	}
	vi.Metadata = meshOrigin(m)
	out = append(out, vi)
	logs, err := accessLogs(MeshFor(m, pod))
	if err != nil {
		return nil, err
	}
	if err := addAccessLogs(out, logs); err != nil {
		return nil, err
	}
	if err := addPodTracing(out, m, pod, false); err != nil { // tracing.go
		return nil, err
	}
	return out, addTelemetryFilters(out, metricsFor(m, pod)) // telemetry.go, telemetry_metrics.go
}

// transportSocketConnectTimeout bounds a downstream TLS handshake on the chains of the
// outbound service listeners, as Istio's PILOT_GATEWAY_TRANSPORT_SOCKET_CONNECT_TIMEOUT
// default (15s) that istiod sets on every chain it builds for a listener entry.
var transportSocketConnectTimeout = durationpb.New(15 * time.Second)

// maxConnectionsPerSocketEvent is Istio's default MAX_CONNECTIONS_PER_SOCKET_EVENT_LOOP,
// set on the listeners that bind a port (virtualOutbound, virtualInbound).
const maxConnectionsPerSocketEvent = 1

// virtualOutbound receives all outbound TCP the capture rules redirect to 15001 and hands
// each connection to the listener of its original destination; what matches none goes
// to PassthroughCluster (ALLOW_ANY) or BlackHoleCluster (REGISTRY_ONLY), and connections
// to 15001 itself (a loop) to BlackHoleCluster.
func virtualOutbound(policy model.OutboundTrafficPolicy) (*listener.Listener, error) {
	blackhole, err := tcpProxyFilter(BlackHoleCluster, BlackHoleCluster)
	if err != nil {
		return nil, err
	}
	passthrough, err := catchAllFilter(policy)
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:                                 VirtualOutboundListener,
		Address:                              socketAddress(wildcardAddr, VirtualOutboundPort),
		UseOriginalDst:                       wrapperspb.Bool(true),
		TrafficDirection:                     core.TrafficDirection_OUTBOUND,
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(maxConnectionsPerSocketEvent),
		FilterChains: []*listener.FilterChain{
			{
				Name:             VirtualOutboundListener + "-blackhole",
				FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(uint32(VirtualOutboundPort))},
				Filters:          []*listener.Filter{blackhole},
			},
			{
				Name:    VirtualOutboundListener + "-catchall-tcp",
				Filters: []*listener.Filter{passthrough},
			},
		},
	}, nil
}

// catchAllFilter is the tcp_proxy for traffic no service claims: to PassthroughCluster
// under ALLOW_ANY, to BlackHoleCluster under REGISTRY_ONLY.
func catchAllFilter(policy model.OutboundTrafficPolicy) (*listener.Filter, error) {
	catchAll := PassthroughCluster
	if policy == model.RegistryOnly {
		catchAll = BlackHoleCluster
	}
	return tcpProxyFilter(catchAll, catchAll)
}

// outboundHTTPListener is the handoff target for HTTP to any service on port: it routes
// by Host header with route configuration "<port>", fetched over ADS. As istiod's, the HTTP chain matches what the HTTP
// inspector detects (plaintext HTTP/1.1 or h2c); any other traffic to the port, e.g. a
// server-first or TLS protocol to a host no Service has, takes the default
// PassthroughFilterChain to PassthroughCluster (BlackHoleCluster under REGISTRY_ONLY)
// instead of failing in the HTTP codec.
func outboundHTTPListener(port uint16, policy model.OutboundTrafficPolicy) (*listener.Listener, error) {
	name := OutboundHTTPListenerName(port)
	f, err := hcmFilter("outbound_"+name, true, func(m *hcm.HttpConnectionManager) {
		m.RouteSpecifier = &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: RouteName(port),
			ConfigSource:    adsConfigSource(),
		}}
	})
	if err != nil {
		return nil, err
	}
	hi, err := typed(&httpinspector.HttpInspector{})
	if err != nil {
		return nil, err
	}
	passthrough, err := catchAllFilter(policy)
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:             name,
		Address:          socketAddress(wildcardAddr, port),
		BindToPort:       wrapperspb.Bool(false),
		TrafficDirection: core.TrafficDirection_OUTBOUND,
		ListenerFilters: []*listener.ListenerFilter{
			{Name: wellknown.HttpInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: hi}},
		},
		// Istio's default protocolDetectionTimeout: 0s, no timeout.
		ListenerFiltersTimeout:           durationpb.New(0),
		ContinueOnListenerFiltersTimeout: true,
		FilterChains: []*listener.FilterChain{{
			FilterChainMatch:              &listener.FilterChainMatch{TransportProtocol: transportRawBuffer, ApplicationProtocols: alpnPlaintextHTTP},
			Filters:                       []*listener.Filter{f},
			TransportSocketConnectTimeout: transportSocketConnectTimeout,
		}},
		DefaultFilterChain: &listener.FilterChain{
			Name:             PassthroughFilterChain,
			FilterChainMatch: &listener.FilterChainMatch{},
			Filters:          []*listener.Filter{passthrough},
		},
	}, nil
}

// outboundTCPListener is the handoff target for one TCP service port: TCP cannot be
// routed by host, so it matches the service VIP and proxies to the service's cluster, or
// to the destinations of its VirtualService's first tcp route (weighted when several).
func outboundTCPListener(m *model.Model, sp servicePort, byHost map[string][]servicePort) (*listener.Listener, error) {
	f, err := outboundTCPFilter(m, sp, byHost)
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:             OutboundTCPListenerName(sp.svc.VIP, sp.port.Port),
		Address:          socketAddress(sp.svc.VIP.String(), sp.port.Port),
		BindToPort:       wrapperspb.Bool(false),
		TrafficDirection: core.TrafficDirection_OUTBOUND,
		// istiod's buildListenerFromEntry gives every outbound listener these; without an
		// HTTP inspector the timeout is 0 (none).
		ContinueOnListenerFiltersTimeout: true,
		ListenerFiltersTimeout:           durationpb.New(0),
		FilterChains: []*listener.FilterChain{{
			Filters:                       []*listener.Filter{f},
			TransportSocketConnectTimeout: transportSocketConnectTimeout,
		}},
	}, nil
}

// outboundAutoListener is the handoff target for a service port of no declared
// protocol (model.ProtocolAuto) on its VIP, as istiod's buildSidecarOutboundListener for
// ListenerProtocolAuto: the HTTP inspector reads the connection's first bytes; plaintext
// HTTP/1.1 or h2c takes the HTTP chain, a connection manager routing by the route
// configuration "<host>:<port>" (the service's virtual host alone, see
// sniffedRouteConfig), and anything else (a server-first protocol, raw bytes, TLS) the
// default chain, the port's TCP chain (tcp_proxy to the service's cluster or by its
// VirtualService's tcp route), as a TCP port's listener.
func outboundAutoListener(m *model.Model, sp servicePort, byHost map[string][]servicePort) (*listener.Listener, error) {
	l, err := outboundTCPListener(m, sp, byHost)
	if err != nil {
		return nil, err
	}
	tcpChain := l.FilterChains[0]
	tcpChain.Metadata = tcpOrigin(m, sp)
	routeName := sniffedRouteName(sp)
	f, err := hcmFilter("outbound_"+l.Name, true, func(m *hcm.HttpConnectionManager) {
		m.RouteSpecifier = &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			RouteConfigName: routeName,
			ConfigSource:    adsConfigSource(),
		}}
	})
	if err != nil {
		return nil, err
	}
	hi, err := typed(&httpinspector.HttpInspector{})
	if err != nil {
		return nil, err
	}
	l.Metadata = tcpOrigin(m, sp)
	l.ListenerFilters = []*listener.ListenerFilter{
		{Name: wellknown.HttpInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: hi}},
	}
	l.FilterChains = []*listener.FilterChain{{
		FilterChainMatch:              &listener.FilterChainMatch{TransportProtocol: transportRawBuffer, ApplicationProtocols: alpnPlaintextHTTP},
		Filters:                       []*listener.Filter{f},
		TransportSocketConnectTimeout: transportSocketConnectTimeout,
		Metadata:                      meshOrigin(m),
	}}
	l.DefaultFilterChain = tcpChain
	return l, nil
}

// sniffedRouteName is istiod's route name of a sniffed service port: "<host>:<port>".
func sniffedRouteName(sp servicePort) string {
	return sp.host + ":" + strconv.Itoa(int(sp.port.Port))
}

// outboundTCPFilter returns the tcp_proxy of one TCP service port, as Istio's
// buildOutboundNetworkFilters: one destination uses its cluster as stat prefix, several
// use weighted clusters (zero weights dropped) with stat prefix "<vs name>.<vs ns>".
func outboundTCPFilter(m *model.Model, sp servicePort, byHost map[string][]servicePort) (*listener.Filter, error) {
	vs := virtualServiceFor(m, sp.host)
	route := tcpRouteFor(vs, sp.port.Port)
	if route == nil {
		return tcpProxyFilter(sp.clusterName(), sp.clusterName())
	}
	return networkRouteFilter(m, vs, route.GetRoute(), sp.port.Port, byHost) // gateway_passthrough.go
}

// virtualInbound receives all inbound TCP the capture rules redirect to 15006. The
// original_dst listener filter restores the destination and the TLS and HTTP inspectors
// detect the transport and application protocols, so the chains of each app port (see
// inboundChains) deliver it through that port's inbound cluster; other ports go through
// the passthrough chains of the pod's mTLS mode (see passthroughChains), and
// connections to 15006 itself (a loop) go to BlackHoleCluster. The chains are in
// Istio's order: blackhole, passthrough, then the declared ports.
func virtualInbound(m *model.Model, pod *model.Pod) (*listener.Listener, error) {
	blackhole, err := tcpProxyFilter(BlackHoleCluster, BlackHoleCluster)
	if err != nil {
		return nil, err
	}
	chains := []*listener.FilterChain{{
		Name:             VirtualInboundListener + "-blackhole",
		FilterChainMatch: &listener.FilterChainMatch{DestinationPort: wrapperspb.UInt32(uint32(VirtualInboundPort))},
		Filters:          []*listener.Filter{blackhole},
	}}
	declared := map[uint16]bool{}
	for _, ip := range inboundPorts(m, pod) {
		declared[ip.target] = true
	}
	passthrough, err := passthroughChains(m, pod, declared)
	if err != nil {
		return nil, err
	}
	chains = append(chains, passthrough...)
	for _, ip := range inboundPorts(m, pod) {
		cs, err := inboundChains(m, pod, ip)
		if err != nil {
			return nil, fmt.Errorf("build chain %s: %w", InboundChainName(ip.target), err)
		}
		chains = append(chains, cs...)
	}
	lf, err := inboundListenerFilters(chains)
	if err != nil {
		return nil, err
	}
	return &listener.Listener{
		Name:                                 VirtualInboundListener,
		Address:                              socketAddress(wildcardAddr, VirtualInboundPort),
		TrafficDirection:                     core.TrafficDirection_INBOUND,
		ContinueOnListenerFiltersTimeout:     true,
		MaxConnectionsToAcceptPerSocketEvent: wrapperspb.UInt32(maxConnectionsPerSocketEvent),
		ListenerFilters:                      lf,
		// Istio's default protocolDetectionTimeout: 0s, no timeout. The inspectors run
		// only on the ports whose chains need them (see inboundListenerFilters).
		ListenerFiltersTimeout: durationpb.New(0),
		FilterChains:           chains,
	}, nil
}

// inboundFilters returns the network filters of one inbound app port: the RBAC filters
// of the AuthorizationPolicies selecting the pod, then an HCM with an inline catch-all
// route for HTTP (with the RBAC HTTP filters first, and the client certificate
// forwarded in x-forwarded-client-cert, see inboundConnectionManager) or a tcp_proxy for
// TCP, both to "inbound|<target>||".
func inboundFilters(ip inboundPort, az authz) ([]*listener.Filter, error) {
	cluster := InboundClusterName(ip.target)
	if !ip.protocol.IsHTTP() {
		out, err := az.networkFilters()
		if err != nil {
			return nil, err
		}
		tp, err := tcpProxyFilter(cluster, cluster)
		if err != nil {
			return nil, err
		}
		return append(out, tp), nil
	}
	rbacFilters, err := az.httpFilters()
	if err != nil {
		return nil, err
	}
	f, err := hcmFilter("inbound_"+InboundChainName(ip.target), false, func(m *hcm.HttpConnectionManager) {
		inboundConnectionManager(m)
		m.HttpFilters = append(rbacFilters, m.HttpFilters...)
		m.RouteSpecifier = &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: cluster,
			VirtualHosts: []*route.VirtualHost{{
				Name:    "inbound|http|" + RouteName(ip.port),
				Domains: []string{"*"},
				Routes:  []*route.Route{defaultInboundRoute(cluster, traceOperation(ip.host, ip.port), ip.protocol)},
			}},
			ValidateClusters: wrapperspb.Bool(false),
		}}
	})
	if err != nil {
		return nil, err
	}
	return []*listener.Filter{f}, nil
}
