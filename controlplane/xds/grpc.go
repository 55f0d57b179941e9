package xds

import (
	"fmt"
	"net"
	"sort"
	"strconv"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	fault "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/fault/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Proxyless gRPC: istiod's gRPC generator (pilot/pkg/networking/grpcgen), for the pods
// injected with the grpc-agent template (model.SidecarSpec.GRPCAgent). grpc-go's xDS
// client subscribes by name: a client dialling xds:///<host>:<port> asks LDS for
// "<host>:<port>", RDS for the route configuration its api_listener names, CDS and EDS
// for the clusters its routes name; an xDS-enabled server asks LDS for
// "xds.istio.io/grpc/lds/inbound/<listen address>". istiod builds what a request names
// when it arrives; meshlab's snapshots are made ahead of any request, so a proxyless
// pod's snapshot holds every name istiod would answer (each service port under its FQDN
// and the short names istiod expands for the pod's namespace, the inbound listener of
// each service target port under the addresses a server listens on), and the discovery
// server answers a named request with the names that exist (controlplane/discovery).
const (
	// GRPCServerListenerPrefix begins the name of an xDS-enabled gRPC server's inbound
	// listener; the rest is its listen address (Istio's grpcxds.ServerListenerNamePrefix,
	// also the bootstrap's server_listener_resource_name_template without "%s").
	GRPCServerListenerPrefix = "xds.istio.io/grpc/lds/inbound/"
	// GRPCCertProvider is the certificate provider instance every gRPC TLS context names,
	// and the one the gRPC bootstrap defines (file_watcher over the agent's files).
	GRPCCertProvider = "default"
	// TLSModeLabel is the pod label that tells istiod a proxyless pod takes mTLS, making
	// PERMISSIVE STRICT on its server side (the grpc-agent template does not set it).
	TLSModeLabel = "security.istio.io/tlsMode"
	// tlsTransportSocket is the transport socket name grpc-go requires on TLS contexts.
	tlsTransportSocket = "envoy.transport_sockets.tls"
)

// grpcServerHosts are the listen addresses an xDS-enabled server's LDS name carries:
// grpc-go names the listener after the address it is given (a wildcard, IPv4 or IPv6, or
// the pod's own).
var grpcServerHosts = []string{"0.0.0.0", "::"}

// generateGRPC returns the typs of a proxyless pod's resources, each validated and sorted
// by name.
func generateGRPC(m *model.Model, pod *model.Pod, typs ...resource.Type) (map[resource.Type][]types.Resource, error) {
	want := func(t resource.Type) bool {
		for _, w := range typs {
			if w == t {
				return true
			}
		}
		return false
	}
	out := map[resource.Type][]types.Resource{}
	var err error
	if want(resource.ListenerType) {
		if out[resource.ListenerType], err = grpcListeners(m, pod); err != nil {
			return nil, err
		}
	}
	if want(resource.RouteType) {
		if out[resource.RouteType], err = grpcRoutes(m, pod); err != nil {
			return nil, err
		}
	}
	if want(resource.ClusterType) {
		if out[resource.ClusterType], err = grpcClusters(m, pod); err != nil {
			return nil, err
		}
	}
	if want(resource.EndpointType) {
		out[resource.EndpointType] = grpcEndpoints(m, pod)
	}
	if want(resource.SecretType) {
		out[resource.SecretType] = nil // certificates come from the bootstrap's providers
	}
	for typ, rs := range out {
		if err := validateAll(rs); err != nil {
			return nil, fmt.Errorf("generate grpc xds for %s/%s: %s: %w", pod.Namespace, pod.Name, typ, err)
		}
		sort.SliceStable(rs, func(i, j int) bool { return cachev3.GetResourceName(rs[i]) < cachev3.GetResourceName(rs[j]) })
	}
	return out, nil
}

// grpcServicePorts are the service ports a proxyless client can dial: the Services'
// (istiod answers ServiceEntry hosts too, which gRPC clients rarely dial; not done).
func grpcServicePorts(m *model.Model) []servicePort {
	var out []servicePort
	for _, sp := range outboundPorts(m) {
		if sp.se == nil {
			out = append(out, sp)
		}
	}
	return out
}

// GRPCListenerHosts returns the hosts under which istiod answers an LDS request for svc
// from a client in namespace clientNS: the FQDN and, for a service of that namespace,
// the short names istiod expands to it ("<name>", "<name>.<ns>", "<name>.<ns>.svc").
func GRPCListenerHosts(svc *model.Service, clientNS string) []string {
	out := []string{svc.Hostname()}
	if svc.Namespace == clientNS {
		short := svc.Name + "." + svc.Namespace
		out = append(out, svc.Name, short, short+".svc")
	}
	return out
}

// grpcListeners returns the api_listeners of every service port, one per name a client
// may dial it by, and the pod's inbound listeners.
func grpcListeners(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	filters, err := grpcClientFilters()
	if err != nil {
		return nil, err
	}
	var out []types.Resource
	for _, sp := range grpcServicePorts(m) {
		api, err := typed(&hcm.HttpConnectionManager{
			// istiod leaves stat_prefix empty, which Envoy's validation refuses and grpc-go
			// ignores: meshlab names it after the route configuration.
			StatPrefix:  sp.clusterName(),
			HttpFilters: filters,
			RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
				ConfigSource:    &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}},
				RouteConfigName: sp.clusterName(),
			}},
		})
		if err != nil {
			return nil, err
		}
		addr := ""
		if sp.svc.VIP.IsValid() {
			addr = sp.svc.VIP.String()
		}
		port := strconv.Itoa(int(sp.port.Port))
		for _, h := range GRPCListenerHosts(sp.svc, pod.Namespace) {
			out = append(out, &listener.Listener{
				Name: net.JoinHostPort(h, port),
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address: addr, PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(sp.port.Port)},
				}}},
				ApiListener: &listener.ApiListener{ApiListener: api},
			})
		}
	}
	in, err := grpcInboundListeners(m, pod)
	if err != nil {
		return nil, err
	}
	return append(out, in...), nil
}

