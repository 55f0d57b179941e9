package config

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshlab/meshlab/controlplane/model"
)

// ListenerStatus returns the status.listeners istiod's gateway controller writes on
// Gateway API Gateway g among objs (its ReportListenerCondition and
// GenerateGatewaySupportedKinds): per listener its name, the route kinds it supports (of
// its protocol's, those its allowedRoutes.kinds names; ResolvedRefs False,
// InvalidRouteKinds, when it names one the protocol does not serve), the routes attached
// to it (those whose parentRefs select it, by sectionName and port, that it admits by
// namespace and kind), and Accepted, Conflicted (False, NoConflicts), Programmed and
// ResolvedRefs with Istio's "No errors found", in that (sorted) order.
func ListenerStatus(objs []*Object, g *Object) []gwv1.ListenerStatus {
	if g.KubeGateway == nil {
		return nil
	}
	nsLabels := map[string]map[string]string{}
	for _, x := range objs {
		if x.KubeNamespace != nil {
			nsLabels[x.Origin.Name] = x.KubeNamespace.Labels
		}
	}
	out := make([]gwv1.ListenerStatus, 0, len(g.KubeGateway.Spec.Listeners))
	for _, l := range g.KubeGateway.Spec.Listeners {
		supported, valid := supportedKinds(l)
		resolved := listenerCondition(gwv1.ListenerConditionResolvedRefs, metav1.ConditionTrue, string(gwv1.ListenerReasonResolvedRefs), "No errors found")
		if !valid {
			resolved = listenerCondition(gwv1.ListenerConditionResolvedRefs, metav1.ConditionFalse, string(gwv1.ListenerReasonInvalidRouteKinds), "Invalid route kinds")
		}
		out = append(out, gwv1.ListenerStatus{
			Name:           l.Name,
			SupportedKinds: supported,
			AttachedRoutes: attachedRoutes(objs, g, l, nsLabels),
			Conditions: []metav1.Condition{
				listenerCondition(gwv1.ListenerConditionAccepted, metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted), "No errors found"),
				listenerCondition(gwv1.ListenerConditionConflicted, metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts), "No errors found"),
				listenerCondition(gwv1.ListenerConditionProgrammed, metav1.ConditionTrue, string(gwv1.ListenerReasonProgrammed), "No errors found"),
				resolved,
			},
		})
	}
	return out
}

func listenerCondition(typ gwv1.ListenerConditionType, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: string(typ), Status: status, Reason: reason, Message: msg, ObservedGeneration: 1}
}

// supportedKinds are the route kinds listener l supports, as istiod's
// GenerateGatewaySupportedKinds: its protocol's (TLS Terminate serves TCPRoute too),
// narrowed to its allowedRoutes.kinds; false when those name a kind the protocol does
// not serve.
func supportedKinds(l gwv1.Listener) ([]gwv1.RouteGroupKind, bool) {
	group := gwv1.Group(gatewayAPIGroup)
	kind := func(k string) gwv1.RouteGroupKind { return gwv1.RouteGroupKind{Group: &group, Kind: gwv1.Kind(k)} }
	var supported []gwv1.RouteGroupKind
	switch l.Protocol {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType:
		supported = []gwv1.RouteGroupKind{kind("HTTPRoute"), kind("GRPCRoute")}
	case gwv1.TCPProtocolType:
		supported = []gwv1.RouteGroupKind{kind("TCPRoute")}
	case gwv1.TLSProtocolType:
		supported = []gwv1.RouteGroupKind{kind("TLSRoute")}
		if l.TLS != nil && l.TLS.Mode != nil && *l.TLS.Mode == gwv1.TLSModeTerminate {
			supported = append(supported, kind("TCPRoute"))
		}
	}
	if supported == nil {
		supported = []gwv1.RouteGroupKind{}
	}
	if l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) == 0 {
		return supported, true
	}
	both := []gwv1.RouteGroupKind{}
	for _, s := range supported {
		for _, k := range l.AllowedRoutes.Kinds {
			if k.Kind == s.Kind && (k.Group == nil || *k.Group == *s.Group) {
				both = append(both, s)
				break
			}
		}
	}
	return both, len(both) == len(l.AllowedRoutes.Kinds)
}

// attachedRoutes counts the routes among objs attached to listener l of Gateway g.
func attachedRoutes(objs []*Object, g *Object, l gwv1.Listener, nsLabels map[string]map[string]string) int32 {
	var n int32
	for _, o := range objs {
		parents, _ := routeRefs(o)
		for _, pr := range parents {
			if isServiceParent(pr) || isServiceEntryParent(pr) || string(pr.Name) != g.Origin.Name || parentNamespace(pr, o) != g.Origin.Namespace {
				continue
			}
			if (pr.SectionName != nil && *pr.SectionName != l.Name) || (pr.Port != nil && *pr.Port != l.Port) {
				continue
			}
			if admitsRoutesFrom(l, g.Origin.Namespace, o.Origin.Namespace, nsLabels) && admitsKind(l, routeKind(o)) {
				n++
				break
			}
		}
	}
	return n
}

// ServiceEntryAddress is one address of a ServiceEntry's status, as Istio's
// networking.istio.io ServiceEntryStatus holds it.
type ServiceEntryAddress struct {
	Value string `json:"value"`
	Host  string `json:"host"`
}

// autoAllocateIPv6Prefix is istiod's PILOT_IP_AUTOALLOCATE_IPV6_PREFIX default.
var autoAllocateIPv6Prefix = netip.MustParsePrefix("2001:2::/48")

// ServiceEntryAddresses returns the status.addresses istiod's IP autoallocator writes
// on ServiceEntry o of model m (its statusPatchForAddresses): for each host it gives an
// address, in spec order, the IPv4 one of 240.240.0.0/16 the lab allocated, then the
// IPv6 one of 2001:2::/48 that istiod allocates beside it in step (the same offset in
// its prefix; the lab's pods are IPv4 only, so nothing reaches it). Nil when the
// autoallocator gives the entry none.
func ServiceEntryAddresses(m *model.Model, o *Object) []ServiceEntryAddress {
	if o.ServiceEntry == nil || m == nil {
		return nil
	}
	var out []ServiceEntryAddress
	seen := map[string]bool{}
	for _, h := range o.ServiceEntry.GetHosts() {
		if seen[h] {
			continue
		}
		seen[h] = true
		a, ok := m.Istio.AutoAddresses[model.EntryHost{Namespace: o.Origin.Namespace, Name: o.Origin.Name, Host: h}]
		if !ok || !a.Is4() {
			continue
		}
		out = append(out, ServiceEntryAddress{Value: a.String(), Host: h})
		if v6, ok := sameOffset(a, model.AutoAllocatePrefix, autoAllocateIPv6Prefix); ok {
			out = append(out, ServiceEntryAddress{Value: v6.String(), Host: h})
		}
	}
	return out
}

// sameOffset returns the address of prefix to at a's offset in prefix from.
func sameOffset(a netip.Addr, from, to netip.Prefix) (netip.Addr, bool) {
	f, t := from.Masked().Addr().As4(), to.Masked().Addr().As16()
	v := a.As4()
	off := uint32(v[0]^f[0])<<24 | uint32(v[1]^f[1])<<16 | uint32(v[2]^f[2])<<8 | uint32(v[3]^f[3])
	for i := 15; i >= 12; i-- {
		t[i] |= byte(off)
		off >>= 8
	}
	out := netip.AddrFrom16(t)
	return out, to.Contains(out)
}
