package rbac

import (
	"fmt"
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rbacv3 "github.com/envoyproxy/go-control-plane/envoy/config/rbac/v3"
)

// Permission matches what a request or connection asks for.
type Permission interface{ Match(*Input) bool }

// Principal matches who the downstream is.
type Principal interface{ Match(*Input) bool }

type matchFunc func(*Input) bool

func (f matchFunc) Match(in *Input) bool { return f(in) }

func always(*Input) bool { return true }

func and(ms []matchFunc) matchFunc {
	return func(in *Input) bool {
		for _, m := range ms {
			if !m(in) {
				return false
			}
		}
		return true
	}
}

func or(ms []matchFunc) matchFunc {
	return func(in *Input) bool {
		for _, m := range ms {
			if m(in) {
				return true
			}
		}
		return false
	}
}

func not(m matchFunc) matchFunc { return func(in *Input) bool { return !m(in) } }

func compilePermission(p *rbacv3.Permission) (matchFunc, error) {
	switch r := p.GetRule().(type) {
	case *rbacv3.Permission_Any:
		return always, nil
	case *rbacv3.Permission_AndRules:
		ms, err := compilePermissions(r.AndRules.GetRules(), "and_rules")
		return and(ms), err
	case *rbacv3.Permission_OrRules:
		ms, err := compilePermissions(r.OrRules.GetRules(), "or_rules")
		return or(ms), err
	case *rbacv3.Permission_NotRule:
		m, err := compilePermission(r.NotRule)
		if err != nil {
			return nil, fmt.Errorf("not_rule.%w", err)
		}
		return not(m), nil
	case *rbacv3.Permission_Header:
		m, err := compileHeader(r.Header)
		if err != nil {
			return nil, fmt.Errorf("header.%w", err)
		}
		return m, nil
	case *rbacv3.Permission_UrlPath:
		m, err := compileStringMatcher(r.UrlPath.GetPath())
		if err != nil {
			return nil, fmt.Errorf("url_path.path.%w", err)
		}
		return urlPath(m), nil
	case *rbacv3.Permission_DestinationIp:
		pfx, err := cidr(r.DestinationIp)
		if err != nil {
			return nil, fmt.Errorf("destination_ip: %w", err)
		}
		return func(in *Input) bool { return pfx.Contains(in.Local.Addr().Unmap()) }, nil
	case *rbacv3.Permission_Metadata:
		m, err := compileMetadata(r.Metadata) //nolint:staticcheck // Envoy still honours the deprecated metadata, so the stand-in must too
		if err != nil {
			return nil, fmt.Errorf("metadata.%w", err)
		}
		return m, nil
	case *rbacv3.Permission_DestinationPort:
		port := r.DestinationPort
		return func(in *Input) bool { return uint32(in.Local.Port()) == port }, nil
	case *rbacv3.Permission_DestinationPortRange:
		lo, hi := r.DestinationPortRange.GetStart(), r.DestinationPortRange.GetEnd()
		return func(in *Input) bool { p := int32(in.Local.Port()); return p >= lo && p < hi }, nil
	}
	return nil, fmt.Errorf("rule: unsupported permission %T", p.GetRule())
}

func compilePermissions(ps []*rbacv3.Permission, field string) ([]matchFunc, error) {
	return compileEach(ps, field+".rules", compilePermission)
}

