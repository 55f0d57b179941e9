package rbac

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// The three connections of ztunnel's own rbac tests: plaintext, an identity in
// "namespace", and another identity elsewhere.
func plaintextConn() Conn {
	return Conn{Src: netip.MustParseAddrPort("127.0.0.1:1234"), Dst: netip.MustParseAddrPort("127.0.0.2:8080")}
}

func tlsConn() Conn {
	return Conn{
		Src:         netip.MustParseAddrPort("127.0.0.1:1234"),
		Dst:         netip.MustParseAddrPort("127.0.0.2:8080"),
		SrcIdentity: &Identity{TrustDomain: "td", Namespace: "namespace", ServiceAccount: "account"},
	}
}

func tlsConnAlt() Conn {
	return Conn{
		Src:         netip.MustParseAddrPort("127.0.0.3:1234"),
		Dst:         netip.MustParseAddrPort("127.0.0.4:9090"),
		SrcIdentity: &Identity{TrustDomain: "td-alt", Namespace: "ns-alt", ServiceAccount: "sa=alt"},
	}
}

func allow(groups ...[][]Match) *Policy {
	return &Policy{Name: "p", Namespace: "namespace", Scope: security.Scope_GLOBAL, Action: security.Action_ALLOW, Groups: groups}
}

func exact(s string) StringMatch { return StringMatch{Kind: Exact, Value: s} }

func TestFieldMatches(t *testing.T) {
	t.Parallel()
	pfx := netip.MustParsePrefix
	// want is for plaintext, tls, tls-alt, as in ztunnel's rbac_test! table.
	cases := []struct {
		name string
		m    Match
		want [3]bool
	}{
		{"namespaces", Match{Namespaces: []StringMatch{exact("namespace")}}, [3]bool{false, true, false}},
		{"not_namespaces", Match{NotNamespaces: []StringMatch{exact("namespace")}}, [3]bool{true, false, true}},
		{"service_accounts", Match{ServiceAccounts: []ServiceAccountMatch{{"namespace", "account"}}}, [3]bool{false, true, false}},
		{"not_service_accounts", Match{NotServiceAccounts: []ServiceAccountMatch{{"namespace", "account"}}}, [3]bool{true, false, true}},
		{"principals", Match{Principals: []StringMatch{exact("td/ns/namespace/sa/account")}}, [3]bool{false, true, false}},
		{"not_principals", Match{NotPrincipals: []StringMatch{exact("td/ns/namespace/sa/account")}}, [3]bool{true, false, true}},
		{"source_ips", Match{SourceIPs: []netip.Prefix{pfx("127.0.0.1/32")}}, [3]bool{true, true, false}},
		{"not_source_ips", Match{NotSourceIPs: []netip.Prefix{pfx("127.0.0.1/32")}}, [3]bool{false, false, true}},
		{"destination_ips", Match{DestinationIPs: []netip.Prefix{pfx("127.0.0.2/32")}}, [3]bool{true, true, false}},
		{"not_destination_ips", Match{NotDestinationIPs: []netip.Prefix{pfx("127.0.0.2/32")}}, [3]bool{false, false, true}},
		{"cidr_range", Match{DestinationIPs: []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr("127.0.0.1"), 24)}}, [3]bool{true, true, true}},
		{"destination_ports", Match{DestinationPorts: []uint16{8080}}, [3]bool{true, true, false}},
		{"not_destination_ports", Match{NotDestinationPorts: []uint16{8080}}, [3]bool{false, false, true}},
		// meshlab's additions around the same fixtures.
		{"principal presence needs an identity", Match{Principals: []StringMatch{{Kind: Presence}}}, [3]bool{false, true, true}},
		{"not principal presence is STRICT's deny", Match{NotPrincipals: []StringMatch{{Kind: Presence}}}, [3]bool{true, false, false}},
		{"principal with spiffe:// never matches", Match{Principals: []StringMatch{exact("spiffe://td/ns/namespace/sa/account")}}, [3]bool{false, false, false}},
		{"principal prefix", Match{Principals: []StringMatch{{Kind: Prefix, Value: "td/"}}}, [3]bool{false, true, false}},
		{"principal suffix", Match{Principals: []StringMatch{{Kind: Suffix, Value: "/sa/sa=alt"}}}, [3]bool{false, false, true}},
		{"empty namespace matches no identity", Match{Namespaces: []StringMatch{exact("")}}, [3]bool{true, false, false}},
		{"namespace presence", Match{Namespaces: []StringMatch{{Kind: Presence}}}, [3]bool{false, true, true}},
		{"values OR", Match{DestinationPorts: []uint16{9090, 8080}}, [3]bool{true, true, true}},
		{"fields AND", Match{DestinationPorts: []uint16{8080}, Namespaces: []StringMatch{exact("namespace")}}, [3]bool{false, true, false}},
		{"positive and negative in one field", Match{SourceIPs: []netip.Prefix{pfx("127.0.0.0/8")}, NotSourceIPs: []netip.Prefix{pfx("127.0.0.3/32")}}, [3]bool{true, true, false}},
		{"service account ignores trust domain", Match{ServiceAccounts: []ServiceAccountMatch{{"ns-alt", "sa=alt"}}}, [3]bool{false, false, true}},
		{"a v6 prefix never holds a v4 address", Match{SourceIPs: []netip.Prefix{pfx("::/0")}}, [3]bool{false, false, false}},
	}
	conns := []Conn{plaintextConn(), tlsConn(), tlsConnAlt()}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := allow([][]Match{{tc.m}})
			for i, c := range conns {
				if got := p.Matches(c); got != tc.want[i] {
					t.Errorf("%v: Matches = %v, want %v", c, got, tc.want[i])
				}
			}
		})
	}
}

