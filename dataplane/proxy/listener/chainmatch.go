package listener

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
)

// checkChainMatches refuses filter chains Envoy's filter chain manager refuses when it
// adds a listener: a server name with a wildcard anywhere but a leading "*." label
// ("partial wildcards"), two chains with the same filter_chain_match, and two chains
// that would both answer one connection (any destination port, destination prefix,
// server name, transport protocol, application protocol and source prefix they share:
// "overlapping matching rules"). Server names compare case-insensitively and
// prefixes by their masked network, as Envoy's matching tree keys them.
func checkChainMatches(chains []*listenerv3.FilterChain) error {
	for i, fc := range chains {
		for _, sn := range fc.GetFilterChainMatch().GetServerNames() {
			if strings.Contains(sn, "*") && (!strings.HasPrefix(sn, "*.") || strings.Contains(sn[1:], "*")) {
				return fmt.Errorf("filter_chains[%d].filter_chain_match.server_names: partial wildcards are not supported in \"server_names\" (%q)", i, sn)
			}
		}
	}
	for i, fc := range chains {
		for j := range i {
			if proto.Equal(fc.GetFilterChainMatch(), chains[j].GetFilterChainMatch()) {
				return fmt.Errorf("filter chain '%s' has the same matching rules defined as '%s'", fc.GetName(), chains[j].GetName())
			}
		}
	}
	seen := map[string]bool{}
	for _, fc := range chains {
		for _, k := range matchKeys(fc.GetFilterChainMatch()) {
			if seen[k] {
				return errors.New("multiple filter chains with overlapping matching rules are defined")
			}
			seen[k] = true
		}
	}
	return nil
}

// matchKeys returns one key per combination of the match's criteria, each list
// standing for "any" when empty: the leaves of Envoy's filter chain matching tree.
func matchKeys(m *listenerv3.FilterChainMatch) []string {
	prefixKeys := func(rs []*corev3.CidrRange) []string {
		var out []string
		for _, r := range rs {
			p, err := netip.ParsePrefix(fmt.Sprintf("%s/%d", r.GetAddressPrefix(), r.GetPrefixLen().GetValue()))
			if err != nil {
				out = append(out, r.GetAddressPrefix())
				continue
			}
			out = append(out, p.Masked().String())
		}
		return orAny(out)
	}
	var names []string
	for _, n := range m.GetServerNames() {
		names = append(names, strings.ToLower(n))
	}
	keys := []string{fmt.Sprint(m.GetDestinationPort().GetValue())}
	for _, level := range [][]string{
		prefixKeys(m.GetPrefixRanges()),
		orAny(names),
		{m.GetTransportProtocol()},
		orAny(m.GetApplicationProtocols()),
		prefixKeys(m.GetSourcePrefixRanges()),
	} {
		next := make([]string, 0, len(keys)*len(level))
		for _, k := range keys {
			for _, v := range level {
				next = append(next, k+"\x00"+v)
			}
		}
		keys = next
	}
	return keys
}

func orAny(vs []string) []string {
	if len(vs) == 0 {
		return []string{""}
	}
	return vs
}