// compileEach compiles the rules of a list field (and_rules.rules, or_ids.ids...), an
// error naming the element at fault.
func compileEach[T any](items []T, field string, compile func(T) (matchFunc, error)) ([]matchFunc, error) {
	out := make([]matchFunc, 0, len(items))
	for i, it := range items {
		m, err := compile(it)
		if err != nil {
			return nil, fmt.Errorf("%s[%d].%w", field, i, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func compilePrincipal(p *rbacv3.Principal) (matchFunc, error) {
	switch id := p.GetIdentifier().(type) {
	case *rbacv3.Principal_Any:
		return always, nil
	case *rbacv3.Principal_AndIds:
		ms, err := compilePrincipals(id.AndIds.GetIds(), "and_ids")
		return and(ms), err
	case *rbacv3.Principal_OrIds:
		ms, err := compilePrincipals(id.OrIds.GetIds(), "or_ids")
		return or(ms), err
	case *rbacv3.Principal_NotId:
		m, err := compilePrincipal(id.NotId)
		if err != nil {
			return nil, fmt.Errorf("not_id.%w", err)
		}
		return not(m), nil
	case *rbacv3.Principal_Authenticated_:
		return compileAuthenticated(id.Authenticated)
	case *rbacv3.Principal_SourceIp:
		return remoteIP(id.SourceIp, "source_ip", func(in *Input) netip.AddrPort { return in.DirectRemote }) //nolint:staticcheck // Envoy still honours the deprecated source_ip
	case *rbacv3.Principal_DirectRemoteIp:
		return remoteIP(id.DirectRemoteIp, "direct_remote_ip", func(in *Input) netip.AddrPort { return in.DirectRemote })
	case *rbacv3.Principal_RemoteIp:
		return remoteIP(id.RemoteIp, "remote_ip", func(in *Input) netip.AddrPort { return in.Remote })
	case *rbacv3.Principal_Header:
		m, err := compileHeader(id.Header)
		if err != nil {
			return nil, fmt.Errorf("header.%w", err)
		}
		return m, nil
	case *rbacv3.Principal_Metadata:
		m, err := compileMetadata(id.Metadata) //nolint:staticcheck // the deprecated metadata Istio still sends for JWT claims
		if err != nil {
			return nil, fmt.Errorf("metadata.%w", err)
		}
		return m, nil
	case *rbacv3.Principal_FilterState:
		fs := id.FilterState
		if fs.GetStringMatch() == nil {
			return nil, fmt.Errorf("filter_state: only string_match is supported by meshlab proxy")
		}
		m, err := compileStringMatcher(fs.GetStringMatch())
		if err != nil {
			return nil, fmt.Errorf("filter_state.string_match.%w", err)
		}
		key := fs.GetKey()
		// As Envoy's FilterStateMatcher: an absent object never matches.
		return func(in *Input) bool {
			v, ok := in.FilterState[key]
			return ok && m(v)
		}, nil
	case *rbacv3.Principal_UrlPath:
		m, err := compileStringMatcher(id.UrlPath.GetPath())
		if err != nil {
			return nil, fmt.Errorf("url_path.path.%w", err)
		}
		return urlPath(m), nil
	}
	return nil, fmt.Errorf("identifier: unsupported principal %T", p.GetIdentifier())
}

func compilePrincipals(ps []*rbacv3.Principal, field string) ([]matchFunc, error) {
	return compileEach(ps, field+".ids", compilePrincipal)
}

// compileAuthenticated matches as Envoy's AuthenticatedMatcher: a TLS connection with a
// peer certificate; with principal_name, one of its URI SANs, else one of its DNS SANs,
// else its subject must match.
func compileAuthenticated(a *rbacv3.Principal_Authenticated) (matchFunc, error) {
	if a.GetPrincipalName() == nil {
		return func(in *Input) bool { return in.TLS }, nil
	}
	m, err := compileStringMatcher(a.GetPrincipalName())
	if err != nil {
		return nil, fmt.Errorf("authenticated.principal_name.%w", err)
	}
	return func(in *Input) bool {
		if !in.TLS || in.Peer == nil {
			return false
		}
		if len(in.Peer.URIs) > 0 {
			for _, u := range in.Peer.URIs {
				if m(u.String()) {
					return true
				}
			}
		}
		for _, d := range in.Peer.DNSNames {
			if m(d) {
				return true
			}
		}
		return m(in.Peer.Subject.String())
	}, nil
}

func remoteIP(r *corev3.CidrRange, field string, addr func(*Input) netip.AddrPort) (matchFunc, error) {
	pfx, err := cidr(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return func(in *Input) bool { return pfx.Contains(addr(in).Addr().Unmap()) }, nil
}

// urlPath matches the :path header without its query and fragment; no path never matches.
func urlPath(m stringMatch) matchFunc {
	return func(in *Input) bool {
		p, ok := in.header(":path")
		if !ok {
			return false
		}
		if i := strings.IndexAny(p, "?#"); i >= 0 {
			p = p[:i]
		}
		return m(p)
	}
}

func cidr(r *corev3.CidrRange) (netip.Prefix, error) {
	ip, err := netip.ParseAddr(r.GetAddressPrefix())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("malformed IP address: %s", r.GetAddressPrefix())
	}
	ip = ip.Unmap()
	bits := int(r.GetPrefixLen().GetValue())
	if r.GetPrefixLen() == nil {
		bits = 0
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix %s/%d: %w", ip, bits, err)
	}
	return p, nil
}
