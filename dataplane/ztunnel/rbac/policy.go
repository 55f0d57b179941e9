// Package rbac is ztunnel's L4 authorization: the istio.security.Authorization resources
// istiod sends over WADS, compiled once into matchers, and the decision for one connection
// into a destination workload, as ztunnel's src/rbac.rs and ProxyState::assert_rbac
// (src/state.rs) make it.
//
// The semantics are ztunnel's, not the proto's comments: a policy matches when any of its
// groups matches; a group when every one of its rules (clauses) matches, an empty rule
// matching; a rule when any of its non-empty matches matches; a match when every populated
// field matches, a field when any of its positive values matches and none of its not_
// values does. Principals are compared with the peer's SPIFFE id without "spiffe://", so a
// connection without an identity matches no principal, not even presence. The decision:
// dry-run policies are only logged; a matching DENY denies; no ALLOW policy allows; a
// matching ALLOW allows; otherwise deny.
//
// Everything here is pure and safe for concurrent use once built.
package rbac

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/meshlab/meshlab/ambientapi/security"
)

// ErrPolicy is wrapped by Compile's refusals: a resource ztunnel would reject whole.
var ErrPolicy = errors.New("invalid authorization")

// Policy is one Authorization compiled: its address and string matchers parsed and the
// entries ztunnel drops (a StringMatch without a kind, an address of the wrong length)
// already dropped.
type Policy struct {
	Name      string
	Namespace string
	Scope     security.Scope
	Action    security.Action
	DryRun    bool
	// Groups are the policy's groups; each group is its rules (ztunnel's clauses), each
	// rule its matches.
	Groups [][][]Match
}

// Key is the policy's name in a store and in a workload's authorization_policies list:
// "namespace/name", as istiod names the resource.
func (p *Policy) Key() string { return p.Namespace + "/" + p.Name }

// Match is one compiled security.Match.
type Match struct {
	Namespaces          []StringMatch
	NotNamespaces       []StringMatch
	ServiceAccounts     []ServiceAccountMatch
	NotServiceAccounts  []ServiceAccountMatch
	Principals          []StringMatch
	NotPrincipals       []StringMatch
	SourceIPs           []netip.Prefix
	NotSourceIPs        []netip.Prefix
	DestinationIPs      []netip.Prefix
	NotDestinationIPs   []netip.Prefix
	DestinationPorts    []uint16
	NotDestinationPorts []uint16
}

// empty reports whether no field of m is populated: ztunnel skips such a match, it
// neither matches nor fails its rule by itself.
func (m *Match) empty() bool {
	return len(m.Namespaces) == 0 && len(m.NotNamespaces) == 0 &&
		len(m.ServiceAccounts) == 0 && len(m.NotServiceAccounts) == 0 &&
		len(m.Principals) == 0 && len(m.NotPrincipals) == 0 &&
		len(m.SourceIPs) == 0 && len(m.NotSourceIPs) == 0 &&
		len(m.DestinationIPs) == 0 && len(m.NotDestinationIPs) == 0 &&
		len(m.DestinationPorts) == 0 && len(m.NotDestinationPorts) == 0
}

// MatchKind is how a StringMatch compares.
type MatchKind uint8

// The kinds of security.StringMatch.
const (
	Exact MatchKind = iota
	Prefix
	Suffix
	Presence
)

// String names the kind as the proto's oneof does.
func (k MatchKind) String() string {
	switch k {
	case Exact:
		return "exact"
	case Prefix:
		return "prefix"
	case Suffix:
		return "suffix"
	case Presence:
		return "presence"
	}
	return fmt.Sprintf("MatchKind(%d)", uint8(k))
}

// StringMatch is one compiled security.StringMatch.
type StringMatch struct {
	Kind  MatchKind
	Value string // unused for Presence
}

// Matches reports whether s matches; presence matches any non-empty string.
func (m StringMatch) Matches(s string) bool {
	switch m.Kind {
	case Exact:
		return s == m.Value
	case Prefix:
		return len(s) >= len(m.Value) && s[:len(m.Value)] == m.Value
	case Suffix:
		return len(s) >= len(m.Value) && s[len(s)-len(m.Value):] == m.Value
	case Presence:
		return s != ""
	}
	return false
}

// ServiceAccountMatch matches a peer's namespace and service account (any trust domain).
type ServiceAccountMatch struct {
	Namespace      string
	ServiceAccount string
}