// grpcClientFilters are the HTTP filters of a client's api_listener, as istiod's
// supportedFilters: fault (VirtualService faults arrive per route) then the router.
func grpcClientFilters() ([]*hcm.HttpFilter, error) {
	f, err := typed(&fault.HTTPFault{})
	if err != nil {
		return nil, err
	}
	r, err := typed(&router.Router{})
	if err != nil {
		return nil, err
	}
	return []*hcm.HttpFilter{
		{Name: FaultFilter, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: f}},
		{Name: wellknown.Router, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: r}},
	}, nil
}

// GRPCInboundMode returns the mTLS mode a proxyless server takes on a target port, as
// istiod's buildInboundFilterChains: the PeerAuthentication mode, where PERMISSIVE is
// STRICT for a pod labelled security.istio.io/tlsMode=istio (clients will use mTLS) and
// plaintext otherwise, since gRPC cannot serve both on one port.
func GRPCInboundMode(m *model.Model, pod *model.Pod, target uint16) MTLSMode {
	mode := EffectiveMTLSMode(m, pod, target)
	if mode == MTLSPermissive {
		if pod.Labels[TLSModeLabel] == TLSModeIstio {
			return MTLSStrict
		}
		return MTLSDisable
	}
	return mode
}

// grpcInboundListeners returns, for each target port of the services selecting the pod,
// the listener an xDS-enabled gRPC server asks for, under each address it may listen
// on: one filter chain whose HCM routes every request to the server itself
// (non_forwarding_action), over mTLS from the certificate provider when the port is
// STRICT. AuthorizationPolicy (istiod's gRPC RBAC filters) is not applied yet.
func grpcInboundListeners(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	seen := map[uint16]bool{}
	var targets []uint16
	for _, svc := range m.ServicesFor(pod) {
		for _, p := range svc.Ports {
			if !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				targets = append(targets, p.TargetPort)
			}
		}
	}
	var out []types.Resource
	for _, target := range targets {
		strict := GRPCInboundMode(m, pod, target) == MTLSStrict
		chain, err := grpcInboundChain(strict)
		if err != nil {
			return nil, err
		}
		hosts := append(append([]string{}, grpcServerHosts...), pod.IP.String())
		for _, h := range hosts {
			out = append(out, &listener.Listener{
				Name: GRPCServerListenerPrefix + net.JoinHostPort(h, strconv.Itoa(int(target))),
				Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Address: h, PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(target)},
				}}},
				FilterChains: []*listener.FilterChain{chain},
			})
		}
	}
	return out, nil
}

