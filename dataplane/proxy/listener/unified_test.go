package listener

import (
	"net/netip"
	"strings"
	"testing"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	networkinputsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func typedExt(t *testing.T, name string, m proto.Message) *xdscorev3.TypedExtensionConfig {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &xdscorev3.TypedExtensionConfig{Name: name, TypedConfig: a}
}

func chainAction(t *testing.T, chain string) *matcherv3.Matcher_OnMatch {
	t.Helper()
	return &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: typedExt(t, chain, wrapperspb.String(chain))}}
}

// portMap is a destination-port exact match map of port -> chain.
func portMap(t *testing.T, ports map[string]string) *matcherv3.Matcher {
	t.Helper()
	m := map[string]*matcherv3.Matcher_OnMatch{}
	for p, c := range ports {
		m[p] = chainAction(t, c)
	}
	return &matcherv3.Matcher{MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
		Input:    typedExt(t, "port", &networkinputsv3.DestinationPortInput{}),
		TreeType: &matcherv3.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcherv3.Matcher_MatcherTree_MatchMap{Map: m}},
	}}}
}

// internalWithIPMatcher is an internal listener main_internal of tcp_proxy chains named
// chains, picked by a destination-IP matcher ipm.
func internalWithIPMatcher(t *testing.T, ipm *matcherv3.IPMatcher, chains ...string) *listenerv3.Listener {
	t.Helper()
	l := &listenerv3.Listener{
		Name:              "main_internal",
		ListenerSpecifier: &listenerv3.Listener_InternalListener{InternalListener: &listenerv3.Listener_InternalListenerConfig{}},
		FilterChainMatcher: &matcherv3.Matcher{MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
			Input:    typedExt(t, "ip", &networkinputsv3.DestinationIPInput{}),
			TreeType: &matcherv3.Matcher_MatcherTree_CustomMatch{CustomMatch: typedExt(t, "ip", ipm)},
		}}},
	}
	for _, name := range chains {
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{Name: name, Filters: tcpFilter(t, name)})
	}
	return l
}

// istiod's main_internal matcher: destination IP (a VIP /32, and a wider range) then
// destination port by exact match; no match anywhere falls back to a wider range when
// the narrower one is not exclusive, then to on_no_match.
func TestFilterChainMatcher(t *testing.T) {
	chain := func(name string) *listenerv3.FilterChain {
		return &listenerv3.FilterChain{Name: name, Filters: tcpFilter(t, name)}
	}
	ipm := &matcherv3.IPMatcher{RangeMatchers: []*matcherv3.IPMatcher_IPRangeMatcher{
		{Ranges: []*xdscorev3.CidrRange{{AddressPrefix: "10.96.0.14", PrefixLen: wrapperspb.UInt32(32)}},
			OnMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Matcher{Matcher: portMap(t, map[string]string{"9080": "inbound-vip|9080|http|reviews"})}}},
		{Ranges: []*xdscorev3.CidrRange{{AddressPrefix: "10.0.0.0", PrefixLen: wrapperspb.UInt32(8)}},
			OnMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Matcher{Matcher: portMap(t, map[string]string{"9080": "direct-http", "5432": "direct-tcp"})}}},
	}}
	l := internalWithIPMatcher(t, ipm, "inbound-vip|9080|http|reviews", "direct-http", "direct-tcp")
	l.DefaultFilterChain = chain("default")
	cfg, err := Compile(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dst, want string }{
		{"10.96.0.14:9080", "inbound-vip|9080|http|reviews"},
		{"10.96.0.14:5432", "direct-tcp"}, // /32 has no 5432: the non-exclusive /8 decides
		{"10.244.0.6:9080", "direct-http"},
		{"10.244.0.6:1", "default"},
		{"192.168.0.1:9080", "default"},
	} {
		fc := cfg.Select(ConnInfo{Local: netip.MustParseAddrPort(tc.dst)})
		if fc == nil || fc.Name != tc.want {
			t.Errorf("%s: chain %v, want %s", tc.dst, fc, tc.want)
		}
	}
	// An action naming no chain is refused, as Envoy refuses it.
	ipm.RangeMatchers[0].OnMatch = chainAction(t, "gone")
	l.FilterChainMatcher.GetMatcherTree().TreeType = &matcherv3.Matcher_MatcherTree_CustomMatch{CustomMatch: typedExt(t, "ip", ipm)}
	if _, err := Compile(l); err == nil || !strings.Contains(err.Error(), "filter chain 'gone' not found") {
		t.Errorf("unknown chain: %v", err)
	}
}

