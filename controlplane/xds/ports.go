package xds

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// servicePort is one port of one service, the unit outbound config is generated for. The
// service is a Kubernetes-style Service or, for a ServiceEntry host, a stand-in Service
// whose Name is the host (se is then set).
type servicePort struct {
	svc  *model.Service
	port model.ServicePort
	host string // the service's hostname, e.g. "reviews.default.svc.cluster.local"
	se   *model.IstioConfig[*networking.ServiceEntry]
	// seEndpoints are the ServiceEntry's endpoints (se only).
	seEndpoints []*networking.WorkloadEntry
}

// clusterName returns the port's outbound cluster (no subset).
func (sp servicePort) clusterName() string {
	return OutboundClusterName(sp.port.Port, "", sp.host)
}

// vhostName returns the name of the port's virtual host, "<host>:<port>".
func (sp servicePort) vhostName() string {
	return sp.host + ":" + strconv.Itoa(int(sp.port.Port))
}

// domains returns the port's virtual host domains as seen from a proxy in proxyNS, as
// istiod writes them (see Domains). A ServiceEntry host shaped like a Service's FQDN
// ("<name>.<ns>.svc.cluster.local") gets the same short forms; any other host only
// itself, with its trailing dot unless it is an IP, and its address.
func (sp servicePort) domains(proxyNS string) []string {
	if sp.se == nil {
		return Domains(sp.svc, proxyNS)
	}
	if short, ok := strings.CutSuffix(sp.host, ".svc."+model.DefaultClusterDomain); ok {
		if name, ns, ok := strings.Cut(short, "."); ok && !strings.Contains(ns, ".") {
			return Domains(&model.Service{Name: name, Namespace: ns, VIP: sp.svc.VIP}, proxyNS)
		}
	}
	out := []string{sp.host}
	if _, err := netip.ParseAddr(sp.host); err != nil {
		out = append(out, sp.host+".")
	}
	if sp.svc.VIP.IsValid() {
		out = append(out, sp.svc.VIP.String())
	}
	return out
}

// configPath returns the API path Istio records as the origin of the port's resources.
func (sp servicePort) configPath() string {
	if sp.se != nil {
		return IstioConfigPath("service-entry", sp.se.Namespace, sp.se.Name)
	}
	return ServiceConfigPath(sp.svc)
}

// dnsResolved reports whether the port's endpoints are hostnames the proxy resolves
// itself (a ServiceEntry with resolution DNS): its cluster is STRICT_DNS, not EDS.
func (sp servicePort) dnsResolved() bool {
	return sp.se != nil && sp.se.Spec.GetResolution() == networking.ServiceEntry_DNS
}

// outboundPorts returns every port of every service of m, in model order, then every port
// of every ServiceEntry host: Istio's default sidecar scope makes every service visible
// to every proxy.
func outboundPorts(m *model.Model) []servicePort {
	var out []servicePort
	for _, s := range m.Services {
		for _, p := range s.Ports {
			out = append(out, servicePort{svc: s, port: p, host: s.Hostname()})
		}
	}
	return append(out, serviceEntryPorts(m)...)
}

// httpPorts returns the distinct port numbers of HTTP service ports, ascending. A
// sniffed port of a service without a VIP (headless) counts as HTTP: istiod gives it a
// sniffing listener per endpoint address, meshlab the port's HTTP listener, whose
// passthrough chain still carries its non-HTTP traffic (docs/ARCHITECTURE.md).
func httpPorts(m *model.Model) []uint16 {
	seen := map[uint16]bool{}
	var out []uint16
	for _, sp := range outboundPorts(m) {
		if sp.httpListener() && !seen[sp.port.Port] {
			seen[sp.port.Port] = true
			out = append(out, sp.port.Port)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// httpListener reports whether the port's HTTP is served by the port's shared HTTP
// listener "0.0.0.0_<port>" (route "<port>").
func (sp servicePort) httpListener() bool {
	return sp.port.Protocol.IsHTTP() || sp.port.Protocol.IsAuto() && !sp.svc.VIP.IsValid()
}

// sniffed reports whether the port gets a sniffing listener of its own on its VIP (see
// outboundAutoListener).
func (sp servicePort) sniffed() bool { return sp.port.Protocol.IsAuto() && sp.svc.VIP.IsValid() }

// inboundPort is one port the pod's app serves for the services that select it.
type inboundPort struct {
	target   uint16
	protocol model.Protocol
	// host and port are the first service (in model order) delivering to target and
	// its port number, which Istio names the inbound virtual host and route after.
	host string
	port uint16
	// endpoint and tls are a Sidecar ingress listener's defaultEndpoint (nil: the
	// original destination) and its tls when ENABLE_TLS_ON_SIDECAR_INGRESS is on (nil:
	// none), see sidecar.go.
	endpoint *model.SidecarEndpoint
	tls      *networking.ServerTLSSettings
	sidecar  *model.IstioConfig[*networking.Sidecar] // the Sidecar of an ingress listener's port
}

// inboundPorts returns the distinct target ports of the services selecting pod,
// ascending. When two services use one target port with different protocols, the first
// service in model order decides, so the result stays deterministic.
func inboundPorts(m *model.Model, pod *model.Pod) []inboundPort {
	if ports := sidecarInboundPorts(m, pod); ports != nil {
		return ports // a Sidecar's ingress listeners replace the services' ports
	}
	seen := map[uint16]bool{}
	var out []inboundPort
	for _, s := range m.ServicesFor(pod) {
		for _, p := range s.Ports {
			if !seen[p.TargetPort] {
				seen[p.TargetPort] = true
				out = append(out, inboundPort{target: p.TargetPort, protocol: p.Protocol, host: s.Hostname(), port: p.Port})
			}
		}
	}
	sortInboundPorts(out)
	return out
}

func sortInboundPorts(out []inboundPort) {
	sort.Slice(out, func(i, j int) bool { return out[i].target < out[j].target })
}

// firstAddr returns the first address of addrs that parses, or the zero Addr.
func firstAddr(addrs []string) netip.Addr {
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a); err == nil {
			return ip
		}
	}
	return netip.Addr{}
}