func TestEmptyPolicy(t *testing.T) {
	t.Parallel()
	c := plaintextConn()
	cases := []struct {
		name string
		p    *Policy
		want bool
	}{
		{"a group of a rule of one empty match never matches", allow([][]Match{{{}}}), false},
		{"a group of an empty rule matches", allow([][]Match{{}}), true},
		{"an empty group matches", allow([][]Match{}), true},
		{"no groups never matches", allow(), false},
		{"an empty match is skipped, the next decides", allow([][]Match{{{}, {DestinationPorts: []uint16{8080}}}}), true},
	}
	for _, tc := range cases {
		if got := tc.p.Matches(c); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func connFrom(ns string, port uint16) Conn {
	return Conn{
		Src:         netip.MustParseAddrPort("127.0.0.1:1234"),
		Dst:         netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), port),
		SrcIdentity: &Identity{TrustDomain: "td", Namespace: ns, ServiceAccount: "account"},
	}
}

func TestNesting(t *testing.T) {
	t.Parallel()
	// One group: (ns a OR ns b) AND port 80.
	nested := allow([][]Match{
		{{Namespaces: []StringMatch{exact("a")}}, {Namespaces: []StringMatch{exact("b")}}},
		{{DestinationPorts: []uint16{80}}},
	})
	// Two groups: ns a OR ns b.
	multi := allow([][]Match{{{Namespaces: []StringMatch{exact("a")}}}}, [][]Match{{{Namespaces: []StringMatch{exact("b")}}}})
	cases := []struct {
		name string
		p    *Policy
		c    Conn
		want bool
	}{
		{"nested a", nested, connFrom("a", 80), true},
		{"nested b", nested, connFrom("b", 80), true},
		{"nested wrong namespace", nested, connFrom("bad", 80), false},
		{"nested wrong port", nested, connFrom("b", 12345), false},
		{"multi a", multi, connFrom("a", 80), true},
		{"multi b", multi, connFrom("b", 80), true},
		{"multi wrong namespace", multi, connFrom("bad", 80), false},
	}
	for _, tc := range cases {
		if got := tc.p.Matches(tc.c); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStringMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		m    StringMatch
		s    string
		want bool
	}{
		{"exact match", exact("foo"), "foo", true},
		{"exact mismatch", exact("foo"), "not", false},
		{"exact empty mismatch", exact("foo"), "", false},
		{"prefix match", StringMatch{Prefix, "foo"}, "foobar", true},
		{"prefix mismatch", StringMatch{Prefix, "foo"}, "notfoo", false},
		{"prefix empty mismatch", StringMatch{Prefix, "foo"}, "", false},
		{"suffix match", StringMatch{Suffix, "foo"}, "barfoo", true},
		{"suffix mismatch", StringMatch{Suffix, "foo"}, "foonot", false},
		{"suffix empty mismatch", StringMatch{Suffix, "foo"}, "", false},
		{"presence match", StringMatch{Kind: Presence}, "foo", true},
		{"presence mismatch", StringMatch{Kind: Presence}, "", false},
		{"empty prefix matches empty", StringMatch{Prefix, ""}, "", true},
	}
	for _, tc := range cases {
		if got := tc.m.Matches(tc.s); got != tc.want {
			t.Errorf("%s: %v %q Matches(%q) = %v, want %v", tc.name, tc.m.Kind, tc.m.Value, tc.s, got, tc.want)
		}
	}
}

