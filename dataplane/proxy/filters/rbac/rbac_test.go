package rbac

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	httprbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rbac/v3"
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

func mustAny(tb testing.TB, m proto.Message) *anypb.Any {
	tb.Helper()
	a, err := anypb.New(m)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}

func regex(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: s}}}
}

func header(name string, m *matcherv3.StringMatcher) *routev3.HeaderMatcher {
	return &routev3.HeaderMatcher{Name: name, HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: m}}
}

func cidrRange(p string, l uint32) *corev3.CidrRange {
	return &corev3.CidrRange{AddressPrefix: p, PrefixLen: wrapperspb.UInt32(l)}
}

var anyPerm = &rbacv3.Permission{Rule: &rbacv3.Permission_Any{Any: true}}
var anyID = &rbacv3.Principal{Identifier: &rbacv3.Principal_Any{Any: true}}

func authn(m *matcherv3.StringMatcher) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_Authenticated_{Authenticated: &rbacv3.Principal_Authenticated{PrincipalName: m}}}
}

func input(id string, hdr map[string]string) *Input {
	in := &Input{
		Local: netip.MustParseAddrPort("10.0.0.2:8080"), DirectRemote: netip.MustParseAddrPort("10.0.0.1:40000"),
		Remote: netip.MustParseAddrPort("10.0.0.1:40000"),
	}
	if id != "" {
		u, _ := url.Parse(id)
		in.TLS, in.Peer = true, &x509.Certificate{URIs: []*url.URL{u}, DNSNames: []string{"backend.local"}, Subject: pkix.Name{CommonName: "cn-x"}}
	}
	if hdr != nil {
		in.Header = func(n string) (string, bool) { v, ok := hdr[n]; return v, ok }
	}
	return in
}

// TestMatchersAsEnvoy checks each permission and principal of the subset Istio emits
// against Envoy's semantics.
func TestMatchersAsEnvoy(t *testing.T) {
	get := map[string]string{":method": "GET", ":path": "/api/v1?q=/admin", "x-user": "alice", "x-multi": "a,b"}
	perm := func(p *rbacv3.Permission) *rbacv3.Policy {
		return &rbacv3.Policy{Permissions: []*rbacv3.Permission{p}, Principals: []*rbacv3.Principal{anyID}}
	}
	princ := func(p *rbacv3.Principal) *rbacv3.Policy {
		return &rbacv3.Policy{Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{p}}
	}
	frontend := "spiffe://cluster.local/ns/default/sa/frontend"
	tests := []struct {
		name   string
		policy *rbacv3.Policy
		in     *Input
		want   bool
	}{
		{"method_exact", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: header(":method", exact("GET"))}}), input("", get), true},
		{"method_exact_other", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: header(":method", exact("POST"))}}), input("", get), false},
		{"url_path_strips_query", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: "/admin"}}}}}}), input("", get), false},
		{"url_path_prefix", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "/api/"}}}}}}), input("", get), true},
		{"url_path_never_on_tcp", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: regex(".*")}}}}), input("", nil), false},
		{"header_regex_is_full_match", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: header("x-user", regex("ali"))}}), input("", get), false},
		{"header_contains_joined_values", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: header("X-Multi", &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Contains{Contains: "a,b"}})}}), input("", get), true},
		{"header_present", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: "x-user", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: true}}}}), input("", get), true},
		{"header_missing_with_present_false", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_Header{Header: &routev3.HeaderMatcher{Name: "x-none", HeaderMatchSpecifier: &routev3.HeaderMatcher_PresentMatch{PresentMatch: false}}}}), input("", get), true},
		{"destination_port", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 8080}}), input("", nil), true},
		{"destination_ip", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_DestinationIp{DestinationIp: cidrRange("10.0.1.0", 24)}}), input("", nil), false},
		{"not_rule", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_NotRule{NotRule: &rbacv3.Permission{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 9090}}}}), input("", nil), true},
		{"and_rules", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{anyPerm, {Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 1}}}}}}), input("", nil), false},
		{"or_rules", perm(&rbacv3.Permission{Rule: &rbacv3.Permission_OrRules{OrRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{{Rule: &rbacv3.Permission_DestinationPort{DestinationPort: 1}}, anyPerm}}}}), input("", nil), true},
		{"principal_uri_san", princ(authn(exact(frontend))), input(frontend, nil), true},
		{"principal_istio_namespace_regex", princ(authn(regex(".*/ns/default/.*"))), input(frontend, nil), true},
		{"principal_dns_san_after_uri", princ(authn(exact("backend.local"))), input(frontend, nil), true},
		{"principal_subject_last", princ(authn(exact("CN=cn-x"))), input(frontend, nil), true},
		{"principal_needs_tls", princ(authn(regex(".*"))), input("", nil), false},
		{"not_id", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_NotId{NotId: authn(exact(frontend))}}), input(frontend, nil), false},
		{"direct_remote_ip", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_DirectRemoteIp{DirectRemoteIp: cidrRange("10.0.0.0", 8)}}), input("", nil), true},
		{"remote_ip", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_RemoteIp{RemoteIp: cidrRange("192.168.0.0", 16)}}), input("", nil), false},
		{"source_ip", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_SourceIp{SourceIp: cidrRange("10.0.0.1", 32)}}), input("", nil), true}, //nolint:staticcheck // the deprecated source_ip Envoy still honours
		{"and_ids", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_AndIds{AndIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{anyID, authn(exact(frontend))}}}}), input("", nil), false},
		{"or_ids", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{authn(exact(frontend)), anyID}}}}), input("", nil), true},
		{"principal_header", princ(&rbacv3.Principal{Identifier: &rbacv3.Principal_Header{Header: header("x-user", exact("alice"))}}), input("", get), true},
		// istiod's waypoint principals: the peer's SAN connect_terminate saved.
		{"filter_state", princ(peerPrincipal(exact(frontend))), withState(input("", nil), "io.istio.peer_principal", frontend), true},
		{"filter_state_other", princ(peerPrincipal(exact(frontend))), withState(input("", nil), "io.istio.peer_principal", "spiffe://cluster.local/ns/x/sa/y"), false},
		{"filter_state_absent", princ(peerPrincipal(regex(".*"))), input(frontend, nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, action := range []rbacv3.RBAC_Action{rbacv3.RBAC_ALLOW, rbacv3.RBAC_DENY} {
				cfg, err := CompileHTTP(mustAny(t, &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Action: action, Policies: map[string]*rbacv3.Policy{"p": tc.policy}}}))
				if err != nil {
					t.Fatal(err)
				}
				allowed, policy := cfg.Engine.Allowed(tc.in)
				// ALLOW: allowed iff the policy matches; DENY: denied iff it matches.
				if want := tc.want == (action == rbacv3.RBAC_ALLOW); allowed != want {
					t.Fatalf("%s: allowed = %v, want %v", action, allowed, want)
				}
				if wantPolicy := map[bool]string{true: "p", false: ""}[tc.want]; policy != wantPolicy {
					t.Fatalf("%s: policy = %q, want %q", action, policy, wantPolicy)
				}
			}
		})
	}
}