// Compile turns one resource into a Policy. It refuses (ErrPolicy) what ztunnel refuses
// whole: a nil resource, a scope or action outside the enums. Inside the matches it drops,
// as ztunnel does, a StringMatch without a kind and an address that is not 4 or 16 bytes
// or whose length exceeds its bits; ports and lengths are narrowed as ztunnel narrows them
// (port as u16, length as u8).
func Compile(a *security.Authorization) (*Policy, error) {
	if a == nil {
		return nil, fmt.Errorf("compile authorization: %w: nil", ErrPolicy)
	}
	if _, ok := security.Scope_name[int32(a.GetScope())]; !ok {
		return nil, fmt.Errorf("compile authorization %s/%s: %w: unknown scope %d", a.GetNamespace(), a.GetName(), ErrPolicy, a.GetScope())
	}
	if _, ok := security.Action_name[int32(a.GetAction())]; !ok {
		return nil, fmt.Errorf("compile authorization %s/%s: %w: unknown action %d", a.GetNamespace(), a.GetName(), ErrPolicy, a.GetAction())
	}
	p := &Policy{
		Name:      a.GetName(),
		Namespace: a.GetNamespace(),
		Scope:     a.GetScope(),
		Action:    a.GetAction(),
		DryRun:    a.GetDryRun(),
		Groups:    make([][][]Match, 0, len(a.GetGroups())),
	}
	for _, g := range a.GetGroups() {
		rules := make([][]Match, 0, len(g.GetRules()))
		for _, r := range g.GetRules() {
			matches := make([]Match, 0, len(r.GetMatches()))
			for _, m := range r.GetMatches() {
				matches = append(matches, compileMatch(m))
			}
			rules = append(rules, matches)
		}
		p.Groups = append(p.Groups, rules)
	}
	return p, nil
}

func compileMatch(m *security.Match) Match {
	return Match{
		Namespaces:          stringMatches(m.GetNamespaces()),
		NotNamespaces:       stringMatches(m.GetNotNamespaces()),
		ServiceAccounts:     serviceAccounts(m.GetServiceAccounts()),
		NotServiceAccounts:  serviceAccounts(m.GetNotServiceAccounts()),
		Principals:          stringMatches(m.GetPrincipals()),
		NotPrincipals:       stringMatches(m.GetNotPrincipals()),
		SourceIPs:           prefixes(m.GetSourceIps()),
		NotSourceIPs:        prefixes(m.GetNotSourceIps()),
		DestinationIPs:      prefixes(m.GetDestinationIps()),
		NotDestinationIPs:   prefixes(m.GetNotDestinationIps()),
		DestinationPorts:    ports(m.GetDestinationPorts()),
		NotDestinationPorts: ports(m.GetNotDestinationPorts()),
	}
}

func stringMatches(in []*security.StringMatch) []StringMatch {
	var out []StringMatch
	for _, s := range in {
		switch t := s.GetMatchType().(type) {
		case *security.StringMatch_Exact:
			out = append(out, StringMatch{Kind: Exact, Value: t.Exact})
		case *security.StringMatch_Prefix:
			out = append(out, StringMatch{Kind: Prefix, Value: t.Prefix})
		case *security.StringMatch_Suffix:
			out = append(out, StringMatch{Kind: Suffix, Value: t.Suffix})
		case *security.StringMatch_Presence:
			out = append(out, StringMatch{Kind: Presence})
		}
	}
	return out
}

func serviceAccounts(in []*security.ServiceAccountMatch) []ServiceAccountMatch {
	var out []ServiceAccountMatch
	for _, s := range in {
		out = append(out, ServiceAccountMatch{Namespace: s.GetNamespace(), ServiceAccount: s.GetServiceAccount()})
	}
	return out
}

func prefixes(in []*security.Address) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range in {
		if p, ok := ParseAddress(a.GetAddress(), a.GetLength()); ok {
			out = append(out, p)
		}
	}
	return out
}

// ParseAddress is a security.Address as ztunnel reads it: 4 or 16 bytes and a prefix
// length taken modulo 256 (ztunnel's `as u8`) that must not exceed the address's bits.
// The host bits are kept, as ztunnel keeps them; they do not affect matching.
func ParseAddress(b []byte, length uint32) (netip.Prefix, bool) {
	ip, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.Prefix{}, false
	}
	p := netip.PrefixFrom(ip, int(uint8(length)))
	return p, p.IsValid()
}

func ports(in []uint32) []uint16 {
	var out []uint16
	for _, p := range in {
		out = append(out, uint16(p)) //nolint:gosec // narrowed as ztunnel narrows it (`as u16`)
	}
	return out
}
