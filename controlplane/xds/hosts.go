package xds

import (
	"cmp"
	"strings"

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
	return best
}

// destinationRuleFor returns the DestinationRule for host seen from a proxy in proxyNS,
// or nil. Istio's precedence: a rule in the proxy's namespace, then one in the service's
// namespace, then any other (first in model order).
func destinationRuleFor(m *model.Model, host, proxyNS, serviceNS string) *model.IstioConfig[*networking.DestinationRule] {
	var inService, other *model.IstioConfig[*networking.DestinationRule]
	for _, dr := range m.Istio.DestinationRules {
		if resolveHost(m, dr.Spec.GetHost(), dr.Namespace) != host {
			continue
		}
		switch {
		case dr.Namespace == proxyNS:
			return dr
		case dr.Namespace == serviceNS && inService == nil:
			inService = dr
		case other == nil:
			other = dr
		}
	}
	if inService != nil {
		return inService
	}
	return other
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