// grpcInboundChain is istiod's buildInboundFilterChain for a proxyless server, named
// "inbound-mtls" or "inbound-plaintext".
func grpcInboundChain(mtls bool) (*listener.FilterChain, error) {
	suffix := "plaintext"
	if mtls {
		suffix = "mtls"
	}
	r, err := typed(&router.Router{})
	if err != nil {
		return nil, err
	}
	manager, err := typed(&hcm.HttpConnectionManager{
		StatPrefix: "inbound-hcm" + suffix, // empty in istiod's (see grpcListeners)
		RouteSpecifier: &hcm.HttpConnectionManager_RouteConfig{RouteConfig: &route.RouteConfiguration{
			Name: "inbound",
			VirtualHosts: []*route.VirtualHost{{
				Name:    "inbound|grpc",
				Domains: []string{"*"},
				Routes: []*route.Route{{
					Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
					Action: &route.Route_NonForwardingAction{NonForwardingAction: &route.NonForwardingAction{}},
				}},
			}},
		}},
		HttpFilters: []*hcm.HttpFilter{{Name: wellknown.Router, ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: r}}},
	})
	if err != nil {
		return nil, err
	}
	fc := &listener.FilterChain{
		Name:    "inbound-" + suffix,
		Filters: []*listener.Filter{{Name: "inbound-hcm" + suffix, ConfigType: &listener.Filter_TypedConfig{TypedConfig: manager}}},
	}
	if mtls {
		ts, err := typed(&tls.DownstreamTlsContext{
			CommonTlsContext:         grpcTLSContext(nil),
			RequireClientCertificate: wrapperspb.Bool(true),
		})
		if err != nil {
			return nil, err
		}
		fc.TransportSocket = &core.TransportSocket{Name: tlsTransportSocket, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: ts}}
	}
	return fc, nil
}

// grpcTLSContext is istiod's buildCommonTLSContext: the certificate and the roots from
// the bootstrap's "default" certificate provider (certificate "default", roots
// "ROOTCA"), and the peer's SANs when given. Departure: istiod puts the roots in a
// combined_validation_context without its required validation_context_sds_secret_config
// (Envoy's validation refuses it; gRPC does not validate), and repeats the certificate
// in the deprecated fields for gRPC before 1.66; meshlab sends the current fields only,
// the roots in validation_context, which every gRPC since 1.66 reads.
func grpcTLSContext(sans []string) *tls.CommonTlsContext {
	var match []*matcher.StringMatcher
	for _, s := range sans {
		match = append(match, &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}})
	}
	return &tls.CommonTlsContext{
		TlsCertificateProviderInstance: &tls.CertificateProviderPluginInstance{InstanceName: GRPCCertProvider, CertificateName: "default"},
		ValidationContextType: &tls.CommonTlsContext_ValidationContext{ValidationContext: &tls.CertificateValidationContext{
			MatchSubjectAltNames:          match, //nolint:staticcheck // deprecated, and istiod still sends it to proxyless gRPC.
			CaCertificateProviderInstance: &tls.CertificateProviderPluginInstance{InstanceName: GRPCCertProvider, CertificateName: "ROOTCA"},
		}},
	}
}

