package listener

import (
	"errors"
	"fmt"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// Predicate is a compiled ListenerFilterChainMatchPredicate (a listener filter's
// filter_disabled): any_match, and_match, or_match, not_match and
// destination_port_range over the connection's (original) destination port.
type Predicate struct {
	any        bool
	and, or    []*Predicate
	not        *Predicate
	start, end uint32 // destination_port_range [start, end)
	ports      bool
}

func compilePredicate(p *listenerv3.ListenerFilterChainMatchPredicate) (*Predicate, error) {
	if p == nil {
		return nil, nil
	}
	out := &Predicate{}
	switch r := p.GetRule().(type) {
	case *listenerv3.ListenerFilterChainMatchPredicate_AnyMatch:
		out.any = r.AnyMatch
	case *listenerv3.ListenerFilterChainMatchPredicate_DestinationPortRange:
		out.ports, out.start, out.end = true, uint32(r.DestinationPortRange.GetStart()), uint32(r.DestinationPortRange.GetEnd())
	case *listenerv3.ListenerFilterChainMatchPredicate_NotMatch:
		n, err := compilePredicate(r.NotMatch)
		if err != nil {
			return nil, fmt.Errorf("not_match.%w", err)
		}
		out.not = n
	case *listenerv3.ListenerFilterChainMatchPredicate_AndMatch:
		for i, rule := range r.AndMatch.GetRules() {
			c, err := compilePredicate(rule)
			if err != nil {
				return nil, fmt.Errorf("and_match.rules[%d].%w", i, err)
			}
			out.and = append(out.and, c)
		}
	case *listenerv3.ListenerFilterChainMatchPredicate_OrMatch:
		for i, rule := range r.OrMatch.GetRules() {
			c, err := compilePredicate(rule)
			if err != nil {
				return nil, fmt.Errorf("or_match.rules[%d].%w", i, err)
			}
			out.or = append(out.or, c)
		}
	default:
		return nil, errors.New("rule: required")
	}
	return out, nil
}

// Matches reports whether the predicate holds for a connection to dstPort; a nil
// predicate matches nothing (the filter is never disabled).
func (p *Predicate) Matches(dstPort uint16) bool {
	switch {
	case p == nil:
		return false
	case p.any:
		return true
	case p.ports:
		return uint32(dstPort) >= p.start && uint32(dstPort) < p.end
	case p.not != nil:
		return !p.not.Matches(dstPort)
	case p.and != nil:
		for _, c := range p.and {
			if !c.Matches(dstPort) {
				return false
			}
		}
		return true
	case p.or != nil:
		for _, c := range p.or {
			if c.Matches(dstPort) {
				return true
			}
		}
		return false
	}
	return false
}
