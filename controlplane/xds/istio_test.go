package xds

import (
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

func reviewsRoutes(t *testing.T, res map[resource.Type][]types.Resource) []*route.Route {
	t.Helper()
	for _, r := range res[resource.RouteType] {
		for _, vh := range r.(*route.RouteConfiguration).GetVirtualHosts() {
			if vh.GetName() == "reviews.default.svc.cluster.local:9080" {
				return vh.GetRoutes()
			}
		}
	}
	t.Fatal("no virtual host reviews.default.svc.cluster.local:9080")
	return nil
}

func routeNames(rs []*route.Route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetName())
	}
	return out
}

func findCluster(t *testing.T, res map[resource.Type][]types.Resource, name string) *cluster.Cluster {
	t.Helper()
	for _, r := range res[resource.ClusterType] {
		if c := r.(*cluster.Cluster); c.GetName() == name {
			return c
		}
	}
	t.Fatalf("no cluster %q in %q", name, names(res[resource.ClusterType]))
	return nil
}

func endpointAddrs(t *testing.T, res map[resource.Type][]types.Resource, name string) []string {
	t.Helper()
	for _, r := range res[resource.EndpointType] {
		cla := r.(*endpoint.ClusterLoadAssignment)
		if cla.GetClusterName() != name {
			continue
		}
		var out []string
		for _, le := range cla.GetEndpoints() {
			for _, lb := range le.GetLbEndpoints() {
				out = append(out, lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
			}
		}
		return out
	}
	t.Fatalf("no load assignment %q", name)
	return nil
}

func httpFilterNames(t *testing.T, res map[resource.Type][]types.Resource, listenerName string) []string {
	t.Helper()
	var m hcm.HttpConnectionManager
	if err := findListener(t, res, listenerName).GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&m); err != nil {
		t.Fatalf("listener %s has no HCM: %v", listenerName, err)
	}
	var out []string
	for _, f := range m.GetHttpFilters() {
		out = append(out, f.GetName())
	}
	return out
}

func TestIstioSubsetEndpoints(t *testing.T) {
	t.Parallel()
	res := generate(t, istioCaseModel(t, "dr-subsets"), "productpage-v1")
	for name, want := range map[string][]string{
		"outbound|9080||reviews.default.svc.cluster.local":   {"10.244.0.11", "10.244.0.12"},
		"outbound|9080|v1|reviews.default.svc.cluster.local": {"10.244.0.11"},
		"outbound|9080|v2|reviews.default.svc.cluster.local": {"10.244.0.12"},
	} {
		if got := endpointAddrs(t, res, name); !slices.Equal(got, want) {
			t.Errorf("endpoints of %s = %q, want %q", name, got, want)
		}
		if c := findCluster(t, res, name); c.GetEdsClusterConfig().GetServiceName() != name {
			t.Errorf("cluster %s has EDS service_name %q", name, c.GetEdsClusterConfig().GetServiceName())
		}
	}
}

func TestIstioSourceLabelsPerProxy(t *testing.T) {
	t.Parallel()
	m := istioCaseModel(t, "vs-match")
	tests := []struct {
		pod  string
		want []string
	}{
		{pod: "productpage-v1", want: []string{"jason.header", "jason.query", "jason.regex", "rest"}},
		{pod: "tester", want: []string{"jason.header", "jason.query", "jason.regex", "jason.qa-only", "rest"}},
	}
	for _, tt := range tests {
		if got := routeNames(reviewsRoutes(t, generate(t, m, tt.pod))); !slices.Equal(got, tt.want) {
			t.Errorf("routes of %s = %q, want %q", tt.pod, got, tt.want)
		}
	}
}

func TestIstioWeightedRoute(t *testing.T) {
	t.Parallel()
	rs := reviewsRoutes(t, generate(t, istioCaseModel(t, "vs-weighted"), "productpage-v1"))
	if len(rs) != 1 {
		t.Fatalf("routes = %q, want one", routeNames(rs))
	}
	var got []string
	var weights []uint32
	for _, cw := range rs[0].GetRoute().GetWeightedClusters().GetClusters() {
		got = append(got, cw.GetName())
		weights = append(weights, cw.GetWeight().GetValue())
	}
	if want := []string{"outbound|9080|v1|reviews.default.svc.cluster.local", "outbound|9080|v2|reviews.default.svc.cluster.local"}; !slices.Equal(got, want) {
		t.Errorf("weighted clusters = %q, want %q", got, want)
	}
	if !slices.Equal(weights, []uint32{90, 10}) {
		t.Errorf("weights = %v, want [90 10]", weights)
	}
	if rp := rs[0].GetRoute().GetRetryPolicy(); rp.GetNumRetries().GetValue() != 2 || rp.GetRetryOn() != defaultRetryOn {
		t.Errorf("route without retries has retry policy %v; want Istio's default (2 retries on %s)", rp, defaultRetryOn)
	}
}

