package xds

import (
	"os"
	"slices"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacpb "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netrbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// waypointL7Model is fidelity's L7 waypoint scenario (targetRefs policies, a GAMMA
// HTTPRoute on reviews, a VirtualService on ratings), the one istiod's output is held to.
func waypointL7Model(t *testing.T) *model.Model {
	t.Helper()
	return fidelityWaypointModel(t, "ambient-waypoint-l7")
}

// fidelityWaypointModel builds fidelity's waypoint scenario name
// (fidelity/testdata/waypoint/<name>.yaml).
func fidelityWaypointModel(t *testing.T, name string) *model.Model {
	t.Helper()
	data, err := os.ReadFile("../../fidelity/testdata/waypoint/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return buildWaypointModel(t, name+".yaml", data)
}

func waypointChains(t *testing.T, m *model.Model) map[string]*listener.FilterChain {
	t.Helper()
	var spec WaypointSpec
	found := false
	for _, p := range m.Pods {
		if w, ok := WaypointOf(m, p); ok {
			spec, found = w, true
		}
	}
	if !found {
		t.Fatal("no waypoint pod")
	}
	res, err := GenerateWaypoint(m, spec)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "waypoint-l7", dumpJSON(t, res))
	out := map[string]*listener.FilterChain{}
	for _, r := range res[resource.ListenerType] {
		if l := r.(*listener.Listener); l.GetName() == MainInternalListener {
			for _, fc := range l.GetFilterChains() {
				out[fc.GetName()] = fc
			}
		}
	}
	return out
}

func chainHCM(t *testing.T, fc *listener.FilterChain) *hcm.HttpConnectionManager {
	t.Helper()
	for _, f := range fc.GetFilters() {
		if f.GetName() == wellknown.HTTPConnectionManager {
			h := &hcm.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	t.Fatalf("chain %s has no connection manager", fc.GetName())
	return nil
}

// rbacPolicies returns the RBAC policy names of an HCM's RBAC filters, by action.
func rbacPolicies(t *testing.T, h *hcm.HttpConnectionManager) map[rbacpb.RBAC_Action][]string {
	t.Helper()
	out := map[rbacpb.RBAC_Action][]string{}
	for _, f := range h.GetHttpFilters() {
		if f.GetName() != wellknown.HTTPRoleBasedAccessControl {
			continue
		}
		r := &httprbac.RBAC{}
		if err := f.GetTypedConfig().UnmarshalTo(r); err != nil {
			t.Fatal(err)
		}
		for n := range r.GetRules().GetPolicies() {
			out[r.GetRules().GetAction()] = append(out[r.GetRules().GetAction()], n)
		}
		slices.Sort(out[r.GetRules().GetAction()])
	}
	return out
}

// TestWaypointAuthorizationByTargetRefs: a policy applies in a waypoint's chains by what
// its targetRefs name (the Gateway: every chain; a Service: that one's; GatewayClass
// istio-waypoint from the root namespace: every chain), never by selector, with the
// caller's identity read from the filter state; sidecars never take a targetRefs policy.
func TestWaypointAuthorizationByTargetRefs(t *testing.T) {
	t.Parallel()
	m := waypointL7Model(t)
	chains := waypointChains(t, m)
	pp := rbacPolicies(t, chainHCM(t, chains["inbound-vip|9080|http|productpage.default.svc.cluster.local"]))
	if got, want := pp[rbacpb.RBAC_ALLOW], []string{"ns[default]-policy[productpage-viewer]-rule[0]"}; !slices.Equal(got, want) {
		t.Errorf("productpage ALLOW policies %v, want %v", got, want)
	}
	wantDeny := []string{"ns[default]-policy[no-delete]-rule[0]", "ns[istio-system]-policy[no-admin]-rule[0]"}
	if got := pp[rbacpb.RBAC_DENY]; !slices.Equal(got, wantDeny) {
		t.Errorf("productpage DENY policies %v, want %v", got, wantDeny)
	}
	ratings := rbacPolicies(t, chainHCM(t, chains["inbound-vip|9080|http|ratings.default.svc.cluster.local"]))
	if len(ratings[rbacpb.RBAC_ALLOW]) != 0 {
		t.Errorf("ratings' chain has ALLOW policies %v: the selector policy ratings-selector is no waypoint's", ratings[rbacpb.RBAC_ALLOW])
	}
	// The ALLOW rule matches curl's identity in the filter state, never a certificate.
	h := chainHCM(t, chains["inbound-vip|9080|http|productpage.default.svc.cluster.local"])
	var dump strings.Builder
	for _, f := range h.GetHttpFilters() {
		dump.WriteString(f.String())
	}
	if !strings.Contains(dump.String(), peerPrincipalState) || strings.Contains(dump.String(), "authenticated") {
		t.Errorf("the waypoint's RBAC does not match peers by the filter state %s", peerPrincipalState)
	}
	// The TCP Service's chain has network RBAC between the metadata exchange and tcp_proxy.
	var names []string
	for _, f := range chains["inbound-vip|27017|tcp|mongodb.default.svc.cluster.local"].GetFilters() {
		names = append(names, f.GetName())
		if f.GetName() == wellknown.RoleBasedAccessControl {
			r := &netrbac.RBAC{}
			if err := f.GetTypedConfig().UnmarshalTo(r); err != nil {
				t.Fatal(err)
			}
			if _, ok := r.GetRules().GetPolicies()["ns[default]-policy[mongodb-l4]-rule[0]"]; !ok || r.GetRules().GetAction() != rbacpb.RBAC_DENY {
				t.Errorf("mongodb's network RBAC is %v", r.GetRules())
			}
		}
	}
	if want := []string{MetadataExchangeFilter, wellknown.RoleBasedAccessControl, StatsFilter, wellknown.TCPProxy}; !slices.Equal(names, want) {
		t.Errorf("mongodb chain filters %v, want %v", names, want)
	}
	// No sidecar or gateway pod takes a policy with targetRefs.
	for _, p := range m.Pods {
		if p.Waypoint {
			continue
		}
		for _, rules := range []bool{false, true} {
			a := authzFor(m, p, rules)
			for _, set := range append(a.allow.sets(), a.deny.sets()...) {
				for n := range set.GetPolicies() {
					if !strings.Contains(n, "ratings-selector") {
						t.Errorf("pod %s takes %s", p.Name, n)
					}
				}
			}
		}
	}
}

// TestWaypointRoutesFromGAMMAAndVirtualService: reviews' chain routes by its HTTPRoute
// (header match, then 90/10 between reviews-v1 and reviews-v2 inbound-vip clusters,
// Gateway API semantics), ratings' by its VirtualService (fault, timeout, retries).
func TestWaypointRoutesFromGAMMAAndVirtualService(t *testing.T) {
	t.Parallel()
	m := waypointL7Model(t)
	chains := waypointChains(t, m)
	rc := chainHCM(t, chains["inbound-vip|9080|http|reviews.default.svc.cluster.local"]).GetRouteConfig()
	rs := rc.GetVirtualHosts()[0].GetRoutes()
	if len(rs) != 2 {
		t.Fatalf("reviews has %d routes, want 2", len(rs))
	}
	if c := rs[0].GetRoute().GetCluster(); c != "inbound-vip|9080|http|reviews-v2.default.svc.cluster.local" || rs[0].GetMatch().GetHeaders()[0].GetName() != "end-user" {
		t.Errorf("reviews' first route goes to %q matching %v", c, rs[0].GetMatch())
	}
	var weights []string
	for _, c := range rs[1].GetRoute().GetWeightedClusters().GetClusters() {
		weights = append(weights, c.GetName()+"="+c.GetWeight().String())
	}
	want := []string{"inbound-vip|9080|http|reviews-v1.default.svc.cluster.local=value:90", "inbound-vip|9080|http|reviews-v2.default.svc.cluster.local=value:10"}
	if !slices.Equal(weights, want) {
		t.Errorf("reviews' weights %v, want %v", weights, want)
	}
	if a := rs[1].GetRoute(); a.GetTimeout().AsDuration().Seconds() != 3 || a.GetRetryPolicy().GetNumRetries().GetValue() != 3 || a.GetClusterNotFoundResponseCode() != route.RouteAction_INTERNAL_SERVER_ERROR {
		t.Errorf("reviews' weighted route: timeout %v, retries %v, cluster_not_found %v", a.GetTimeout(), a.GetRetryPolicy(), a.GetClusterNotFoundResponseCode())
	}
	rr := chainHCM(t, chains["inbound-vip|9080|http|ratings.default.svc.cluster.local"]).GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	if len(rr) != 1 || rr[0].GetTypedPerFilterConfig()[FaultFilter] == nil || rr[0].GetRoute().GetTimeout().AsDuration().Seconds() != 5 {
		t.Errorf("ratings' routes %v, want one with the fault and a 5 s timeout", rr)
	}
}
