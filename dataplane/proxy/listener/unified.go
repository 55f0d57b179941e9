package listener

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3" // registers the input types
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
)

// A listener's filter_chain_matcher (the unified matcher, xds.type.matcher.v3.Matcher)
// picks a filter chain by name instead of the chains' filter_chain_match, as Envoy does
// when it is set: matcher trees on the network inputs below, with exact_match_map or the
// IP matcher (longest prefix first; a non-exclusive range whose nested matcher does not
// match falls back to shorter ones), on_no_match at every level, and actions that name a
// chain (google.protobuf.StringValue). No match uses the default filter chain. An input
// with no data (no SNI, no transport or application protocol) matches no key and no
// range: its node's on_no_match decides, as Envoy's.

// unifiedAllow is what the proxy implements of the unified matcher.
var unifiedAllow = fieldcheck.Allow{
	"xds.type.matcher.v3.Matcher":                                                 {"matcher_tree", "on_no_match"},
	"xds.type.matcher.v3.Matcher.MatcherTree":                                     {"input", "exact_match_map", "custom_match"},
	"xds.type.matcher.v3.Matcher.MatcherTree.MatchMap":                            {"map"},
	"xds.type.matcher.v3.Matcher.OnMatch":                                         {"matcher", "action"},
	"xds.core.v3.TypedExtensionConfig":                                            {"name", "typed_config"},
	"xds.type.matcher.v3.IPMatcher":                                               {"range_matchers"},
	"xds.type.matcher.v3.IPMatcher.IPRangeMatcher":                                {"ranges", "on_match", "exclusive"},
	"xds.core.v3.CidrRange":                                                       {"address_prefix", "prefix_len"},
	"google.protobuf.StringValue":                                                 {"value"},
	"envoy.extensions.matching.common_inputs.network.v3.DestinationIPInput":       {},
	"envoy.extensions.matching.common_inputs.network.v3.DestinationPortInput":     {},
	"envoy.extensions.matching.common_inputs.network.v3.SourceIPInput":            {},
	"envoy.extensions.matching.common_inputs.network.v3.SourcePortInput":          {},
	"envoy.extensions.matching.common_inputs.network.v3.ServerNameInput":          {},
	"envoy.extensions.matching.common_inputs.network.v3.TransportProtocolInput":   {},
	"envoy.extensions.matching.common_inputs.network.v3.ApplicationProtocolInput": {},
}

// input is a network matching input.
type input int

const (
	inDestinationIP input = iota
	inDestinationPort
	inSourceIP
	inSourcePort
	inServerName
	inTransportProtocol
	inApplicationProtocol
)

var inputTypes = map[protoreflect.FullName]input{
	"envoy.extensions.matching.common_inputs.network.v3.DestinationIPInput":       inDestinationIP,
	"envoy.extensions.matching.common_inputs.network.v3.DestinationPortInput":     inDestinationPort,
	"envoy.extensions.matching.common_inputs.network.v3.SourceIPInput":            inSourceIP,
	"envoy.extensions.matching.common_inputs.network.v3.SourcePortInput":          inSourcePort,
	"envoy.extensions.matching.common_inputs.network.v3.ServerNameInput":          inServerName,
	"envoy.extensions.matching.common_inputs.network.v3.TransportProtocolInput":   inTransportProtocol,
	"envoy.extensions.matching.common_inputs.network.v3.ApplicationProtocolInput": inApplicationProtocol,
}

