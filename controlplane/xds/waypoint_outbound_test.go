package xds

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// TestWaypointOutboundClusters: fidelity's outbound scenario. reviews' VirtualService in
// the waypoint sends jason to ratings' subset v1, a service in another namespace the
// waypoint does not serve: the route names outbound|9080|v1|ratings..., and the waypoint
// now has that cluster (and the service's default one, as istiod), with endpoints
// tunneled over HBONE through connect_originate. A service nothing routes to gets none.
func TestWaypointOutboundClusters(t *testing.T) {
	t.Parallel()
	m := fidelityWaypointModel(t, "ambient-waypoint-outbound")
	for _, p := range m.Pods {
		if model.DataplaneMode(m, p) == model.DataplaneAmbient { // enrolled, as the node agent marks them
			p.Annotations = map[string]string{model.AnnotationAmbientRedirection: model.AmbientRedirectionEnabled}
		}
	}
	res := generateTestWaypoint(t, m)
	clusters := map[string]*cluster.Cluster{}
	for _, r := range res[resource.ClusterType] {
		clusters[r.(*cluster.Cluster).GetName()] = r.(*cluster.Cluster)
	}
	const (
		v1  = "outbound|9080|v1|ratings.backend.svc.cluster.local"
		def = "outbound|9080||ratings.backend.svc.cluster.local"
	)
	for _, name := range []string{v1, def} {
		c := clusters[name]
		if c == nil {
			t.Fatalf("no cluster %s; have %v", name, len(clusters))
		}
		if ms := c.GetTransportSocketMatches(); len(ms) == 0 || ms[0].GetName() != "hbone" {
			t.Errorf("%s: transport socket matches %v, want hbone first", name, ms)
		}
	}
	// The route names the subset cluster.
	var routed []string
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == MainInternalListener {
			for _, fc := range l.GetFilterChains() {
				if fc.GetName() != "inbound-vip|9080|http|reviews.default.svc.cluster.local" {
					continue
				}
				for _, rt := range chainHCM(t, fc).GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
					routed = append(routed, rt.GetRoute().GetCluster())
				}
			}
		}
	}
	if len(routed) == 0 || routed[0] != v1 {
		t.Errorf("reviews' routes go to %v, want %s first", routed, v1)
	}
	// Its endpoints: ratings' pod through connect_originate, tunnel metadata set.
	for _, r := range res[resource.EndpointType] {
		la := r.(*endpoint.ClusterLoadAssignment)
		if la.GetClusterName() != v1 {
			continue
		}
		eps := la.GetEndpoints()
		if len(eps) != 1 || len(eps[0].GetLbEndpoints()) != 1 {
			t.Fatalf("%s: endpoints %v, want ratings' one pod", v1, eps)
		}
		e := eps[0].GetLbEndpoints()[0]
		if e.GetEndpoint().GetAddress().GetEnvoyInternalAddress().GetServerListenerName() != ConnectOriginateListener ||
			e.GetMetadata().GetFilterMetadata()[TransportSocketMatchKey].GetFields()["tunnel"].GetStringValue() != "http" {
			t.Errorf("%s: endpoint %v, want connect_originate with tunnel http", v1, e)
		}
		return
	}
	t.Errorf("no load assignment %s", v1)
}
