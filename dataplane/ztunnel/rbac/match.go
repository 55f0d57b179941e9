package rbac

import (
	"fmt"
	"net/netip"
	"strings"
)

// Identity is a peer's SPIFFE identity, spiffe://<trust domain>/ns/<namespace>/sa/<sa>.
type Identity struct {
	TrustDomain    string
	Namespace      string
	ServiceAccount string
}

// String is the identity's SPIFFE URI.
func (id Identity) String() string {
	return "spiffe://" + id.TrustDomain + "/ns/" + id.Namespace + "/sa/" + id.ServiceAccount
}

// ParseIdentity reads a SPIFFE URI as ztunnel does: "spiffe://" then exactly five
// slash-separated parts, the second "ns" and the fourth "sa". Parts may be empty.
func ParseIdentity(s string) (Identity, error) {
	rest, ok := strings.CutPrefix(s, "spiffe://")
	if !ok {
		return Identity{}, fmt.Errorf("parse identity %q: not a spiffe:// uri", s)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 5 || parts[1] != "ns" || parts[3] != "sa" {
		return Identity{}, fmt.Errorf("parse identity %q: want spiffe://<trust domain>/ns/<namespace>/sa/<service account>", s)
	}
	return Identity{TrustDomain: parts[0], Namespace: parts[2], ServiceAccount: parts[4]}, nil
}

// Conn is the connection being authorized, as the destination ztunnel sees it.
type Conn struct {
	// Src is the client's address (the peer's, or the original source the HBONE
	// connection carries).
	Src netip.AddrPort
	// Dst is the original destination: the workload's address and target port.
	Dst netip.AddrPort
	// SrcIdentity is the peer certificate's identity; nil for plaintext (15006).
	SrcIdentity *Identity
}

// String is the connection as ztunnel logs it: src(identity|None)->dst.
func (c Conn) String() string {
	id := "None"
	if c.SrcIdentity != nil {
		id = c.SrcIdentity.String()
	}
	return c.Src.String() + "(" + id + ")->" + c.Dst.String()
}

// Matches reports whether c matches p, regardless of p's action and dry-run flag.
func (p *Policy) Matches(c Conn) bool {
	srcIP, dstIP, dstPort := c.Src.Addr().Unmap(), c.Dst.Addr().Unmap(), c.Dst.Port()
	var principal, ns string
	if c.SrcIdentity != nil {
		principal = strings.TrimPrefix(c.SrcIdentity.String(), "spiffe://")
		ns = c.SrcIdentity.Namespace
	}
	for _, group := range p.Groups {
		if groupMatches(group, c, srcIP, dstIP, dstPort, principal, ns) {
			return true
		}
	}
	return false
}

// groupMatches is one group: every rule must match; a rule with no matches matches.
func groupMatches(group [][]Match, c Conn, srcIP, dstIP netip.Addr, dstPort uint16, principal, ns string) bool {
	for _, rule := range group {
		if len(rule) == 0 {
			continue
		}
		ok := false
		for i := range rule {
			m := &rule[i]
			if m.empty() {
				continue
			}
			if m.matches(c, srcIP, dstIP, dstPort, principal, ns) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (m *Match) matches(c Conn, srcIP, dstIP netip.Addr, dstPort uint16, principal, ns string) bool {
	return field(m.DestinationIPs, m.NotDestinationIPs, func(p netip.Prefix) bool { return p.Contains(dstIP) }) &&
		field(m.SourceIPs, m.NotSourceIPs, func(p netip.Prefix) bool { return p.Contains(srcIP) }) &&
		field(m.DestinationPorts, m.NotDestinationPorts, func(p uint16) bool { return p == dstPort }) &&
		field(m.ServiceAccounts, m.NotServiceAccounts, func(s ServiceAccountMatch) bool {
			return c.SrcIdentity != nil && s.Namespace == c.SrcIdentity.Namespace && s.ServiceAccount == c.SrcIdentity.ServiceAccount
		}) &&
		field(m.Principals, m.NotPrincipals, func(s StringMatch) bool {
			// No identity is no principal: even presence fails, so a not_principals
			// presence (PeerAuthentication STRICT) matches plaintext.
			return c.SrcIdentity != nil && s.Matches(principal)
		}) &&
		field(m.Namespaces, m.NotNamespaces, func(s StringMatch) bool { return s.Matches(ns) })
}

// field is one field of a match: any positive value matches (or none is given) and no
// negative value does.
func field[T any](positive, negative []T, pred func(T) bool) bool {
	if len(positive) > 0 && !anyOf(positive, pred) {
		return false
	}
	return !anyOf(negative, pred)
}

func anyOf[T any](vs []T, pred func(T) bool) bool {
	for _, v := range vs {
		if pred(v) {
			return true
		}
	}
	return false
}