// istiod's main_internal chains for the workloads that use a waypoint: the workload's IP,
// then the application protocol the inspectors found ('h2c' or 'http/1.1' to
// direct-http, anything else, or nothing found, to direct-tcp through on_no_match).
func TestFilterChainMatcherApplicationProtocol(t *testing.T) {
	proto := &matcherv3.Matcher{
		MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
			Input: typedExt(t, "application-protocol", &networkinputsv3.ApplicationProtocolInput{}),
			TreeType: &matcherv3.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcherv3.Matcher_MatcherTree_MatchMap{Map: map[string]*matcherv3.Matcher_OnMatch{
				"'h2c'":      chainAction(t, "direct-http"),
				"'http/1.1'": chainAction(t, "direct-http"),
			}}},
		}},
		OnNoMatch: chainAction(t, "direct-tcp"),
	}
	ipm := &matcherv3.IPMatcher{RangeMatchers: []*matcherv3.IPMatcher_IPRangeMatcher{{
		Ranges:  []*xdscorev3.CidrRange{{AddressPrefix: "10.244.0.7", PrefixLen: wrapperspb.UInt32(32)}},
		OnMatch: &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Matcher{Matcher: proto}},
	}}}
	cfg, err := Compile(internalWithIPMatcher(t, ipm, "direct-http", "direct-tcp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dst  string
		alpn []string
		want string
	}{
		{"10.244.0.7:9080", []string{"http/1.1"}, "direct-http"},
		{"10.244.0.7:9080", []string{"h2c"}, "direct-http"},
		{"10.244.0.7:9080", []string{"http/1.0"}, "direct-tcp"}, // istiod maps 1.0 only with PILOT_HTTP10
		{"10.244.0.7:5432", nil, "direct-tcp"},                  // no protocol found: no data, on_no_match
		{"10.244.0.7:443", []string{"h2", "http/1.1"}, "direct-tcp"},
		{"10.244.0.8:9080", []string{"http/1.1"}, ""},
	} {
		fc := cfg.Select(ConnInfo{Local: netip.MustParseAddrPort(tc.dst), TransportProtocol: "raw_buffer", ALPN: tc.alpn})
		got := ""
		if fc != nil {
			got = fc.Name
		}
		if got != tc.want {
			t.Errorf("%s %v: chain %q, want %q", tc.dst, tc.alpn, got, tc.want)
		}
	}
}

// An input's value as Envoy's network inputs give it: the requested application
// protocols quoted and comma-joined, and no data (not an empty string) for a connection
// without SNI, transport or application protocol, so an exact map's "" key never matches.
func TestMatcherInputValues(t *testing.T) {
	ci := ConnInfo{Local: netip.MustParseAddrPort("10.0.0.1:80"), Remote: netip.MustParseAddrPort("10.0.0.2:5000"), ALPN: []string{"h2", "http/1.1"}}
	for _, tc := range []struct {
		in   input
		want string
		ok   bool
	}{
		{inApplicationProtocol, "'h2','http/1.1'", true},
		{inDestinationIP, "10.0.0.1", true},
		{inSourcePort, "5000", true},
		{inServerName, "", false},
		{inTransportProtocol, "", false},
	} {
		if v, ok := tc.in.value(ci); v != tc.want || ok != tc.ok {
			t.Errorf("input %d: %q %v, want %q %v", tc.in, v, ok, tc.want, tc.ok)
		}
	}
	if v, ok := inApplicationProtocol.value(ConnInfo{}); ok {
		t.Errorf("no protocols: %q, want no data", v)
	}
	m := &chainMatcher{in: inServerName, exact: map[string]*chainOnMatch{"": {chain: "empty"}}, noMatch: &chainOnMatch{chain: "none"}}
	if got, _ := m.match(ConnInfo{}); got != "none" {
		t.Errorf("no SNI against an exact map with an empty key: %q, want on_no_match's", got)
	}
}
