package listener

import "net/netip"

// SelectChain picks the filter chain for a connection as Envoy does: each criterion in
// order narrows the candidates to the most specific ones that match (destination port,
// then destination IP by longest prefix, then source IP by longest prefix), and a chain
// that is less specific at one level is excluded even if it would match later. It returns
// the default filter chain, or nil, when nothing matches.
func (c *Config) SelectChain(local, remote netip.AddrPort) *FilterChain {
	cands := c.Chains
	cands = narrowPort(cands, uint32(local.Port()))
	cands = narrowPrefix(cands, local.Addr().Unmap(), func(fc *FilterChain) []netip.Prefix { return fc.Prefixes })
	cands = narrowPrefix(cands, remote.Addr().Unmap(), func(fc *FilterChain) []netip.Prefix { return fc.SourcePrefixes })
	if len(cands) > 0 {
		return cands[0]
	}
	return c.Default
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
