package xds

import (
	"cmp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// resolveHost turns a host named in an Istio object of namespace ns into the hostname
// clusters and virtual hosts use. A bare name is short for "<name>.<ns>.svc.cluster.local"
// as in Istio; "<name>.<namespace>" and "<name>.<namespace>.svc" of a lab Service are
// expanded too (Istio would take them literally, where Kubernetes DNS would expand them);
// anything else (an FQDN, a ServiceEntry host) is used as written.
func resolveHost(m *model.Model, h, ns string) string {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if !strings.Contains(h, ".") {
		return h + "." + ns + ".svc." + model.DefaultClusterDomain
	}
	for _, s := range m.Services {
		if h == s.Name+"."+s.Namespace || h == s.Name+"."+s.Namespace+".svc" {
			return s.Hostname()
		}
	}
	return h
}

// virtualServiceFor returns the VirtualService that routes host, or nil. When several
// name the host, one wins whole and the others are ignored for it, as in istiod: the
// oldest, then the first by name, then by namespace (configCompareByCreationTime). A
// lab's objects have no creation time, so name and namespace decide. istiod does not
// merge them; istioctl analyze reports IST0109, and so does meshlab analyze.
func virtualServiceFor(m *model.Model, host string) *model.IstioConfig[*networking.VirtualService] {
	var best *model.IstioConfig[*networking.VirtualService]
	for _, vs := range m.Istio.VirtualServices {
		if !model.AppliesToMesh(vs.Spec) {
			continue // bound to gateways only (see gateway.go)
		}
		if best != nil && cmp.Or(strings.Compare(vs.Name, best.Name), strings.Compare(vs.Namespace, best.Namespace)) >= 0 {
			continue
		}
		for _, h := range vs.Spec.GetHosts() {
			if resolveHost(m, h, vs.Namespace) == host {
				best = vs
				break
			}
		}
	}
	if best != nil {
		return best
	}
	// No VirtualService names host: the one with the most specific wildcard covering it
	// ("*.wikipedia.org" for en.wikipedia.org, or for the entry host "*.wikipedia.org"
	// itself), as istiod picks a service's VirtualService among wildcard hosts.
	bestLen := 0
	for _, vs := range m.Istio.VirtualServices {
		if !model.AppliesToMesh(vs.Spec) {
			continue
		}
		for _, h := range vs.Spec.GetHosts() {
			if !strings.HasPrefix(h, "*.") || !model.HostCovers(h, host) {
				continue
			}
			if len(h) > bestLen || len(h) == bestLen && cmp.Or(strings.Compare(vs.Name, best.Name), strings.Compare(vs.Namespace, best.Namespace)) < 0 {
				best, bestLen = vs, len(h)
			}
		}
	}
	return best
}

// destinationRuleFor returns the DestinationRule for host seen from a proxy in proxyNS,
// or nil. Istio's precedence: the rules in the proxy's namespace, then those in the
// service's namespace, then those of any other (the first in model order). Several
// rules for the host in the chosen namespace are merged as istiod merges them
// (PushContext.mergeDestinationRule): in order (oldest, then by name; a lab's objects
// have no creation time), subsets are appended unless one of that name is already
// there, the first top-level traffic policy wins, and the result keeps the first rule's
// name (the origin istioctl shows).
func destinationRuleFor(m *model.Model, host, proxyNS, serviceNS string) *model.IstioConfig[*networking.DestinationRule] {
	byNS := map[string][]*model.IstioConfig[*networking.DestinationRule]{}
	var other string
	for _, dr := range m.Istio.DestinationRules {
		if resolveHost(m, dr.Spec.GetHost(), dr.Namespace) != host {
			continue
		}
		if byNS[dr.Namespace] == nil && other == "" && dr.Namespace != proxyNS && dr.Namespace != serviceNS {
			other = dr.Namespace
		}
		byNS[dr.Namespace] = append(byNS[dr.Namespace], dr)
	}
	for _, ns := range []string{proxyNS, serviceNS, other} {
		if rules := byNS[ns]; len(rules) > 0 {
			return mergeDestinationRules(rules)
		}
	}
	return nil
}

// mergeDestinationRules merges rules of one host and namespace, in precedence order.
func mergeDestinationRules(rules []*model.IstioConfig[*networking.DestinationRule]) *model.IstioConfig[*networking.DestinationRule] {
	if len(rules) == 1 {
		return rules[0]
	}
	slices.SortStableFunc(rules, func(a, b *model.IstioConfig[*networking.DestinationRule]) int { return strings.Compare(a.Name, b.Name) })
	merged := *rules[0]
	merged.Spec = proto.Clone(rules[0].Spec).(*networking.DestinationRule)
	for _, r := range rules[1:] {
		for _, s := range r.Spec.GetSubsets() {
			if !slices.ContainsFunc(merged.Spec.Subsets, func(have *networking.Subset) bool { return have.GetName() == s.GetName() }) {
				merged.Spec.Subsets = append(merged.Spec.Subsets, s)
			}
		}
		if merged.Spec.TrafficPolicy == nil {
			merged.Spec.TrafficPolicy = r.Spec.GetTrafficPolicy()
		}
	}
	return &merged
}

// servicePortsByHost indexes the outbound ports of m by hostname, for resolving route
// destinations.
func servicePortsByHost(m *model.Model) map[string][]servicePort {
	out := map[string][]servicePort{}
	for _, sp := range outboundPorts(m) {
		out[sp.host] = append(out[sp.host], sp)
	}
	return out
}

// tcpRouteFor returns the first tcp route of vs that applies to service port port, as
// istiod picks it: one with no match, or with a match whose port is unset or port; nil
// when vs is nil or has none (or the route has no destination).
func tcpRouteFor(vs *model.IstioConfig[*networking.VirtualService], port uint16) *networking.TCPRoute {
	if vs == nil {
		return nil
	}
	for _, r := range vs.Spec.GetTcp() {
		applies := len(r.GetMatch()) == 0
		for _, m := range r.GetMatch() {
			if m.GetPort() == 0 || m.GetPort() == uint32(port) {
				applies = true
				break
			}
		}
		if applies {
			if len(r.GetRoute()) == 0 {
				return nil
			}
			return r
		}
	}
	return nil
}