// grpcRoutes returns one route configuration per service port, named after its default
// cluster as istiod names gRPC route configurations, holding only that service's
// virtual host: the sidecar's routes for it (VirtualService matches, weighted clusters,
// retries, faults), with the timeout as max_stream_duration, the field grpc-go reads
// (istiod's setTimeout for proxyless nodes), and domains with their ":<port>" forms,
// since a gRPC client matches the name it dialled, port included.
func grpcRoutes(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	byHost := servicePortsByHost(m)
	var out []types.Resource
	for _, sp := range grpcServicePorts(m) {
		rs, err := serviceRoutes(m, pod, sp, byHost)
		if err != nil {
			return nil, fmt.Errorf("build grpc route %s: %w", sp.clusterName(), err)
		}
		for _, r := range rs {
			if a := r.GetRoute(); a != nil {
				a.MaxStreamDuration = &route.RouteAction_MaxStreamDuration{MaxStreamDuration: a.GetTimeout()}
				a.MaxGrpcTimeout = nil //nolint:staticcheck // istiod sets only max_stream_duration for gRPC.
			}
		}
		out = append(out, &route.RouteConfiguration{
			Name: sp.clusterName(),
			VirtualHosts: []*route.VirtualHost{{
				Name:                       sp.vhostName(),
				Domains:                    grpcDomains(sp, pod.Namespace),
				Routes:                     rs,
				IncludeRequestAttemptCount: true,
			}},
		})
	}
	return out, nil
}

// grpcDomains are the sidecar's domains of sp, each also with ":<port>", as istiod
// writes them when the port is not ignored in host matching.
func grpcDomains(sp servicePort, ns string) []string {
	port := strconv.Itoa(int(sp.port.Port))
	var out []string
	for _, d := range sp.domains(ns) {
		if d[len(d)-1] == '.' {
			continue // the trailing-dot form is for Host headers, not dial targets
		}
		out = append(out, d, net.JoinHostPort(d, port))
	}
	return out
}

// grpcClusters returns the EDS clusters of every service port, the default and one per
// DestinationRule subset, with what grpc-go honours of the traffic policy (istiod's
// grpcgen clusterBuilder): mTLS from the certificate provider only when the rule says
// ISTIO_MUTUAL (gRPC has no auto-mTLS), LEAST_REQUEST, and http2MaxRequests as the
// circuit breaker's max_requests. Other policies are left out, as istiod leaves them.
func grpcClusters(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	var out []types.Resource
	for _, sp := range grpcServicePorts(m) {
		for _, oc := range outboundClustersOf(m, pod, sp) {
			c := &cluster.Cluster{
				Name:                 oc.name,
				AltStatName:          oc.name + ";",
				ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
				EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{
					ServiceName: oc.name,
					EdsConfig:   &core.ConfigSource{ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}},
				},
			}
			tp := oc.policy
			if tp.GetTls().GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL {
				ts, err := typed(&tls.UpstreamTlsContext{CommonTlsContext: grpcTLSContext(serviceSANs(m, sp, nil))})
				if err != nil {
					return nil, err
				}
				c.TransportSocket = &core.TransportSocket{Name: tlsTransportSocket, ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: ts}}
			}
			if tp.GetLoadBalancer().GetSimple() == networking.LoadBalancerSettings_LEAST_REQUEST {
				c.LbPolicy = cluster.Cluster_LEAST_REQUEST
			}
			if n := tp.GetConnectionPool().GetHttp().GetHttp2MaxRequests(); n > 0 {
				c.CircuitBreakers = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(uint32(n))}}}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// grpcEndpoints returns the load assignment of every cluster grpcClusters makes (a
// locality weighted by its endpoints, which grpc-go needs: it drops a locality of
// weight 0).
func grpcEndpoints(m *model.Model, pod *model.Pod) []types.Resource {
	var out []types.Resource
	for _, sp := range grpcServicePorts(m) {
		all := sp.instances(m)
		for _, oc := range outboundClustersOf(m, pod, sp) {
			out = append(out, loadAssignment(m, oc.name, subsetInstances(all, oc.labels)))
		}
	}
	return out
}