// TestAllowNothingAndNoRules pins Istio's allow-nothing (ALLOW without policies denies
// everything) and Envoy's filter without rules (allows, counts nothing).
func TestAllowNothingAndNoRules(t *testing.T) {
	st := stats.NewStore()
	nothing, err := CompileHTTP(mustAny(t, &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_ALLOW}}))
	if err != nil {
		t.Fatal(err)
	}
	if res := nothing.HTTPStats(st.HTTP("inbound_0.0.0.0_8080")).Check(&nothing.Rules, input("", nil), nil); res.Allowed {
		t.Fatal("allow-nothing allowed a request")
	}
	if got := st.Value("http.inbound_0.0.0.0_8080.rbac.denied"); got != 1 {
		t.Fatalf("rbac.denied = %d", got)
	}
	none, err := CompileNetwork(mustAny(t, &netrbacv3.RBAC{StatPrefix: "tcp."}))
	if err != nil {
		t.Fatal(err)
	}
	if res := none.NetworkStats(st).CheckConnection(&none.Rules, input("", nil), nil); !res.Allowed {
		t.Fatal("a filter without rules denied")
	}
	if _, used := st.Lookup("tcp.rbac.allowed"); used && st.Value("tcp.rbac.allowed") != 0 {
		t.Fatal("a filter without rules counted a decision")
	}
	withPrefix, _ := CompileHTTP(mustAny(t, &httprbacv3.RBAC{RulesStatPrefix: "istio_dry_run_", Rules: &rbacv3.RBAC{}}))
	withPrefix.HTTPStats(st.HTTP("in")).Check(&withPrefix.Rules, input("", nil), nil)
	if got := st.Value("http.in.rbac.istio_dry_run_.denied"); got != 1 {
		t.Fatalf("rules_stat_prefix stat = %d", got)
	}
}