func TestParseIdentity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Identity
		wantErr bool
	}{
		{in: "spiffe://cluster.local/ns/default/sa/curl", want: Identity{"cluster.local", "default", "curl"}},
		{in: "spiffe:///ns//sa/", want: Identity{}},
		{in: "cluster.local/ns/default/sa/curl", wantErr: true},
		{in: "spiffe://cluster.local/ns/default/sa/curl/x", wantErr: true},
		{in: "spiffe://cluster.local/namespace/default/sa/curl", wantErr: true},
		{in: "spiffe://cluster.local/ns/default/serviceaccount/curl", wantErr: true},
	}
	for _, tc := range cases {
		got, err := ParseIdentity(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseIdentity(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil && got.String() != tc.in {
			t.Errorf("ParseIdentity(%q).String() = %q", tc.in, got.String())
		}
	}
}

func TestParseAddress(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		b      []byte
		length uint32
		want   string // "" when dropped
	}{
		{"v4 host", []byte{10, 0, 0, 1}, 32, "10.0.0.1/32"},
		{"v4 net keeps host bits", []byte{10, 0, 0, 1}, 8, "10.0.0.1/8"},
		{"v6", netip.MustParseAddr("2001:db8::1").AsSlice(), 64, "2001:db8::1/64"},
		{"v4 too long", []byte{10, 0, 0, 1}, 33, ""},
		{"length as u8", []byte{10, 0, 0, 1}, 256 + 24, "10.0.0.1/24"},
		{"three bytes", []byte{10, 0, 0}, 24, ""},
		{"empty", nil, 0, ""},
	}
	for _, tc := range cases {
		p, ok := ParseAddress(tc.b, tc.length)
		got := ""
		if ok {
			got = p.String()
		}
		if got != tc.want {
			t.Errorf("%s: ParseAddress = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func sm(kind string, v string) *security.StringMatch {
	switch kind {
	case "exact":
		return &security.StringMatch{MatchType: &security.StringMatch_Exact{Exact: v}}
	case "prefix":
		return &security.StringMatch{MatchType: &security.StringMatch_Prefix{Prefix: v}}
	case "suffix":
		return &security.StringMatch{MatchType: &security.StringMatch_Suffix{Suffix: v}}
	case "presence":
		return &security.StringMatch{MatchType: &security.StringMatch_Presence{Presence: &emptypb.Empty{}}}
	}
	return &security.StringMatch{}
}

func TestCompile(t *testing.T) {
	t.Parallel()
	a := &security.Authorization{
		Name: "p", Namespace: "ns", Scope: security.Scope_NAMESPACE, Action: security.Action_DENY, DryRun: true,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
			Namespaces:        []*security.StringMatch{sm("exact", "a"), {}, sm("presence", "")},
			NotPrincipals:     []*security.StringMatch{sm("prefix", "x"), sm("suffix", "y")},
			SourceIps:         []*security.Address{{Address: []byte{1, 2, 3, 4}, Length: 32}, {Address: []byte{1}, Length: 8}},
			DestinationPorts:  []uint32{80, 65536 + 443},
			ServiceAccounts:   []*security.ServiceAccountMatch{{Namespace: "n", ServiceAccount: "s"}},
			NotDestinationIps: []*security.Address{{Address: []byte{1, 2, 3, 4}, Length: 40}},
		}}}}}},
	}
	p, err := Compile(a)
	if err != nil {
		t.Fatal(err)
	}
	if p.Key() != "ns/p" || p.Scope != security.Scope_NAMESPACE || p.Action != security.Action_DENY || !p.DryRun {
		t.Errorf("header = %+v", p)
	}
	m := p.Groups[0][0][0]
	if want := []StringMatch{exact("a"), {Kind: Presence}}; !slices.Equal(m.Namespaces, want) {
		t.Errorf("Namespaces = %v, want %v (the kindless one dropped)", m.Namespaces, want)
	}
	if want := []StringMatch{{Prefix, "x"}, {Suffix, "y"}}; !slices.Equal(m.NotPrincipals, want) {
		t.Errorf("NotPrincipals = %v", m.NotPrincipals)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("1.2.3.4/32")}; !slices.Equal(m.SourceIPs, want) {
		t.Errorf("SourceIPs = %v, want %v (the one-byte address dropped)", m.SourceIPs, want)
	}
	if want := []uint16{80, 443}; !slices.Equal(m.DestinationPorts, want) {
		t.Errorf("DestinationPorts = %v, want %v", m.DestinationPorts, want)
	}
	if len(m.NotDestinationIPs) != 0 {
		t.Errorf("NotDestinationIPs = %v, want the /40 dropped", m.NotDestinationIPs)
	}
	if want := []ServiceAccountMatch{{"n", "s"}}; !slices.Equal(m.ServiceAccounts, want) {
		t.Errorf("ServiceAccounts = %v", m.ServiceAccounts)
	}

	for _, bad := range []*security.Authorization{nil, {Name: "s", Scope: 7}, {Name: "a", Action: 3}} {
		if _, err := Compile(bad); !errors.Is(err, ErrPolicy) {
			t.Errorf("Compile(%v) = %v, want ErrPolicy", bad, err)
		}
	}
}

