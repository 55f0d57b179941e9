package xds

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// routes returns one route configuration per outbound HTTP port number, named after the
// port, as the outbound HTTP listeners request them over RDS.
func routes(m *model.Model, pod *model.Pod) ([]types.Resource, error) {
	if pod.Router {
		return gatewayRoutes(m, pod)
	}
	var out []types.Resource
	byHost := servicePortsByHost(m)
	for _, port := range httpPorts(m) {
		rc, err := routeConfig(m, pod, port, byHost)
		if err != nil {
			return nil, fmt.Errorf("build route %s: %w", RouteName(port), err)
		}
		out = append(out, rc)
	}
	for _, sp := range outboundPorts(m) {
		if !sp.sniffed() {
			continue
		}
		rc, err := sniffedRouteConfig(m, pod, sp, byHost)
		if err != nil {
			return nil, fmt.Errorf("build route %s: %w", sniffedRouteName(sp), err)
		}
		out = append(out, rc)
	}
	return out, nil
}

// sniffedRouteConfig is the route configuration "<host>:<port>" of a sniffed service
// port's listener (outboundAutoListener), as istiod's getVirtualHostsForSniffedServicePort:
// the service's virtual host alone, matching every domain (the listener already chose
// the service by its VIP), and no catch-all virtual host.
func sniffedRouteConfig(m *model.Model, pod *model.Pod, sp servicePort, byHost map[string][]servicePort) (*route.RouteConfiguration, error) {
	rs, err := serviceRoutes(m, pod, sp, byHost)
	if err != nil {
		return nil, fmt.Errorf("virtual host %s: %w", sp.vhostName(), err)
	}
	return &route.RouteConfiguration{
		Name: sniffedRouteName(sp),
		VirtualHosts: []*route.VirtualHost{{
			Name:                       sp.vhostName(),
			Domains:                    []string{"*"},
			Routes:                     rs,
			IncludeRequestAttemptCount: true,
		}},
		ValidateClusters:               wrapperspb.Bool(false),
		IgnorePortInHostMatching:       true,
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(1 << 20),
	}, nil
}

// routeConfig holds a virtual host per HTTP service with port (sorted by name), each
// matching the names the pod can use for the service and routing by the service's
// VirtualService when it has one, then the catch-all virtual host of the mesh's
// outboundTrafficPolicy: allow_any to PassthroughCluster, or block_all answering 502.
func routeConfig(m *model.Model, pod *model.Pod, port uint16, byHost map[string][]servicePort) (*route.RouteConfiguration, error) {
	var vhosts []*route.VirtualHost
	for _, sp := range outboundPorts(m) {
		// A sniffed port's service has a virtual host on its port's route too, as
		// istiod's (IsProtocolSniffingEnabledForPort), for HTTP that reaches the port's
		// shared listener rather than the service's own (a pod IP, another VIP).
		if sp.port.Port != port || !sp.port.Protocol.IsHTTPOrSniffed() {
			continue
		}
		rs, err := serviceRoutes(m, pod, sp, byHost)
		if err != nil {
			return nil, fmt.Errorf("virtual host %s: %w", sp.vhostName(), err)
		}
		vhosts = append(vhosts, &route.VirtualHost{
			Name:    sp.vhostName(),
			Domains: sp.domains(pod.Namespace),
			Routes:  rs,
			// Istio's proxyHeaders default: upstream requests carry x-envoy-attempt-count.
			IncludeRequestAttemptCount: true,
		})
	}
	if port == 80 {
		extra, err := port80VirtualHosts(m, pod, byHost, vhosts)
		if err != nil {
			return nil, err
		}
		vhosts = append(vhosts, extra...)
	}
	sort.Slice(vhosts, func(i, j int) bool { return vhosts[i].GetName() < vhosts[j].GetName() })
	vhosts = append(vhosts, catchAllVirtualHost(m.Mesh.OutboundTrafficPolicy))
	return &route.RouteConfiguration{
		Name:             RouteName(port),
		VirtualHosts:     vhosts,
		ValidateClusters: wrapperspb.Bool(false),
		// As istiod's sidecar routes: a Host header's port is ignored, so domains need
		// no ":<port>" variants; direct responses (block_all, VirtualService
		// directResponse) may carry up to 1 MiB.
		IgnorePortInHostMatching:       true,
		MaxDirectResponseBodySizeBytes: wrapperspb.UInt32(1 << 20),
	}, nil
}