// TestCompileRefusesWhatIsNotImplemented names the unimplemented field in the error.
func TestCompileRefusesWhatIsNotImplemented(t *testing.T) {
	//nolint:staticcheck // the deprecated metadata permission Envoy still honours
	meta := &rbacv3.Permission{Rule: &rbacv3.Permission_Metadata{Metadata: &matcherv3.MetadataMatcher{Filter: "f", Path: []*matcherv3.MetadataMatcher_PathSegment{{Segment: &matcherv3.MetadataMatcher_PathSegment_Key{Key: "k"}}}, Value: &matcherv3.ValueMatcher{MatchPattern: &matcherv3.ValueMatcher_DoubleMatch{DoubleMatch: &matcherv3.DoubleMatcher{MatchPattern: &matcherv3.DoubleMatcher_Exact{Exact: 1}}}}}}}
	badPath := &rbacv3.Permission{Rule: &rbacv3.Permission_UrlPath{UrlPath: &matcherv3.PathMatcher{Rule: &matcherv3.PathMatcher_Path{Path: regex("(")}}}}
	andRules := &rbacv3.Permission{Rule: &rbacv3.Permission_AndRules{AndRules: &rbacv3.Permission_Set{Rules: []*rbacv3.Permission{anyPerm, badPath}}}}
	orIDs := &rbacv3.Principal{Identifier: &rbacv3.Principal_OrIds{OrIds: &rbacv3.Principal_Set{Ids: []*rbacv3.Principal{anyID, anyID, authn(regex("("))}}}}
	tests := []struct {
		name string
		msg  proto.Message
		net  bool
		want string
	}{
		{"shadow_log_action", &httprbacv3.RBAC{ShadowRules: &rbacv3.RBAC{Action: rbacv3.RBAC_LOG}}, false, "shadow_rules.action: LOG is not supported"},
		{"per_rule_stats", &httprbacv3.RBAC{TrackPerRuleStats: true}, false, "track_per_rule_stats: field is not supported"},
		{"metadata_double_match", &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{meta}, Principals: []*rbacv3.Principal{anyID}}}}}, false, "rules.policies[p].permissions[0].metadata.value.double_match: field is not supported"},
		{"log_action", &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Action: rbacv3.RBAC_LOG}}, false, "rules.action: LOG is not supported"},
		{"network_shadow_bad_regex", &netrbacv3.RBAC{StatPrefix: "tcp.", ShadowRules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{authn(regex("("))}}}}}, true, "shadow_rules.policies[p].principals[0].authenticated.principal_name.safe_regex.regex"},
		{"nested_and_rules", &httprbacv3.RBAC{Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{andRules}, Principals: []*rbacv3.Principal{anyID}}}}}, false, "rules.policies[p].permissions[0].and_rules.rules[1].url_path.path.safe_regex.regex"},
		{"nested_or_ids", &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{orIDs}}}}}, true, "rules.policies[p].principals[0].or_ids.ids[2].authenticated.principal_name.safe_regex.regex"},
		{"bad_regex", &netrbacv3.RBAC{StatPrefix: "tcp.", Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{authn(regex("("))}}}}}, true, "rules.policies[p].principals[0].authenticated.principal_name.safe_regex.regex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.net {
				_, err = CompileNetwork(mustAny(t, tc.msg))
			} else {
				_, err = CompileHTTP(mustAny(t, tc.msg))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzCompileHTTP feeds arbitrary bytes as an HTTP RBAC config: compile never panics,
// and a compiled filter (rules and shadow rules) decides without panicking.
func FuzzCompileHTTP(f *testing.F) {
	seed, _ := proto.Marshal(&httprbacv3.RBAC{Rules: &rbacv3.RBAC{Policies: map[string]*rbacv3.Policy{"p": {Permissions: []*rbacv3.Permission{anyPerm}, Principals: []*rbacv3.Principal{authn(regex(".*"))}}}}})
	f.Add(seed)
	shadow, _ := proto.Marshal(&httprbacv3.RBAC{ShadowRules: denyHeaders(), ShadowRulesStatPrefix: "istio_dry_run_deny_"})
	f.Add(shadow)
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := CompileHTTP(&anypb.Any{TypeUrl: "type.googleapis.com/" + HTTPConfigType, Value: b})
		if err != nil {
			return
		}
		st := stats.NewStore()
		cfg.HTTPStats(st.HTTP("in")).Check(&cfg.Rules, input("spiffe://x/ns/y/sa/z", map[string]string{":path": "/"}), nil)
	})
}

func peerPrincipal(m *matcherv3.StringMatcher) *rbacv3.Principal {
	return &rbacv3.Principal{Identifier: &rbacv3.Principal_FilterState{FilterState: &matcherv3.FilterStateMatcher{
		Key: "io.istio.peer_principal", Matcher: &matcherv3.FilterStateMatcher_StringMatch{StringMatch: m}}}}
}

func withState(in *Input, key, value string) *Input {
	in.FilterState = map[string]string{key: value}
	return in
}