func TestIstioFaultFilterOnEveryOutboundHCM(t *testing.T) {
	t.Parallel()
	// With or without a fault in the routes, the listener is the same: applying a fault
	// must change only the routes, so connections already open see it. The filters are
	// istiod's, in its order.
	for _, c := range []string{"vs-fault", "vs-weighted"} {
		res := generate(t, istioCaseModel(t, c), "productpage-v1")
		if got, want := httpFilterNames(t, res, "0.0.0.0_9080"), []string{MetadataExchangeFilter, GRPCStatsFilter, ALPNFilter, FaultFilter, CORSFilter, StatsFilter, "envoy.filters.http.router"}; !slices.Equal(got, want) {
			t.Errorf("%s: http filters = %q, want %q", c, got, want)
		}
	}
}

func TestIstioRegistryOnly(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		policy    model.OutboundTrafficPolicy
		catchAll  string
		lastVHost string
	}{
		{policy: model.AllowAny, catchAll: PassthroughCluster, lastVHost: AllowAnyVirtualHost},
		{policy: model.RegistryOnly, catchAll: BlackHoleCluster, lastVHost: BlockAllVirtualHost},
	} {
		m := istioModel()
		m.Mesh.OutboundTrafficPolicy = tt.policy
		res := generate(t, m, "productpage-v1")
		vo := findListener(t, res, VirtualOutboundListener)
		chains := vo.GetFilterChains()
		if got := tcpProxyOf(t, terminalFilter(chains[len(chains)-1])).GetCluster(); got != tt.catchAll {
			t.Errorf("%s: catch-all chain goes to %q, want %q", tt.policy, got, tt.catchAll)
		}
		vhs := res[resource.RouteType][0].(*route.RouteConfiguration).GetVirtualHosts()
		last := vhs[len(vhs)-1]
		if last.GetName() != tt.lastVHost {
			t.Errorf("%s: last virtual host = %q, want %q", tt.policy, last.GetName(), tt.lastVHost)
		}
		if tt.policy == model.RegistryOnly && last.GetRoutes()[0].GetDirectResponse().GetStatus() != 502 {
			t.Errorf("block_all route = %v, want a direct 502", last.GetRoutes()[0])
		}
	}
}

func TestMergeTrafficPolicy(t *testing.T) {
	t.Parallel()
	lb := func(s networking.LoadBalancerSettings_SimpleLB) *networking.LoadBalancerSettings {
		return &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: s}}
	}
	pool := func(n int32) *networking.ConnectionPoolSettings {
		return &networking.ConnectionPoolSettings{Tcp: &networking.ConnectionPoolSettings_TCPSettings{MaxConnections: n}}
	}
	portLevel := func(port uint32, p *networking.ConnectionPoolSettings) []*networking.TrafficPolicy_PortTrafficPolicy {
		return []*networking.TrafficPolicy_PortTrafficPolicy{{Port: &networking.PortSelector{Number: port}, ConnectionPool: p}}
	}
	tests := []struct {
		name         string
		rule, subset *networking.TrafficPolicy
		wantLB       networking.LoadBalancerSettings_SimpleLB
		wantMaxConn  int32
	}{
		{name: "rule only", rule: &networking.TrafficPolicy{LoadBalancer: lb(networking.LoadBalancerSettings_RANDOM), ConnectionPool: pool(5)},
			wantLB: networking.LoadBalancerSettings_RANDOM, wantMaxConn: 5},
		{name: "subset overrides its parts", rule: &networking.TrafficPolicy{LoadBalancer: lb(networking.LoadBalancerSettings_RANDOM), ConnectionPool: pool(5)},
			subset: &networking.TrafficPolicy{ConnectionPool: pool(9)}, wantLB: networking.LoadBalancerSettings_RANDOM, wantMaxConn: 9},
		{name: "rule port level replaces all of the rule", rule: &networking.TrafficPolicy{
			LoadBalancer: lb(networking.LoadBalancerSettings_RANDOM), ConnectionPool: pool(5), PortLevelSettings: portLevel(9080, pool(2)),
		}, wantMaxConn: 2},
		{name: "rule port level of another port", rule: &networking.TrafficPolicy{
			LoadBalancer: lb(networking.LoadBalancerSettings_RANDOM), ConnectionPool: pool(5), PortLevelSettings: portLevel(80, pool(2)),
		}, wantLB: networking.LoadBalancerSettings_RANDOM, wantMaxConn: 5},
		{name: "subset port level wins", rule: &networking.TrafficPolicy{LoadBalancer: lb(networking.LoadBalancerSettings_RANDOM)},
			subset:      &networking.TrafficPolicy{LoadBalancer: lb(networking.LoadBalancerSettings_LEAST_REQUEST), PortLevelSettings: portLevel(9080, pool(3))},
			wantMaxConn: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mergeTrafficPolicy(tt.rule, tt.subset, 9080)
			if got.GetLoadBalancer().GetSimple() != tt.wantLB || got.GetConnectionPool().GetTcp().GetMaxConnections() != tt.wantMaxConn {
				t.Errorf("merged = %v, want lb %s and maxConnections %d", got, tt.wantLB, tt.wantMaxConn)
			}
			if len(got.GetPortLevelSettings()) != 0 {
				t.Errorf("merged policy keeps port-level settings: %v", got)
			}
		})
	}
}