// A match whose only values are dropped at compile time is empty, and so skipped: a
// policy of only that never matches (ztunnel's behaviour for an address it cannot read).
func TestCompileDroppedValuesEmptyTheMatch(t *testing.T) {
	t.Parallel()
	p, err := Compile(&security.Authorization{Name: "p", Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{
		SourceIps: []*security.Address{{Address: []byte{1, 2}, Length: 8}},
	}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Matches(tlsConn()) {
		t.Error("a match of only unreadable addresses matched")
	}
}

func principalPolicy(ns, name string, action security.Action, scope security.Scope, dryRun bool, principal string) *security.Authorization {
	a := &security.Authorization{Name: name, Namespace: ns, Action: action, Scope: scope, DryRun: dryRun}
	if principal == "*" {
		// ztunnel's wildcard: one group of one empty rule.
		a.Groups = []*security.Group{{Rules: []*security.Rules{{}}}}
		return a
	}
	a.Groups = []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{Principals: []*security.StringMatch{sm("exact", principal)}}}}}}}
	return a
}

func fromSA(sa string, dst string) Conn {
	return Conn{
		Src:         netip.MustParseAddrPort("192.168.1.1:1234"),
		Dst:         netip.AddrPortFrom(netip.MustParseAddr(dst), 8080),
		SrcIdentity: &Identity{TrustDomain: "cluster.local", Namespace: "default", ServiceAccount: sa},
	}
}

