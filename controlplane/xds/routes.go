package xds

import (
	"sort"

	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/controlplane/model"
)

// routes returns one route configuration per outbound HTTP port number, named after the
// port, as the outbound HTTP listeners request them over RDS.
func routes(m *model.Model, pod *model.Pod) []types.Resource {
	var out []types.Resource
	for _, port := range httpPorts(m) {
		out = append(out, routeConfig(m, pod, port))
	}
	return out
}

// routeConfig holds a virtual host per HTTP service with port (sorted by name), each
// matching the names the pod can use for the service, then allow_any, which sends
// unknown hosts to PassthroughCluster.
func routeConfig(m *model.Model, pod *model.Pod, port uint16) *route.RouteConfiguration {
	var vhosts []*route.VirtualHost
	for _, sp := range outboundPorts(m) {
		if sp.port.Port != port || !sp.port.Protocol.IsHTTP() {
			continue
		}
		vhosts = append(vhosts, &route.VirtualHost{
			Name:    VirtualHostName(sp.svc, port),
			Domains: Domains(sp.svc, port, pod.Namespace),
			Routes:  []*route.Route{defaultRoute(sp.clusterName())},
		})
	}
	sort.Slice(vhosts, func(i, j int) bool { return vhosts[i].GetName() < vhosts[j].GetName() })
	vhosts = append(vhosts, &route.VirtualHost{
		Name:    AllowAnyVirtualHost,
		Domains: []string{"*"},
		Routes:  []*route.Route{defaultRoute(PassthroughCluster)},
	})
	return &route.RouteConfiguration{
		Name:             RouteName(port),
		VirtualHosts:     vhosts,
		ValidateClusters: wrapperspb.Bool(false),
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