func TestResolveHost(t *testing.T) {
	t.Parallel()
	m := istioModel()
	for _, tt := range []struct{ host, ns, want string }{
		{host: "reviews", ns: "default", want: "reviews.default.svc.cluster.local"},
		{host: "reviews", ns: "qa", want: "reviews.qa.svc.cluster.local"},
		{host: "reviews.default", ns: "qa", want: "reviews.default.svc.cluster.local"},
		{host: "reviews.default.svc", ns: "qa", want: "reviews.default.svc.cluster.local"},
		{host: "reviews.default.svc.cluster.local", ns: "qa", want: "reviews.default.svc.cluster.local"},
		{host: "payments.internal", ns: "default", want: "payments.internal"},
	} {
		if got := resolveHost(m, tt.host, tt.ns); got != tt.want {
			t.Errorf("resolveHost(%q, %q) = %q, want %q", tt.host, tt.ns, got, tt.want)
		}
	}
}

func TestDestinationRulePrecedence(t *testing.T) {
	t.Parallel()
	m := istioModel()
	mk := func(ns string) *model.IstioConfig[*networking.DestinationRule] {
		d := dr("reviews-"+ns, &networking.DestinationRule{Host: "reviews.default.svc.cluster.local"})
		d.Namespace = ns
		return d
	}
	m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{mk("aaa"), mk("default"), mk("qa")}
	host := "reviews.default.svc.cluster.local"
	if got := destinationRuleFor(m, host, "qa", "default"); got.Namespace != "qa" {
		t.Errorf("from qa: rule of %s, want the proxy's namespace", got.Namespace)
	}
	if got := destinationRuleFor(m, host, "zzz", "default"); got.Namespace != "default" {
		t.Errorf("from zzz: rule of %s, want the service's namespace", got.Namespace)
	}
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        *networking.HTTPRetry
		wantNil   bool
		wantOn    string
		wantCodes []uint32
	}{
		{name: "none: Istio's default", in: nil, wantOn: defaultRetryOn},
		{name: "zero attempts disables", in: &networking.HTTPRetry{Attempts: 0, RetryOn: "5xx"}, wantNil: true},
		{name: "default conditions, no status code", in: &networking.HTTPRetry{Attempts: 3}, wantOn: defaultRetryOn},
		{name: "codes split out", in: &networking.HTTPRetry{Attempts: 1, RetryOn: "gateway-error, 502,504"}, wantOn: "gateway-error,retriable-status-codes", wantCodes: []uint32{502, 504}},
		{name: "only codes", in: &networking.HTTPRetry{Attempts: 1, RetryOn: "503"}, wantOn: "retriable-status-codes", wantCodes: []uint32{503}},
		{name: "no codes", in: &networking.HTTPRetry{Attempts: 1, RetryOn: "5xx"}, wantOn: "5xx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := retryPolicy(tt.in)
			if tt.wantNil {
				if got != nil {
					t.Fatalf("retryPolicy = %v, want none", got)
				}
				return
			}
			if got.GetRetryOn() != tt.wantOn || !slices.Equal(got.GetRetriableStatusCodes(), tt.wantCodes) {
				t.Errorf("retry_on %q codes %v, want %q %v", got.GetRetryOn(), got.GetRetriableStatusCodes(), tt.wantOn, tt.wantCodes)
			}
			wantRetries := uint32(tt.in.GetAttempts())
			if tt.in == nil {
				wantRetries = defaultNumRetries
			}
			if got.GetNumRetries().GetValue() != wantRetries || got.GetHostSelectionRetryMaxAttempts() != 5 ||
				len(got.GetRetryHostPredicate()) != 1 || got.GetRetryHostPredicate()[0].GetName() != previousHostsPredicate {
				t.Errorf("retry policy = %v", got)
			}
			if err := got.ValidateAll(); err != nil {
				t.Errorf("ValidateAll: %v", err)
			}
		})
	}
}

