package xds

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// A route in a waypoint may send a service's requests to a service the waypoint does
// not serve (waypoint_routes.go names its outbound|<port>|<subset>|<host> cluster). As
// istiod's filterWaypointOutboundServices, the waypoint then gets that service's outbound
// clusters, a sidecar's (every port, one more per subset of its DestinationRule, auto
// mTLS with HBONE first), and their endpoints, tunneled to the pods over HBONE through
// connect_originate (hbone_send.go): the services any mesh VirtualService of a served
// host routes or mirrors to, the served ones left out.

// waypointOutboundHosts returns the hostnames of the services the mesh VirtualServices
// of the served hosts name as destinations, except served ones.
func waypointOutboundHosts(m *model.Model, served map[string]*model.Service) map[string]bool {
	out := map[string]bool{}
	for _, vs := range m.Istio.VirtualServices {
		if vs == nil || vs.Spec == nil || !model.AppliesToMesh(vs.Spec) || !namesServed(m, vs, served) {
			continue
		}
		for _, d := range virtualServiceDestinations(vs.Spec) {
			if host := resolveHost(m, d, vs.Namespace); host != "" && served[host] == nil {
				out[host] = true
			}
		}
	}
	return out
}

// namesServed reports whether one of vs's hosts is a served service's.
func namesServed(m *model.Model, vs *model.IstioConfig[*networking.VirtualService], served map[string]*model.Service) bool {
	for _, h := range vs.Spec.GetHosts() {
		if served[resolveHost(m, h, vs.Namespace)] != nil {
			return true
		}
	}
	return false
}

// virtualServiceDestinations returns the hosts of every destination and mirror of vs's
// HTTP, TLS and TCP routes, as written.
func virtualServiceDestinations(vs *networking.VirtualService) []string {
	var out []string
	for _, h := range vs.GetHttp() {
		for _, r := range h.GetRoute() {
			out = append(out, r.GetDestination().GetHost())
		}
		if h.GetMirror() != nil {
			out = append(out, h.GetMirror().GetHost())
		}
		for _, mp := range h.GetMirrors() {
			out = append(out, mp.GetDestination().GetHost())
		}
	}
	for _, t := range vs.GetTls() {
		for _, r := range t.GetRoute() {
			out = append(out, r.GetDestination().GetHost())
		}
	}
	for _, t := range vs.GetTcp() {
		for _, r := range t.GetRoute() {
			out = append(out, r.GetDestination().GetHost())
		}
	}
	return out
}

// waypointOutbound returns the outbound clusters and load assignments of hosts, as the
// waypoint's pod (its namespace choosing the DestinationRules) would have them as a
// sidecar.
func waypointOutbound(m *model.Model, w WaypointSpec, hosts map[string]bool) (clusters, endpoints []types.Resource, err error) {
	if len(hosts) == 0 {
		return nil, nil, nil
	}
	pod := &model.Pod{Namespace: w.Namespace} // outboundClustersOf reads the proxy's namespace only
	for _, sp := range outboundPorts(m) {
		if !hosts[sp.host] {
			continue
		}
		for _, oc := range outboundClustersOf(m, pod, sp) {
			c, err := outboundCluster(m, sp, oc)
			if err != nil {
				return nil, nil, fmt.Errorf("build cluster %s: %w", oc.name, err)
			}
			c.AltStatName = statName(c.Name) // as every waypoint cluster's
			clusters = append(clusters, c)
		}
	}
	return clusters, hostEndpoints(m, pod, hosts), nil
}