// value returns the input's value for ci, false when the connection has none (Envoy's
// input returns no data). The application protocols are the connection's requested
// ones (TLS ALPN, or the HTTP inspector's http/1.1, http/1.0 or h2c) each in single
// quotes, comma-separated: 'h2','http/1.1'.
func (in input) value(ci ConnInfo) (string, bool) {
	switch in {
	case inDestinationIP:
		if !ci.Local.IsValid() {
			return "", false
		}
		return ci.Local.Addr().Unmap().String(), true
	case inDestinationPort:
		return strconv.Itoa(int(ci.Local.Port())), true
	case inSourceIP:
		if !ci.Remote.IsValid() {
			return "", false
		}
		return ci.Remote.Addr().Unmap().String(), true
	case inSourcePort:
		return strconv.Itoa(int(ci.Remote.Port())), true
	case inServerName:
		return ci.ServerName, ci.ServerName != ""
	case inTransportProtocol:
		return ci.TransportProtocol, ci.TransportProtocol != ""
	case inApplicationProtocol:
		if len(ci.ALPN) == 0 {
			return "", false
		}
		return "'" + strings.Join(ci.ALPN, "','") + "'", true
	}
	return "", false
}

// chainMatcher is a compiled Matcher.
type chainMatcher struct {
	in      input
	exact   map[string]*chainOnMatch
	ranges  []ipRange // longest prefix first
	noMatch *chainOnMatch
}

// chainOnMatch is a chain name or a nested matcher.
type chainOnMatch struct {
	chain  string
	nested *chainMatcher
}

type ipRange struct {
	prefix    netip.Prefix
	on        *chainOnMatch
	exclusive bool
}

// match returns the name of the chain m picks for ci, false for none.
func (m *chainMatcher) match(ci ConnInfo) (string, bool) {
	if v, ok := m.in.value(ci); ok {
		if name, ok := m.matchValue(v, ci); ok {
			return name, true
		}
	}
	if m.noMatch != nil {
		return m.noMatch.match(ci)
	}
	return "", false
}

// matchValue looks v up in m's exact map or IP ranges.
func (m *chainMatcher) matchValue(v string, ci ConnInfo) (string, bool) {
	if m.exact != nil {
		if om := m.exact[v]; om != nil {
			return om.match(ci)
		}
		return "", false
	}
	ip, err := netip.ParseAddr(v)
	if err != nil {
		return "", false
	}
	for _, r := range m.ranges {
		if !r.prefix.Contains(ip) {
			continue
		}
		if name, ok := r.on.match(ci); ok {
			return name, true
		}
		if r.exclusive {
			break
		}
	}
	return "", false
}

func (om *chainOnMatch) match(ci ConnInfo) (string, bool) {
	if om.nested != nil {
		return om.nested.match(ci)
	}
	return om.chain, true
}

// compileChainMatcher compiles a listener's filter_chain_matcher; every action must name
// one of chains. Errors name the field relative to filter_chain_matcher.
func compileChainMatcher(m *matcherv3.Matcher, chains map[string]bool) (*chainMatcher, error) {
	if err := unifiedAllow.Check(m); err != nil {
		return nil, err
	}
	return compileMatcherNode(m, chains)
}

