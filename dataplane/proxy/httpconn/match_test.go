package httpconn

import (
	"net/http"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func direct(name string, m *routev3.RouteMatch) *routev3.Route {
	return &routev3.Route{Name: name, Match: m, Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{Status: 200}}}
}

func sm(kind, v string, ignoreCase bool) *matcherv3.StringMatcher {
	m := &matcherv3.StringMatcher{IgnoreCase: ignoreCase}
	switch kind {
	case "exact":
		m.MatchPattern = &matcherv3.StringMatcher_Exact{Exact: v}
	case "prefix":
		m.MatchPattern = &matcherv3.StringMatcher_Prefix{Prefix: v}
	case "suffix":
		m.MatchPattern = &matcherv3.StringMatcher_Suffix{Suffix: v}
	case "contains":
		m.MatchPattern = &matcherv3.StringMatcher_Contains{Contains: v}
	case "regex":
		m.MatchPattern = &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: v}}
	}
	return m
}

func hdr(name string, m *matcherv3.StringMatcher, invert bool) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, InvertMatch: invert, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: m}}
}

func present(name string, p, invert bool) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, InvertMatch: invert, HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: p}}
}

func matcherTable(tb testing.TB) *RouteTable {
	tb.Helper()
	routes := []*routev3.Route{
		direct("exact-header", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr("end-user", sm("exact", "jason", false), false)}}),
		direct("prefix-ci-header", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr("x-version", sm("prefix", "V2", true), false)}}),
		direct("suffix-contains", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{
			hdr("x-a", sm("suffix", ".com", false), false), hdr("x-b", sm("contains", "mid", false), false)}}),
		direct("regex-header", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr("x-id", sm("regex", "[0-9]{3}", false), false)}}),
		direct("method", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{hdr(":method", sm("exact", "DELETE", false), false)}}),
		direct("inverted", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/inv"}, Headers: []*routev3.HeaderMatcher{hdr("x-env", sm("exact", "prod", false), true)}}),
		direct("absent", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/absent"}, Headers: []*routev3.HeaderMatcher{present("x-debug", false, false)}}),
		direct("present", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{present("x-debug", true, false)}}),
		direct("query", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/q"}, QueryParameters: []*routev3.QueryParameterMatcher{
			{Name: "v", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_StringMatch{StringMatch: sm("exact", "2 x", false)}},
			{Name: "flag", QueryParameterMatchSpecifier: &routev3.QueryParameterMatcher_PresentMatch{PresentMatch: true}}}}),
		direct("regex-path", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "/users/[0-9]+"}}}),
		direct("never", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: 0}}}),
		direct("ci-path", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: "/CaSe"}, CaseSensitive: wrapperspb.Bool(false)}),
		direct("fallback", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
	}
	table, err := CompileRoutes(&routev3.RouteConfiguration{Name: "m", VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: routes}}})
	if err != nil {
		tb.Fatal(err)
	}
	return table
}

func TestRouteMatchersFollowEnvoy(t *testing.T) {
	table := matcherTable(t)
	for _, tc := range []struct {
		name, method, path string
		header             http.Header
		want               string
	}{
		{"exact header matches only the exact value", "GET", "/", http.Header{"End-User": {"jason"}}, "exact-header"},
		{"exact header is case sensitive", "GET", "/", http.Header{"End-User": {"Jason"}}, "fallback"},
		{"ignore_case prefix", "GET", "/", http.Header{"X-Version": {"v2-beta"}}, "prefix-ci-header"},
		{"all header matchers must match", "GET", "/", http.Header{"X-A": {"a.com"}, "X-B": {"amidb"}}, "suffix-contains"},
		{"one header matcher failing fails the route", "GET", "/", http.Header{"X-A": {"a.org"}, "X-B": {"amidb"}}, "fallback"},
		{"safe_regex header is a full match", "GET", "/", http.Header{"X-Id": {"1234"}}, "fallback"},
		{"safe_regex header", "GET", "/", http.Header{"X-Id": {"123"}}, "regex-header"},
		{"multiple values are joined with commas", "GET", "/", http.Header{"X-Id": {"12", "3"}}, "fallback"},
		{":method pseudo-header", "DELETE", "/", nil, "method"},
		{"invert_match on a different value", "GET", "/inv", http.Header{"X-Env": {"dev"}}, "inverted"},
		{"invert_match on the value", "GET", "/inv", http.Header{"X-Env": {"prod"}}, "fallback"},
		{"invert_match on a missing header does not match", "GET", "/inv", nil, "fallback"},
		{"present_match false matches a missing header", "GET", "/absent", nil, "absent"},
		{"present_match true", "GET", "/absent", http.Header{"X-Debug": {""}}, "present"},
		{"query string_match decodes and present_match", "GET", "/q?v=2+x&flag", nil, "query"},
		{"query parameter missing", "GET", "/q?v=2+x", nil, "fallback"},
		{"query uses the first value", "GET", "/q?v=1&v=2+x&flag", nil, "fallback"},
		{"safe_regex path ignores the query", "GET", "/users/42?x=1", nil, "regex-path"},
		{"safe_regex path is a full match", "GET", "/users/42/x", nil, "fallback"},
		{"case_sensitive false", "GET", "/case", nil, "ci-path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			_, r := table.MatchRequest(&Request{Method: tc.method, Authority: "a", Path: tc.path, Scheme: "http", Header: h})
			if r == nil || r.Name != tc.want {
				got := "<nil>"
				if r != nil {
					got = r.Name
				}
				t.Errorf("matched %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRuntimeFractionSamplesTheDefaultValue(t *testing.T) {
	table, err := CompileRoutes(&routev3.RouteConfiguration{VirtualHosts: []*routev3.VirtualHost{{Name: "vh", Domains: []string{"*"}, Routes: []*routev3.Route{
		direct("quarter", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, RuntimeFraction: &corev3.RuntimeFractionalPercent{
			DefaultValue: &typev3.FractionalPercent{Numerator: 2500, Denominator: typev3.FractionalPercent_TEN_THOUSAND}, RuntimeKey: "k"}}),
		direct("rest", &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}),
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < 4000; i++ {
		if _, r := table.Match("a", "/"); r.Name == "quarter" {
			n++
		}
	}
	if n < 850 || n > 1150 {
		t.Errorf("25%% runtime_fraction matched %d of 4000", n)
	}
}

// FuzzRouteMatcher matches arbitrary requests against every matcher kind: no panics, and
// a route always matches (the table ends with a catch-all).
func FuzzRouteMatcher(f *testing.F) {
	table := matcherTable(f)
	f.Add("GET", "/q?v=2+x&flag", "x-id", "123")
	f.Add("DELETE", "/users/1", "end-user", "jason")
	f.Add("", "%zz?%%&=", ":path", "\x00")
	f.Fuzz(func(t *testing.T, method, path, name, value string) {
		h := http.Header{}
		h.Set(name, value)
		path = "/" + path // a :path always starts with a slash
		if _, r := table.MatchRequest(&Request{Method: method, Authority: "a", Path: path, Header: h}); r == nil {
			t.Fatalf("no route for %q %q", method, path)
		}
	})
}
