package httpconn

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func vh(name string, domains ...string) *routev3.VirtualHost {
	return &routev3.VirtualHost{Name: name, Domains: domains, Routes: []*routev3.Route{{
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}},
	}}}
}

func TestVirtualHostSelectionFollowsEnvoy(t *testing.T) {
	table, err := CompileRoutes(&routev3.RouteConfiguration{Name: "80", VirtualHosts: []*routev3.VirtualHost{
		vh("exact", "api.example.com", "api.example.com:8080"),
		vh("suffix-long", "*.eu.example.com"),
		vh("suffix-short", "*.example.com"),
		vh("suffix-bare", "*example.com"),
		vh("prefix", "api.*"),
		vh("default", "*"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, host, want string
	}{
		{"exact domain wins over every wildcard", "api.example.com", "exact"},
		{"exact match is case insensitive", "API.Example.COM", "exact"},
		{"port is part of the authority", "api.example.com:8080", "exact"},
		{"an unlisted port misses the exact and suffix domains", "api.example.com:9090", "prefix"},
		{"longest suffix wildcard wins", "www.eu.example.com", "suffix-long"},
		{"shorter suffix wildcard", "www.example.com", "suffix-short"},
		{"suffix wildcard without dot", "myexample.com", "suffix-bare"},
		{"wildcard needs a non-empty remainder", "example.com", "default"},
		{"prefix wildcard after suffixes", "api.other.org", "prefix"},
		{"default virtual host", "unknown.test", "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := table.VirtualHostFor(tc.host); got == nil || got.Name != tc.want {
				t.Errorf("VirtualHostFor(%q) = %v, want %s", tc.host, got, tc.want)
			}
		})
	}
	noDefault, err := CompileRoutes(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh("only", "a")}})
	if err != nil {
		t.Fatal(err)
	}
	if vh, r := noDefault.Match("b", "/"); vh != nil || r != nil {
		t.Errorf("no virtual host must mean no route (NR), got %v %v", vh, r)
	}
}

func route(m *routev3.RouteMatch, cluster string) *routev3.Route {
	return &routev3.Route{Match: m, Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster},
	}}}
}

func TestRouteMatchFollowsEnvoy(t *testing.T) {
	table, err := CompileRoutes(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{
		Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/exact"}}, "path"),
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/items/[0-9]+"}}}, "regex"),
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/API"}, CaseSensitive: wrapperspb.Bool(false)}, "nocase"),
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/v1"}}, "prefix"),
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"path match ignores the query string", "/exact?a=b", "path"},
		{"path match is exact", "/exact/more", ""},
		{"regex must match the whole path", "/items/12", "regex"},
		{"regex does not match a longer path", "/items/12/x", ""},
		{"regex ignores the query", "/items/7?q=1", "regex"},
		{"case-insensitive prefix", "/api/x", "nocase"},
		{"prefix is case sensitive by default", "/V1/x", ""},
		{"prefix match", "/v1/users", "prefix"},
		{"first matching route wins in order", "/v1", "prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := table.Match("any", tc.path)
			got := ""
			if r != nil {
				got = r.Cluster
			}
			if got != tc.want {
				t.Errorf("Match(%q) = %q, want %q", tc.path, got, tc.want)
			}
		})
	}
}

func TestRouteTimeoutDefaultsToFifteenSecondsAndZeroDisables(t *testing.T) {
	rc := &routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{vh("a", "a"), vh("b", "b")}}
	rc.VirtualHosts[1].Routes[0].GetRoute().Timeout = durationpb.New(0)
	table, err := CompileRoutes(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, r := table.Match("a", "/"); r.Timeout != 15*time.Second {
		t.Errorf("default timeout = %v, want 15s", r.Timeout)
	}
	if _, r := table.Match("b", "/"); r.Timeout != 0 {
		t.Errorf("timeout 0s = %v, want disabled (0)", r.Timeout)
	}
}

func TestCompileRoutesRefusesWhatIsNotImplemented(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*routev3.RouteConfiguration)
		want   string
	}{
		{"duplicate domain", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts = append(rc.VirtualHosts, vh("again", "a"))
		}, "only unique values for domains are permitted. Duplicate entry of domain a"},
		{"unknown retry_on condition", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx,sometimes"}
		}, `virtual_hosts[0].retry_policy.retry_on: unsupported retry condition "sometimes"`},
		{"retry priority", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx", RetryPriority: &routev3.RetryPolicy_RetryPriority{Name: "p"}}
		}, "virtual_hosts[0].retry_policy.retry_priority: field is not supported"},
		{"header range matcher", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].Match.Headers = []*routev3.HeaderMatcher{{Name: "x", HeaderMatchSpecifier: &routev3.HeaderMatcher_RangeMatch{RangeMatch: &typev3.Int64Range{Start: 1, End: 2}}}}
		}, "virtual_hosts[0].routes[0].match.headers[0].range_match: field is not supported"},
		{"header value command operator", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].RequestHeadersToAdd = []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "x", Value: "%DOWNSTREAM_REMOTE_ADDRESS%"}}}
		}, "request_headers_to_add[0].header.value: command operators in header values are not supported"},
		{"cluster_header", func(rc *routev3.RouteConfiguration) {
			rc.VirtualHosts[0].Routes[0].GetRoute().ClusterSpecifier = &routev3.RouteAction_ClusterHeader{ClusterHeader: "x"}
		}, "virtual_hosts[0].routes[0].route.cluster_header: field is not supported"},
		{"per-filter config of another filter", func(rc *routev3.RouteConfiguration) {
			a, _ := anypb.New(&routev3.RouteConfiguration{})
			rc.VirtualHosts[0].Routes[0].TypedPerFilterConfig = map[string]*anypb.Any{"envoy.filters.http.rbac": a}
		}, "typed_per_filter_config[envoy.filters.http.rbac]: unsupported per-filter config type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &routev3.RouteConfiguration{Name: "r", VirtualHosts: []*routev3.VirtualHost{vh("a", "a")}}
			tc.mutate(rc)
			_, err := CompileRoutes(rc)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestWeightedClustersFollowWeights(t *testing.T) {
	r := &Route{Weighted: []WeightedCluster{{Name: "a", Weight: 0}, {Name: "b", Weight: 100}}}
	for i := 0; i < 50; i++ {
		if got := r.PickCluster(); got != "b" {
			t.Fatalf("PickCluster = %s, want b (a has weight 0)", got)
		}
	}
}

func FuzzRouteMatch(f *testing.F) {
	table, err := CompileRoutes(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{
		vh("exact", "api.example.com"), vh("suffix", "*.example.com"), vh("prefix", "api.*"), vh("default", "*"),
		{Name: "re", Domains: []string{"re"}, Routes: []*routev3.Route{
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/a.*b"}}}, "x"),
			route(&routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/X"}, CaseSensitive: wrapperspb.Bool(false)}, "y"),
		}},
	}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("api.example.com", "/")
	f.Add("re", "/a/b?c")
	f.Add("", "")
	f.Add("*", "?")
	f.Add("API.EXAMPLE.COM:80", "/x%00")
	f.Fuzz(func(t *testing.T, host, path string) {
		vh, r := table.Match(host, path)
		if vh == nil {
			t.Fatalf("the default virtual host must catch %q", host)
		}
		if r != nil && r.PickCluster() == "" {
			t.Fatalf("route without cluster for %q %q", host, path)
		}
	})
}