func compileMatcherNode(m *matcherv3.Matcher, chains map[string]bool) (*chainMatcher, error) {
	tree := m.GetMatcherTree()
	if tree == nil {
		return nil, errors.New("matcher_list: field is not supported by meshlab proxy")
	}
	tc := tree.GetInput().GetTypedConfig()
	if tc == nil {
		return nil, errors.New("matcher_tree.input.typed_config: required")
	}
	in, ok := inputTypes[tc.MessageName()]
	if !ok {
		return nil, fmt.Errorf("matcher_tree.input.typed_config: unsupported input %s", tc.MessageName())
	}
	if err := checkTyped(tc.MessageName(), tc.UnmarshalNew); err != nil {
		return nil, fmt.Errorf("matcher_tree.input.typed_config.%w", err)
	}
	out := &chainMatcher{in: in}
	switch {
	case tree.GetExactMatchMap() != nil:
		out.exact = map[string]*chainOnMatch{}
		for k, om := range tree.GetExactMatchMap().GetMap() {
			c, err := compileOnMatch(om, chains)
			if err != nil {
				return nil, fmt.Errorf("matcher_tree.exact_match_map.map[%s].%w", k, err)
			}
			out.exact[k] = c
		}
	case tree.GetCustomMatch() != nil:
		cm := tree.GetCustomMatch().GetTypedConfig()
		if cm.MessageName() != "xds.type.matcher.v3.IPMatcher" {
			return nil, fmt.Errorf("matcher_tree.custom_match.typed_config: unsupported matcher %s", cm.MessageName())
		}
		if in != inDestinationIP && in != inSourceIP {
			return nil, errors.New("matcher_tree.custom_match: the IP matcher needs an IP input")
		}
		var ipm matcherv3.IPMatcher
		if err := cm.UnmarshalTo(&ipm); err != nil {
			return nil, fmt.Errorf("matcher_tree.custom_match.typed_config: %w", err)
		}
		if err := unifiedAllow.Check(&ipm); err != nil {
			return nil, fmt.Errorf("matcher_tree.custom_match.typed_config.%w", err)
		}
		for i, rm := range ipm.GetRangeMatchers() {
			c, err := compileOnMatch(rm.GetOnMatch(), chains)
			if err != nil {
				return nil, fmt.Errorf("matcher_tree.custom_match.range_matchers[%d].%w", i, err)
			}
			for j, r := range rm.GetRanges() {
				p, err := xdsCIDR(r)
				if err != nil {
					return nil, fmt.Errorf("matcher_tree.custom_match.range_matchers[%d].ranges[%d]: %w", i, j, err)
				}
				out.ranges = append(out.ranges, ipRange{prefix: p, on: c, exclusive: rm.GetExclusive()})
			}
		}
		sort.SliceStable(out.ranges, func(i, j int) bool { return out.ranges[i].prefix.Bits() > out.ranges[j].prefix.Bits() })
	default:
		return nil, errors.New("matcher_tree: prefix_match_map is not supported by meshlab proxy")
	}
	if om := m.GetOnNoMatch(); om != nil {
		c, err := compileOnMatch(om, chains)
		if err != nil {
			return nil, fmt.Errorf("on_no_match.%w", err)
		}
		out.noMatch = c
	}
	return out, nil
}

func compileOnMatch(om *matcherv3.Matcher_OnMatch, chains map[string]bool) (*chainOnMatch, error) {
	if n := om.GetMatcher(); n != nil {
		nested, err := compileMatcherNode(n, chains)
		if err != nil {
			return nil, fmt.Errorf("matcher.%w", err)
		}
		return &chainOnMatch{nested: nested}, nil
	}
	tc := om.GetAction().GetTypedConfig()
	if tc.MessageName() != "google.protobuf.StringValue" {
		return nil, fmt.Errorf("action.typed_config: unsupported action %s (want a filter chain name)", tc.MessageName())
	}
	var name wrapperspb.StringValue
	if err := tc.UnmarshalTo(&name); err != nil {
		return nil, fmt.Errorf("action.typed_config: %w", err)
	}
	if !chains[name.GetValue()] {
		return nil, fmt.Errorf("action: filter chain '%s' not found", name.GetValue())
	}
	return &chainOnMatch{chain: name.GetValue()}, nil
}

func xdsCIDR(r *xdscorev3.CidrRange) (netip.Prefix, error) {
	ip, err := netip.ParseAddr(r.GetAddressPrefix())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("address_prefix: malformed IP address: %s", r.GetAddressPrefix())
	}
	bits := int(r.GetPrefixLen().GetValue()) // unset is 0, as Envoy's CidrRange
	p, err := ip.Unmap().Prefix(bits)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("prefix_len: %w", err)
	}
	return p, nil
}

// checkTyped unpacks a typed config and checks it against unifiedAllow.
func checkTyped(_ protoreflect.FullName, unpack func() (protoreflect.ProtoMessage, error)) error {
	m, err := unpack()
	if err != nil {
		return fmt.Errorf("typed_config: %w", err)
	}
	return unifiedAllow.Check(m)
}