// port80VirtualHosts is istiod's port-80 rule (route.buildSidecarVirtualHostsForVirtualService,
// its "gross HACK"): on route 80, a mesh-bound VirtualService's host that has no HTTP
// port 80 of its own still gets a virtual host "<host>:80" matching the host, with the
// VirtualService's routes for port 80, so plain HTTP to port 80 of such a host (the
// egress TLS origination task's http://my-nginx.mesh-external.svc.cluster.local, a
// Service of port 443 only) is routed as the VirtualService says. have are the virtual
// hosts the route already holds.
func port80VirtualHosts(m *model.Model, pod *model.Pod, byHost map[string][]servicePort, have []*route.VirtualHost) ([]*route.VirtualHost, error) {
	taken := map[string]bool{}
	for _, vh := range have {
		for _, d := range vh.GetDomains() {
			taken[d] = true
		}
	}
	var out []*route.VirtualHost
	for _, vs := range m.Istio.VirtualServices {
		if !model.AppliesToMesh(vs.Spec) || len(vs.Spec.GetHttp()) == 0 {
			continue
		}
		for _, h := range vs.Spec.GetHosts() {
			host := resolveHost(m, h, vs.Namespace)
			if strings.Contains(host, "*") || taken[host] || virtualServiceFor(m, host) != vs {
				continue
			}
			rs, err := vsRouteBuilder{m: m, pod: pod, vs: vs, port: 80, byHost: byHost}.routes()
			if err != nil {
				return nil, fmt.Errorf("VirtualService %s/%s: %w", vs.Namespace, vs.Name, err)
			}
			if len(rs) == 0 {
				continue
			}
			taken[host] = true
			out = append(out, &route.VirtualHost{
				Name: net.JoinHostPort(host, "80"), Domains: []string{host}, Routes: rs,
				IncludeRequestAttemptCount: true,
			})
		}
	}
	return out, nil
}

// serviceRoutes returns the routes of one service port: its VirtualService's http routes
// for this proxy, or the default route to the port's cluster when it has none (or none
// applies to this proxy).
func serviceRoutes(m *model.Model, pod *model.Pod, sp servicePort, byHost map[string][]servicePort) ([]*route.Route, error) {
	vs := virtualServiceFor(m, sp.host)
	if vs == nil || len(vs.Spec.GetHttp()) == 0 {
		return []*route.Route{defaultOutboundRoute(sp.clusterName(), traceOperation(sp.host, sp.port.Port))}, nil
	}
	rs, err := vsRouteBuilder{m: m, pod: pod, vs: vs, port: sp.port.Port, byHost: byHost}.routes()
	if err != nil {
		return nil, fmt.Errorf("VirtualService %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	if len(rs) == 0 {
		return []*route.Route{defaultOutboundRoute(sp.clusterName(), traceOperation(sp.host, sp.port.Port))}, nil
	}
	return rs, nil
}

// catchAllVirtualHost is the last virtual host of every outbound route configuration.
func catchAllVirtualHost(policy model.OutboundTrafficPolicy) *route.VirtualHost {
	if policy == model.RegistryOnly {
		return &route.VirtualHost{
			Name:                       BlockAllVirtualHost,
			Domains:                    []string{"*"},
			IncludeRequestAttemptCount: true,
			Routes: []*route.Route{{
				Name:   BlockAllVirtualHost,
				Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_DirectResponse{DirectResponse: &route.DirectResponseAction{Status: 502}},
			}},
		}
	}
	return &route.VirtualHost{
		Name:    AllowAnyVirtualHost,
		Domains: []string{"*"},
		Routes: []*route.Route{{
			Name:  AllowAnyVirtualHost,
			Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{
				ClusterSpecifier: &route.RouteAction_Cluster{Cluster: PassthroughCluster},
				Timeout:          durationpb.New(0),
				MaxGrpcTimeout:   durationpb.New(0), //nolint:staticcheck // Istio still sets it.
			}},
		}},
		IncludeRequestAttemptCount: true,
	}
}

// defaultRoute sends every path to cluster with no timeout (Istio disables Envoy's 15s
// default unless a VirtualService sets one).
func defaultRoute(cluster string) *route.Route {
	return &route.Route{
		Name:  "default",
		Match: &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
		Action: &route.Route_Route{Route: &route.RouteAction{
			ClusterSpecifier: &route.RouteAction_Cluster{Cluster: cluster},
			Timeout:          durationpb.New(0),
		}},
	}
}

// defaultOutboundRoute is the route of a service port no VirtualService routes, as
// Istio's BuildDefaultHTTPOutboundRoute: the default route, named for tracing after the
// service port ("<host>:<port>/*"), with no gRPC timeout either and Istio's default
// retry policy.
func defaultOutboundRoute(cluster, operation string) *route.Route {
	r := defaultRoute(cluster)
	r.Decorator = &route.Decorator{Operation: operation}
	r.GetRoute().MaxGrpcTimeout = durationpb.New(0) //nolint:staticcheck // Istio still sets it.
	r.GetRoute().RetryPolicy = retryPolicy(nil)
	return r
}

// defaultInboundRoute is the route of an inbound HTTP chain, as Istio's
// BuildDefaultHTTPInboundRoute: no timeout, no maximum stream duration nor gRPC
// timeout header, and except for gRPC two retries of a reset before the request
// reached the app.
func defaultInboundRoute(cluster, operation string, protocol model.Protocol) *route.Route {
	r := defaultRoute(cluster)
	r.Decorator = &route.Decorator{Operation: operation}
	r.GetRoute().MaxStreamDuration = &route.RouteAction_MaxStreamDuration{
		MaxStreamDuration:    durationpb.New(0),
		GrpcTimeoutHeaderMax: durationpb.New(0),
	}
	if protocol != model.ProtocolGRPC {
		r.GetRoute().RetryPolicy = &route.RetryPolicy{RetryOn: "reset-before-request", NumRetries: wrapperspb.UInt32(2)}
	}
	return r
}

// traceOperation is Istio's tracing operation name of a service port,
// "<host>:<port>/*" (":0/*" for the inbound passthrough chains).
func traceOperation(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port))) + "/*"
}
