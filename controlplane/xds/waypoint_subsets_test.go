package xds

import (
	"net/netip"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// TestWaypointDestinationRuleSubsets: fidelity's subsets scenario. A waypoint gets an
// inbound-vip cluster per subset of the DestinationRule of a service it serves
// (inbound-vip|9080|http/v1|reviews...), shaped by the subset's merged traffic policy,
// whose endpoints are only the subset's pods; the VirtualService's routes name exactly
// those clusters; a rule without subsets shapes the port's own cluster.
func TestWaypointDestinationRuleSubsets(t *testing.T) {
	t.Parallel()
	m := fidelityWaypointModel(t, "ambient-waypoint-subsets")
	res := generateTestWaypoint(t, m) // waypoint_tls_test.go
	clusters := map[string]*cluster.Cluster{}
	for _, r := range res[resource.ClusterType] {
		c := r.(*cluster.Cluster)
		clusters[c.GetName()] = c
	}
	const (
		v1      = "inbound-vip|9080|http/v1|reviews.default.svc.cluster.local"
		v2      = "inbound-vip|9080|http/v2|reviews.default.svc.cluster.local"
		reviews = "inbound-vip|9080|http|reviews.default.svc.cluster.local"
		ratings = "inbound-vip|9080|http|ratings.default.svc.cluster.local"
	)
	for _, name := range []string{reviews, v1, v2, ratings} {
		if clusters[name] == nil {
			t.Fatalf("no cluster %s", name)
		}
	}
	meta := func(name, key string) string {
		return clusters[name].GetMetadata().GetFilterMetadata()["istio"].GetFields()[key].GetStringValue()
	}
	if got := meta(v1, "subset"); got != "http/v1" {
		t.Errorf("%s: metadata subset %q", v1, got)
	}
	// The rule sets no policy for reviews or its v1: istiod names it only on v2's cluster.
	if meta(reviews, "config") != "" || meta(v1, "config") != "" || meta(v2, "config") != "/apis/networking.istio.io/v1/namespaces/default/destination-rule/reviews" {
		t.Errorf("config metadata: reviews %q, v1 %q, v2 %q", meta(reviews, "config"), meta(v1, "config"), meta(v2, "config"))
	}
	if lb := clusters[v2].GetLbPolicy(); lb != cluster.Cluster_ROUND_ROBIN {
		t.Errorf("%s: lb %v, want the subset's ROUND_ROBIN", v2, lb)
	}
	if lb := clusters[v1].GetLbPolicy(); lb != cluster.Cluster_LEAST_REQUEST {
		t.Errorf("%s: lb %v, want the default LEAST_REQUEST", v1, lb)
	}
	r := clusters[ratings]
	if r.GetOutlierDetection().GetConsecutive_5Xx().GetValue() != 1 || r.GetCircuitBreakers().GetThresholds()[0].GetMaxPendingRequests().GetValue() != 1 {
		t.Errorf("ratings' cluster does not carry its rule's policy: outlier %v, breakers %v", r.GetOutlierDetection(), r.GetCircuitBreakers())
	}

	// Each subset's endpoints are its pods only.
	podIP := map[string]string{}
	for _, p := range m.Pods {
		podIP[p.Workload] = netip.AddrPortFrom(p.IP, 9080).String()
	}
	eps := map[string][]string{}
	for _, r := range res[resource.EndpointType] {
		la := r.(*endpoint.ClusterLoadAssignment)
		for _, loc := range la.GetEndpoints() {
			for _, e := range loc.GetLbEndpoints() {
				eps[la.GetClusterName()] = append(eps[la.GetClusterName()], e.GetEndpoint().GetAddress().GetEnvoyInternalAddress().GetEndpointId())
			}
		}
	}
	if got, want := eps[v1], []string{podIP["reviews-v1"]}; !slices.Equal(got, want) {
		t.Errorf("%s endpoints %v, want %v", v1, got, want)
	}
	if got, want := eps[v2], []string{podIP["reviews-v2"]}; !slices.Equal(got, want) {
		t.Errorf("%s endpoints %v, want %v", v2, got, want)
	}
	if len(eps[reviews]) != 2 {
		t.Errorf("%s endpoints %v, want both versions", reviews, eps[reviews])
	}

	// The VirtualService's split names the subset clusters, which exist.
	var split []string
	for _, r := range res[resource.ListenerType] {
		l := r.(*listener.Listener)
		if l.GetName() != MainInternalListener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			if fc.GetName() != reviews {
				continue
			}
			for _, wc := range chainHCM(t, fc).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()[0].GetRoute().GetWeightedClusters().GetClusters() {
				split = append(split, wc.GetName())
			}
		}
	}
	if want := []string{v1, v2}; !slices.Equal(split, want) {
		t.Errorf("reviews' split goes to %v, want %v", split, want)
	}
}