// TestEvaluate holds ztunnel's assert_rbac order (state.rs's assert_rbac_logic_deny_allow
// and the dry-run cases) and the applicable set.
func TestEvaluate(t *testing.T) {
	t.Parallel()
	ns1 := &workload.Workload{Uid: "1", Namespace: "ns1"}
	ns2 := &workload.Workload{Uid: "2", Namespace: "ns2"}
	logic := []*security.Authorization{
		principalPolicy("ns1", "wildcard-allow", security.Action_ALLOW, security.Scope_NAMESPACE, true, "*"),
		principalPolicy("ns1", "wildcard-deny", security.Action_DENY, security.Scope_NAMESPACE, true, "*"),
		principalPolicy("ns1", "foo", security.Action_ALLOW, security.Scope_NAMESPACE, false, "cluster.local/ns/default/sa/defaultacct"),
		principalPolicy("ns1", "deny", security.Action_DENY, security.Scope_NAMESPACE, false, "cluster.local/ns/default/sa/denyacct"),
	}
	strict := &security.Authorization{
		Name: "istio_converted_static_strict", Namespace: "istio-system", Scope: security.Scope_WORKLOAD_SELECTOR, Action: security.Action_DENY,
		Groups: []*security.Group{{Rules: []*security.Rules{{Matches: []*security.Match{{NotPrincipals: []*security.StringMatch{sm("presence", "")}}}}}}},
	}
	cases := []struct {
		name     string
		auths    []*security.Authorization
		dst      *workload.Workload
		c        Conn
		want     Decision
		wantText string // Err's text, "" when allowed
	}{
		{
			name: "no allow policies in ns2: allow", auths: logic, dst: ns2, c: fromSA("not-defaultacct", "192.168.0.2"),
			want: Decision{Allowed: true, Reason: NoAllowPolicies, Events: []Event{{Message: "no allow policies, allow"}}},
		},
		{
			name: "a matching allow: allow", auths: logic, dst: ns1, c: fromSA("defaultacct", "192.168.0.1"),
			want: Decision{Allowed: true, Reason: AllowMatched, Policy: "ns1/foo", Events: []Event{
				{"ns1/wildcard-deny", "dry-run: deny policy match"},
				{"ns1/wildcard-allow", "dry-run: allow policy match"},
				{"ns1/foo", "allow policy match"},
			}},
		},
		{
			name: "allow policies, none matching: deny", auths: logic, dst: ns1, c: fromSA("not-defaultacct", "192.168.0.1"),
			want: Decision{Allowed: false, Reason: NoAllowMatched, Events: []Event{
				{"ns1/wildcard-deny", "dry-run: deny policy match"},
				{"ns1/wildcard-allow", "dry-run: allow policy match"},
				{"", "no allow policies matched"},
			}},
			wantText: "connection closed due to policy rejection: allow policies exist, but none allowed",
		},
		{
			name: "a matching deny: deny", auths: logic, dst: ns1, c: fromSA("denyacct", "192.168.0.1"),
			want: Decision{Allowed: false, Reason: DenyMatched, Policy: "ns1/deny", Events: []Event{
				{"ns1/wildcard-deny", "dry-run: deny policy match"},
				{"ns1/deny", "deny policy match"},
			}},
			wantText: "connection closed due to policy rejection: explicitly denied by: ns1/deny",
		},
		{
			name:  "only a dry-run allow that misses: allow, and say it would not",
			auths: []*security.Authorization{principalPolicy("ns1", "dry", security.Action_ALLOW, security.Scope_NAMESPACE, true, "nobody")},
			dst:   ns1, c: fromSA("a", "192.168.0.1"),
			want: Decision{Allowed: true, Reason: NoAllowPolicies, Events: []Event{
				{"", "dry-run: no allow policies match"}, {"", "no allow policies, allow"},
			}},
		},
		{
			name:  "a global deny applies everywhere",
			auths: []*security.Authorization{principalPolicy("istio-system", "g", security.Action_DENY, security.Scope_GLOBAL, false, "*")},
			dst:   ns2, c: fromSA("a", "192.168.0.2"),
			want:     Decision{Allowed: false, Reason: DenyMatched, Policy: "istio-system/g", Events: []Event{{"istio-system/g", "deny policy match"}}},
			wantText: "connection closed due to policy rejection: explicitly denied by: istio-system/g",
		},
		{
			name:  "another namespace's policy does not apply",
			auths: []*security.Authorization{principalPolicy("ns1", "d", security.Action_DENY, security.Scope_NAMESPACE, false, "*")},
			dst:   ns2, c: fromSA("a", "192.168.0.2"),
			want: Decision{Allowed: true, Reason: NoAllowPolicies, Events: []Event{{"", "no allow policies, allow"}}},
		},
		{
			name:  "a selector policy applies only when the workload names it",
			auths: []*security.Authorization{principalPolicy("ns2", "sel", security.Action_DENY, security.Scope_WORKLOAD_SELECTOR, false, "*")},
			dst:   ns2, c: fromSA("a", "192.168.0.2"),
			want: Decision{Allowed: true, Reason: NoAllowPolicies, Events: []Event{{"", "no allow policies, allow"}}},
		},
		{
			name:  "named selector policy, and an unknown name skipped",
			auths: []*security.Authorization{principalPolicy("ns2", "sel", security.Action_DENY, security.Scope_WORKLOAD_SELECTOR, false, "*")},
			dst:   &workload.Workload{Namespace: "ns2", AuthorizationPolicies: []string{"ns2/gone", "ns2/sel"}}, c: fromSA("a", "192.168.0.2"),
			want:     Decision{Allowed: false, Reason: DenyMatched, Policy: "ns2/sel", Unknown: []string{"ns2/gone"}, Events: []Event{{"ns2/sel", "deny policy match"}}},
			wantText: "connection closed due to policy rejection: explicitly denied by: ns2/sel",
		},
		{
			name:  "STRICT refuses plaintext",
			auths: []*security.Authorization{strict},
			dst:   &workload.Workload{Namespace: "ns2", AuthorizationPolicies: []string{"istio-system/istio_converted_static_strict"}},
			c:     Conn{Src: netip.MustParseAddrPort("10.0.0.1:5"), Dst: netip.MustParseAddrPort("10.0.0.2:80")},
			want: Decision{Allowed: false, Reason: DenyMatched, Policy: "istio-system/istio_converted_static_strict", Events: []Event{
				{"istio-system/istio_converted_static_strict", "deny policy match"},
			}},
			wantText: "connection closed due to policy rejection: explicitly denied by: istio-system/istio_converted_static_strict",
		},
		{
			name:  "STRICT lets mTLS through",
			auths: []*security.Authorization{strict},
			dst:   &workload.Workload{Namespace: "ns2", AuthorizationPolicies: []string{"istio-system/istio_converted_static_strict"}},
			c:     fromSA("a", "10.0.0.2"),
			want:  Decision{Allowed: true, Reason: NoAllowPolicies, Events: []Event{{"", "no allow policies, allow"}}},
		},
		{
			name: "deny wins over a matching allow",
			auths: []*security.Authorization{
				principalPolicy("ns1", "a", security.Action_ALLOW, security.Scope_NAMESPACE, false, "*"),
				principalPolicy("ns1", "z", security.Action_DENY, security.Scope_NAMESPACE, false, "*"),
			},
			dst: ns1, c: fromSA("a", "192.168.0.1"),
			want:     Decision{Allowed: false, Reason: DenyMatched, Policy: "ns1/z", Events: []Event{{"ns1/z", "deny policy match"}}},
			wantText: "connection closed due to policy rejection: explicitly denied by: ns1/z",
		},
		{
			name: "a policy named twice is evaluated once",
			auths: []*security.Authorization{
				principalPolicy("ns1", "a", security.Action_ALLOW, security.Scope_NAMESPACE, false, "nobody"),
			},
			dst: &workload.Workload{Namespace: "ns1", AuthorizationPolicies: []string{"ns1/a"}}, c: fromSA("a", "192.168.0.1"),
			want:     Decision{Allowed: false, Reason: NoAllowMatched, Events: []Event{{"", "no allow policies matched"}}},
			wantText: "connection closed due to policy rejection: allow policies exist, but none allowed",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Evaluate(tc.auths, tc.dst, tc.c)
			if got.Allowed != tc.want.Allowed || got.Reason != tc.want.Reason || got.Policy != tc.want.Policy ||
				!slices.Equal(got.Events, tc.want.Events) || !slices.Equal(got.Unknown, tc.want.Unknown) {
				t.Errorf("Evaluate =\n %+v\nwant\n %+v", got, tc.want)
			}
			text := ""
			if err := got.Err(); err != nil {
				text = err.Error()
				var rej *RejectionError
				if !errors.As(err, &rej) || rej.Policy != tc.want.Policy {
					t.Errorf("Err() = %#v, want a RejectionError naming %q", err, tc.want.Policy)
				}
			}
			if text != tc.wantText {
				t.Errorf("Err() = %q, want %q", text, tc.wantText)
			}
		})
	}
}

