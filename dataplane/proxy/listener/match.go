package listener

import (
	"net/netip"
	"slices"
	"strings"
)

// ConnInfo is what filter chain matching knows about a connection: its addresses and
// what the listener filters detected.
type ConnInfo struct {
	Local, Remote netip.AddrPort
	// TransportProtocol is "tls" when tls_inspector saw a ClientHello, else "raw_buffer"
	// (Envoy's default for a plaintext socket).
	TransportProtocol string
	ServerName        string   // SNI
	ALPN              []string // TLS ALPN, or "http/1.1"/"h2c" from http_inspector
}

// SelectChain picks the filter chain for a plaintext connection with no listener filter
// information; see Select.
func (c *Config) SelectChain(local, remote netip.AddrPort) *FilterChain {
	return c.Select(ConnInfo{Local: local, Remote: remote, TransportProtocol: "raw_buffer"})
}

// Select picks the filter chain for a connection as Envoy does: each criterion in order
// narrows the candidates to the most specific ones that match (destination port,
// destination IP by longest prefix, server name (exact, then longest wildcard),
// transport protocol, application protocols, then source IP by longest prefix), and a
// chain that is less specific at one level is excluded even if it would match later. It
// returns the default filter chain, or nil, when nothing matches. A listener with a
// filter_chain_matcher picks by the matcher only.
func (c *Config) Select(ci ConnInfo) *FilterChain {
	if c.Matcher != nil {
		if name, ok := c.Matcher.match(ci); ok {
			for _, fc := range c.Chains {
				if fc.Name == name {
					return fc
				}
			}
		}
		return c.Default
	}
	cands := c.Chains
	cands = narrowPort(cands, uint32(ci.Local.Port()))
	cands = narrowPrefix(cands, ci.Local.Addr().Unmap(), func(fc *FilterChain) []netip.Prefix { return fc.Prefixes })
	cands = narrowServerName(cands, ci.ServerName)
	cands = narrowTransport(cands, ci.TransportProtocol)
	cands = narrowALPN(cands, ci.ALPN)
	cands = narrowPrefix(cands, ci.Remote.Addr().Unmap(), func(fc *FilterChain) []netip.Prefix { return fc.SourcePrefixes })
	if len(cands) > 0 {
		return cands[0]
	}
	return c.Default
}

// narrowServerName keeps the chains naming sn exactly, else those with the longest
// matching "*.suffix" wildcard, else those with no server_names.
func narrowServerName(cands []*FilterChain, sn string) []*FilterChain {
	best := -1
	var matched, wild []*FilterChain
	for _, fc := range cands {
		if len(fc.ServerNames) == 0 {
			wild = append(wild, fc)
			continue
		}
		score := -1
		for _, n := range fc.ServerNames {
			switch {
			case sn == "":
			case n == sn:
				score = max(score, 1<<20)
			case strings.HasPrefix(n, "*.") && strings.HasSuffix(sn, n[1:]):
				score = max(score, len(n))
			}
		}
		switch {
		case score < 0:
		case score > best:
			best, matched = score, []*FilterChain{fc}
		case score == best:
			matched = append(matched, fc)
		}
	}
	if len(matched) > 0 {
		return matched
	}
	return wild
}

func narrowTransport(cands []*FilterChain, tp string) []*FilterChain {
	var exact, wild []*FilterChain
	for _, fc := range cands {
		switch fc.TransportProtocol {
		case tp:
			exact = append(exact, fc)
		case "":
			wild = append(wild, fc)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return wild
}

// narrowALPN keeps the chains listing the first of the connection's protocols that any
// chain lists, else those with no application_protocols.
func narrowALPN(cands []*FilterChain, alpn []string) []*FilterChain {
	for _, p := range alpn {
		var matched []*FilterChain
		for _, fc := range cands {
			if slices.Contains(fc.ALPN, p) {
				matched = append(matched, fc)
			}
		}
		if len(matched) > 0 {
			return matched
		}
	}
	var wild []*FilterChain
	for _, fc := range cands {
		if len(fc.ALPN) == 0 {
			wild = append(wild, fc)
		}
	}
	return wild
}

func narrowPort(cands []*FilterChain, port uint32) []*FilterChain {
	var exact, wild []*FilterChain
	for _, fc := range cands {
		switch fc.DstPort {
		case port:
			exact = append(exact, fc)
		case 0:
			wild = append(wild, fc)
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return wild
}

func narrowPrefix(cands []*FilterChain, ip netip.Addr, get func(*FilterChain) []netip.Prefix) []*FilterChain {
	best := -1
	var matched, wild []*FilterChain
	for _, fc := range cands {
		ps := get(fc)
		if len(ps) == 0 {
			wild = append(wild, fc)
			continue
		}
		l := longest(ps, ip)
		switch {
		case l < 0:
		case l > best:
			best, matched = l, []*FilterChain{fc}
		case l == best:
			matched = append(matched, fc)
		}
	}
	if len(matched) > 0 {
		return matched
	}
	return wild
}

func longest(ps []netip.Prefix, ip netip.Addr) int {
	best := -1
	for _, p := range ps {
		if p.Contains(ip) && p.Bits() > best {
			best = p.Bits()
		}
	}
	return best
}
