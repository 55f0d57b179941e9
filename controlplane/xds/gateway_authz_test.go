package xds

import (
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	rbacpb "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	httprbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	netrbac "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	typev1beta1 "istio.io/api/type/v1beta1"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/internal/testutil"
)

// A gateway takes the AuthorizationPolicies that select its pods, as istiod's listener
// builder gives every gateway chain its authz filters: the authz-ingress page's ALLOW of
// client IPs and a dry-run DENY (the authz-dry-run annotation) on the ingress gateway
// become the HTTP chain's RBAC filters ahead of the router (DENY with shadow rules only,
// then ALLOW), and the TCP chain's network RBAC filters ahead of tcp_proxy. Without a
// policy a gateway chain has no RBAC filter.
func TestGatewayAuthorization(t *testing.T) {
	t.Parallel()
	gw := gateway("mixed-gateway", httpServer(80, "*"),
		&networking.Server{Port: &networking.Port{Number: 31400, Name: "tcp", Protocol: "TCP"}, Hosts: []string{"*"}})
	tcpVS := vs("db", &networking.VirtualService{
		Hosts: []string{"*"}, Gateways: []string{"mixed-gateway"},
		Tcp: []*networking.TCPRoute{{Route: []*networking.RouteDestination{{Destination: &networking.Destination{
			Host: "db.default.svc.cluster.local", Port: &networking.PortSelector{Number: 5432}}}}}},
	})
	m := gatewayModel([]*model.IstioConfig[*networking.Gateway]{gw}, bookinfoVS("*"), tcpVS)
	plain := generateGateway(t, m, ingressPod)
	for _, l := range plain[resource.ListenerType] {
		for _, c := range l.(*listener.Listener).GetFilterChains() {
			if rbacFilterCount(t, c) != 0 {
				t.Errorf("listener %s has RBAC filters without a policy", l.(*listener.Listener).GetName())
			}
		}
	}

	ingress := &typev1beta1.WorkloadSelector{MatchLabels: map[string]string{"istio": "ingressgateway"}}
	allow := ap("istio-system", "ingress-policy", &security.AuthorizationPolicy{
		Selector: ingress,
		Rules:    []*security.Rule{{From: []*security.Rule_From{{Source: &security.Source{IpBlocks: []string{"1.2.3.4", "5.6.7.0/24"}}}}}},
	})
	dry := ap("istio-system", "deny-path-headers", &security.AuthorizationPolicy{
		Selector: ingress, Action: security.AuthorizationPolicy_DENY,
		Rules: []*security.Rule{{To: []*security.Rule_To{{Operation: &security.Operation{Paths: []string{"/headers"}}}}}},
	})
	dry.Annotations = map[string]string{model.DryRunAnnotation: "true"}
	m.Istio.AuthorizationPolicies = append(m.Istio.AuthorizationPolicies, allow, dry)
	res := generateGateway(t, m, ingressPod)
	testutil.Golden(t, "gateway-authz", dumpJSON(t, res))

	hf := hcmFilters(t, findListener(t, res, "0.0.0.0_8080").GetFilterChains()[0].GetFilters()[0])
	var rbacs []*httprbac.RBAC
	router := -1
	for i, f := range hf {
		switch f.GetName() {
		case "envoy.filters.http.rbac":
			var r httprbac.RBAC
			if err := f.GetTypedConfig().UnmarshalTo(&r); err != nil {
				t.Fatal(err)
			}
			if router >= 0 {
				t.Errorf("RBAC filter %d after the router", i)
			}
			rbacs = append(rbacs, &r)
		case "envoy.filters.http.router":
			router = i
		}
	}
	if len(rbacs) != 2 {
		t.Fatalf("%d HTTP RBAC filters, want DENY (dry-run) then ALLOW", len(rbacs))
	}
	if rbacs[0].GetRules() != nil || rbacs[0].GetShadowRules().GetAction() != rbacpb.RBAC_DENY || rbacs[0].GetShadowRulesStatPrefix() != "istio_dry_run_deny_" ||
		rbacs[0].GetShadowRules().GetPolicies()["ns[istio-system]-policy[deny-path-headers]-rule[0]"] == nil {
		t.Errorf("first filter %v, want the dry-run DENY as shadow rules only", rbacs[0])
	}
	if rbacs[1].GetRules().GetAction() != rbacpb.RBAC_ALLOW || rbacs[1].GetShadowRules() != nil ||
		rbacs[1].GetRules().GetPolicies()["ns[istio-system]-policy[ingress-policy]-rule[0]"] == nil {
		t.Errorf("second filter %v, want the ALLOW's rules", rbacs[1])
	}

	tcp := findListener(t, res, "0.0.0.0_31400").GetFilterChains()[0].GetFilters()
	names := make([]string, 0, len(tcp))
	for _, f := range tcp {
		names = append(names, f.GetName())
	}
	if want := []string{"envoy.filters.network.rbac", "envoy.filters.network.rbac", "envoy.filters.network.tcp_proxy"}; !slices.Equal(names[:min(3, len(names))], want) && !slices.Equal(withoutStats(names), want) {
		t.Errorf("TCP chain filters %q, want the network RBAC filters before tcp_proxy", names)
	}
	var first netrbac.RBAC
	if err := tcp[0].GetTypedConfig().UnmarshalTo(&first); err != nil {
		t.Fatal(err)
	}
	if first.GetShadowRules() == nil || first.GetRules() != nil || first.GetStatPrefix() != NetworkRBACStatPrefix {
		t.Errorf("TCP DENY filter %v, want the dry-run policy's shadow rules", &first)
	}
}

func rbacFilterCount(t *testing.T, c *listener.FilterChain) int {
	t.Helper()
	n := 0
	for _, f := range c.GetFilters() {
		switch f.GetName() {
		case "envoy.filters.network.rbac":
			n++
		case "envoy.filters.network.http_connection_manager":
			for _, h := range hcmFilters(t, f) {
				if h.GetName() == "envoy.filters.http.rbac" {
					n++
				}
			}
		}
	}
	return n
}

// withoutStats drops istio.stats from filter names.
func withoutStats(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "istio.stats" })
}