func TestMirrorFraction(t *testing.T) {
	t.Parallel()
	if got := mirrorFraction(nil).GetDefaultValue(); got.GetNumerator() != 100 || got.GetDenominator().String() != "HUNDRED" {
		t.Errorf("no percentage: %v, want 100/HUNDRED", got)
	}
	if got := mirrorFraction(&networking.Percent{Value: 0}); got != nil {
		t.Errorf("0%%: %v, want no mirror", got)
	}
	if got := mirrorFraction(&networking.Percent{Value: 0.5}).GetDefaultValue(); got.GetNumerator() != 5000 || got.GetDenominator().String() != "MILLION" {
		t.Errorf("0.5%%: %v, want 5000/MILLION", got)
	}
}

func TestServiceEntryDomains(t *testing.T) {
	t.Parallel()
	m := istioModel()
	m.Istio.ServiceEntries = append(m.Istio.ServiceEntries,
		se("ext", &networking.ServiceEntry{
			Hosts: []string{"api.lab", "legacy.default.svc.cluster.local"}, Addresses: []string{"10.96.1.2"},
			Resolution: networking.ServiceEntry_STATIC, Ports: []*networking.ServicePort{{Number: 80, Name: "http"}},
			Endpoints: []*networking.WorkloadEntry{{Address: "10.244.0.11"}},
		}))
	got := map[string][]string{}
	for _, sp := range serviceEntryPorts(m) {
		got[sp.host] = sp.domains("default")
	}
	// As istiod writes them with ignore_port_in_host_matching: no ":<port>" variants, the
	// FQDN with its trailing dot, short names only for a Kubernetes-shaped host.
	want := map[string][]string{
		"api.lab": {"api.lab", "api.lab.", "10.96.1.2"},
		"legacy.default.svc.cluster.local": {
			"legacy.default.svc.cluster.local", "legacy.default.svc.cluster.local.", "legacy", "legacy.default.svc", "legacy.default", "10.96.1.2",
		},
	}
	for h, w := range want {
		if !slices.Equal(got[h], w) {
			t.Errorf("domains of %s = %q, want %q", h, got[h], w)
		}
	}
}

// Several DestinationRules for one host in the chosen namespace merge as istiod's
// mergeDestinationRule: subsets appended (the first of a name wins), the first
// top-level traffic policy wins, the first rule's name is the origin.
func TestDestinationRulesMerge(t *testing.T) {
	t.Parallel()
	m := istioModel()
	host := "reviews.default.svc.cluster.local"
	m.Istio.DestinationRules = []*model.IstioConfig[*networking.DestinationRule]{
		dr("reviews-b", &networking.DestinationRule{Host: host,
			TrafficPolicy: &networking.TrafficPolicy{LoadBalancer: &networking.LoadBalancerSettings{LbPolicy: &networking.LoadBalancerSettings_Simple{Simple: networking.LoadBalancerSettings_RANDOM}}},
			Subsets:       []*networking.Subset{{Name: "v2", Labels: map[string]string{"version": "v2"}}, {Name: "v1", Labels: map[string]string{"version": "none"}}}}),
		dr("reviews-a", &networking.DestinationRule{Host: host,
			Subsets: []*networking.Subset{{Name: "v1", Labels: map[string]string{"version": "v1"}}}}),
	}
	got := destinationRuleFor(m, host, "default", "default")
	var subsets []string
	for _, s := range got.Spec.GetSubsets() {
		subsets = append(subsets, s.GetName()+"="+s.GetLabels()["version"])
	}
	if got.Name != "reviews-a" || !slices.Equal(subsets, []string{"v1=v1", "v2=v2"}) ||
		got.Spec.GetTrafficPolicy().GetLoadBalancer().GetSimple() != networking.LoadBalancerSettings_RANDOM {
		t.Errorf("merged rule %s: subsets %v, policy %v; want reviews-a with v1=v1, v2=v2 and reviews-b's RANDOM", got.Name, subsets, got.Spec.GetTrafficPolicy())
	}
	if len(m.Istio.DestinationRules[1].Spec.GetSubsets()) != 1 {
		t.Error("merging changed the model's rule")
	}
}