func TestNewSet(t *testing.T) {
	t.Parallel()
	s, errs := NewSet([]*security.Authorization{
		{Name: "b", Namespace: "ns", Scope: security.Scope_NAMESPACE},
		{Name: "a", Namespace: "ns", Scope: security.Scope_WORKLOAD_SELECTOR},
		{Name: "bad", Namespace: "ns", Action: 9},
		{Name: "g", Namespace: "istio-system", Scope: security.Scope_GLOBAL},
		{Name: "b", Namespace: "ns", Scope: security.Scope_WORKLOAD_SELECTOR}, // replaces the first
	})
	if len(errs) != 1 || !errors.Is(errs[0], ErrPolicy) {
		t.Errorf("errs = %v, want the bad action refused", errs)
	}
	var keys []string
	for _, p := range s.Policies() {
		keys = append(keys, p.Key())
	}
	if want := []string{"istio-system/g", "ns/a", "ns/b"}; !slices.Equal(keys, want) {
		t.Errorf("Policies = %v, want %v", keys, want)
	}
	if s.Len() != 3 || s.Get("ns/a") == nil || s.Get("ns/bad") != nil {
		t.Errorf("Len/Get wrong: %d", s.Len())
	}
	got, unknown := s.Applicable(&workload.Workload{Namespace: "ns"})
	if want := []string{"istio-system/g"}; !slices.Equal(got, want) || unknown != nil {
		t.Errorf("Applicable = %v %v, want %v (ns/b became a selector policy)", got, unknown, want)
	}
}

func TestConnString(t *testing.T) {
	t.Parallel()
	if got, want := tlsConn().String(), "127.0.0.1:1234(spiffe://td/ns/namespace/sa/account)->127.0.0.2:8080"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := plaintextConn().String(), "127.0.0.1:1234(None)->127.0.0.2:8080"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

// A v4-mapped connection address is compared as the v4 address it is.
func TestMappedAddresses(t *testing.T) {
	t.Parallel()
	p := allow([][]Match{{{SourceIPs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}})
	c := Conn{Src: netip.MustParseAddrPort("[::ffff:10.1.2.3]:5"), Dst: netip.MustParseAddrPort("10.0.0.2:80")}
	if !p.Matches(c) {
		t.Error("v4-mapped source did not match its v4 prefix")
	}
}
