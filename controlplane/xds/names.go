package xds

import (
	"net/netip"
	"strconv"

	"github.com/meshlab/meshlab/controlplane/model"
)

// Listener and cluster names and ports fixed by Istio's sidecar shape.
const (
	// VirtualOutboundListener captures all outbound TCP (iptables redirects it to 15001).
	VirtualOutboundListener = "virtualOutbound"
	// VirtualInboundListener captures all inbound TCP (iptables redirects it to 15006).
	VirtualInboundListener = "virtualInbound"
	// VirtualOutboundPort is the port of VirtualOutboundListener.
	VirtualOutboundPort uint16 = 15001
	// VirtualInboundPort is the port of VirtualInboundListener.
	VirtualInboundPort uint16 = 15006

	// PassthroughCluster forwards outbound traffic to its original destination.
	PassthroughCluster = "PassthroughCluster"
	// InboundPassthroughCluster delivers inbound traffic for ports no service declares.
	InboundPassthroughCluster = "InboundPassthroughCluster"
	// BlackHoleCluster has no endpoints: traffic sent to it is dropped.
	BlackHoleCluster = "BlackHoleCluster"

	// AllowAnyVirtualHost is the last virtual host of every outbound route
	// configuration: unknown hosts go to PassthroughCluster (outboundTrafficPolicy ALLOW_ANY).
	AllowAnyVirtualHost = "allow_any"
	// BlockAllVirtualHost replaces AllowAnyVirtualHost under outboundTrafficPolicy
	// REGISTRY_ONLY: unknown hosts get a 502, as in Istio.
	BlockAllVirtualHost = "block_all"

	// FaultFilter is the HTTP filter injecting VirtualService faults; routes carry its
	// per-route config under this name.
	FaultFilter = "envoy.filters.http.fault"
)

// InboundPassthroughSource is the address inbound traffic is delivered from, so the
// capture rules can tell it from the app's own traffic (modern Istio uses 127.0.0.6).
var InboundPassthroughSource = netip.MustParseAddr("127.0.0.6")

// wildcardAddr is the address outbound HTTP and capture listeners listen on.
const wildcardAddr = "0.0.0.0"

// OutboundClusterName returns Istio's subset key for an outbound cluster:
// "outbound|<port>|<subset>|<host>", e.g. "outbound|9080|v1|reviews.default.svc.cluster.local"
// (subset "" gives "outbound|9080||reviews.default.svc.cluster.local").
func OutboundClusterName(port uint16, subset, host string) string {
	return "outbound|" + strconv.Itoa(int(port)) + "|" + subset + "|" + host
}

// InboundClusterName returns the cluster delivering inbound traffic to the app's port
// target, "inbound|<target>||".
func InboundClusterName(target uint16) string {
	return "inbound|" + strconv.Itoa(int(target)) + "||"
}

// OutboundHTTPListenerName returns the name of the outbound listener shared by every
// HTTP service port numbered port, "0.0.0.0_<port>".
func OutboundHTTPListenerName(port uint16) string {
	return wildcardAddr + "_" + strconv.Itoa(int(port))
}

// OutboundTCPListenerName returns the name of the outbound listener of one TCP service
// port, "<vip>_<port>".
func OutboundTCPListenerName(vip netip.Addr, port uint16) string {
	return vip.String() + "_" + strconv.Itoa(int(port))
}

// InboundChainName returns the name of the virtualInbound filter chain of the app's port
// target, "0.0.0.0_<target>".
func InboundChainName(target uint16) string {
	return wildcardAddr + "_" + strconv.Itoa(int(target))
}

// RouteName returns the name of the route configuration of outbound HTTP port port,
// which is the port number itself, e.g. "9080".
func RouteName(port uint16) string {
	return strconv.Itoa(int(port))
}

// VirtualHostName returns the name of the virtual host of one service port,
// "<host>:<port>".
func VirtualHostName(svc *model.Service, port uint16) string {
	return svc.Hostname() + ":" + strconv.Itoa(int(port))
}

// ServiceConfigPath returns the Kubernetes API path of a service, which Istio records in
// the "istio" filter metadata of the service's clusters:
// "/apis/v1/namespaces/<ns>/services/<name>".
func ServiceConfigPath(svc *model.Service) string {
	return "/apis/v1/namespaces/" + svc.Namespace + "/services/" + svc.Name
}

// IstioConfigPath returns the API path of an Istio networking object, which Istio records
// in the "istio" filter metadata of what it generates from it, in the version istiod
// stores them in (v1), e.g.
// "/apis/networking.istio.io/v1/namespaces/default/virtual-service/reviews". kind is
// Istio's hyphenated kind: "virtual-service", "destination-rule", "service-entry".
func IstioConfigPath(kind, ns, name string) string {
	return "/apis/networking.istio.io/v1/namespaces/" + ns + "/" + kind + "/" + name
}

// Domains returns the domains of the virtual host of svc as seen from a proxy in
// namespace proxyNS, as istiod writes them for a sidecar (generateVirtualHostDomains with
// ignore_port_in_host_matching, so no ":<port>" variants): the FQDN, the FQDN with its
// trailing dot, then for a service of proxyNS "<name>", "<name>.<ns>.svc" and
// "<name>.<ns>", for one of another namespace "<name>.<ns>" and "<name>.<ns>.svc", and
// the service VIP when it has one.
func Domains(svc *model.Service, proxyNS string) []string {
	fqdn := svc.Hostname()
	out := []string{fqdn, fqdn + "."}
	short := svc.Name + "." + svc.Namespace
	if svc.Namespace == proxyNS {
		out = append(out, svc.Name, short+".svc", short)
	} else {
		out = append(out, short, short+".svc")
	}
	if svc.VIP.IsValid() {
		out = append(out, svc.VIP.String())
	}
	return out
}
