package xds

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshlab/meshlab/controlplane/model"
)

// serviceEntryPorts returns a servicePort per port of every host of every ServiceEntry,
// in model order. A host's address is the entry's first address (none when the entry
// has none), and a port's target is its targetPort, else its number.
func serviceEntryPorts(m *model.Model) []servicePort {
	var out []servicePort
	for _, se := range m.Istio.ServiceEntries {
		vip := firstAddr(se.Spec.GetAddresses())
		for _, h := range se.Spec.GetHosts() {
			svc := &model.Service{Name: h, Namespace: se.Namespace, VIP: vip, Origin: se.Origin}
			for _, p := range se.Spec.GetPorts() {
				target := uint16(p.GetTargetPort())
				if target == 0 {
					target = uint16(p.GetNumber())
				}
				svc.Ports = append(svc.Ports, model.ServicePort{
					Name: p.GetName(), Port: uint16(p.GetNumber()), TargetPort: target, Protocol: entryProtocol(p.GetProtocol()),
				})
			}
			for _, p := range svc.Ports {
				out = append(out, servicePort{svc: svc, port: p, host: h, se: se, seEndpoints: se.Spec.GetEndpoints()})
			}
		}
	}
	return out
}

// entryProtocol maps a ServiceEntry port protocol to meshlab's protocols as the config
// loader maps Service ports; an empty protocol is HTTP, as an unnamed Service port is.
func entryProtocol(s string) model.Protocol {
	switch strings.ToLower(s) {
	case "http2", "h2c":
		return model.ProtocolHTTP2
	case "grpc", "grpc-web":
		return model.ProtocolGRPC
	case "tls":
		return model.ProtocolTLS
	case "https":
		return model.ProtocolHTTPS
	case "tcp", "mongo", "mysql", "redis", "thrift":
		return model.ProtocolTCP
	}
	return model.ProtocolHTTP
}

// instance is one endpoint of a service port: an IP (or, for DNS resolution, a hostname)
// with the port to reach and the labels subsets select on.
type instance struct {
	addr   string
	port   uint16
	labels map[string]string
	pod    *model.Pod // the pod behind a Service's endpoint; nil for ServiceEntry endpoints
}

// instances returns the endpoints behind sp. For a Service they are the pods its
// selector matches; for a ServiceEntry its endpoints, where a STATIC endpoint's address
// is an IP or the name of a lab pod (looked up in the entry's namespace first) and a DNS
// endpoint's address is a name the proxy resolves. A DNS entry without endpoints resolves
// its own host, as Istio does.
func (sp servicePort) instances(m *model.Model) []instance {
	if sp.se == nil {
		var out []instance
		for _, ep := range m.Endpoints(sp.svc, sp.port) {
			out = append(out, instance{addr: ep.Addr.Addr().String(), port: ep.Addr.Port(), labels: ep.Pod.Labels, pod: ep.Pod})
		}
		return out
	}
	if sp.dnsResolved() && len(sp.seEndpoints) == 0 {
		return []instance{{addr: sp.host, port: sp.port.TargetPort}}
	}
	var out []instance
	for _, we := range sp.seEndpoints {
		port := sp.port.TargetPort
		if p, ok := we.GetPorts()[sp.port.Name]; ok && p != 0 {
			port = uint16(p)
		}
		in := instance{addr: we.GetAddress(), port: port, labels: we.GetLabels()}
		if !sp.dnsResolved() {
			if _, err := netip.ParseAddr(in.addr); err != nil {
				pod := podNamed(m, we.GetAddress(), sp.se.Namespace)
				if pod == nil {
					continue // the loader refuses unknown names; a stale model just has no endpoint
				}
				in.addr = pod.IP.String()
				if len(in.labels) == 0 {
					in.labels = pod.Labels
				}
			}
		}
		out = append(out, in)
	}
	return out
}

// podNamed returns the pod called name, preferring namespace ns, or nil.
func podNamed(m *model.Model, name, ns string) *model.Pod {
	var found *model.Pod
	for _, p := range m.Pods {
		if p.Name != name {
			continue
		}
		if p.Namespace == ns {
			return p
		}
		if found == nil {
			found = p
		}
	}
	return found
}

// labelsMatch reports whether every label of selector is in labels.
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// passthroughResolved reports whether sp belongs to a ServiceEntry with resolution NONE:
// its cluster sends each connection to the address the client dialled (ORIGINAL_DST).
func (sp servicePort) passthroughResolved() bool {
	return sp.se != nil && sp.se.Spec.GetResolution() == networking.ServiceEntry_NONE
}

// entryWildcardListeners returns the outbound listeners "0.0.0.0_<port>" of the
// ServiceEntry ports that are not HTTP and have no address (e.g. the egress tasks'
// `www.google.com:443 HTTPS, resolution DNS`), as istiod builds them for a service
// without a VIP: no address to match, so the port number alone selects the listener.
// TLS and HTTPS ports get sidecarTLSChains' (tlsroute.go): a chain per host matched on
// the SNI the client sends, to the host's cluster or where its VirtualService's tls
// routes say; a TCP port gets one chain without a match, to the first such host's
// cluster (istiod's conflict rule: the first wins, as for any two chains with the same
// match). Connections matching no chain take the default PassthroughFilterChain. A port
// that is also an HTTP service port is left to the HTTP listener of that port.
func entryWildcardListeners(m *model.Model) ([]*listener.Listener, error) {
	httpPort := map[uint16]bool{}
	for _, p := range httpPorts(m) {
		httpPort[p] = true
	}
	byPort := map[uint16][]servicePort{}
	var order []uint16
	for _, sp := range serviceEntryPorts(m) {
		if sp.port.Protocol.IsHTTP() || sp.svc.VIP.IsValid() || httpPort[sp.port.Port] {
			continue
		}
		if byPort[sp.port.Port] == nil {
			order = append(order, sp.port.Port)
		}
		byPort[sp.port.Port] = append(byPort[sp.port.Port], sp)
	}
	slices.Sort(order)
	byHost := servicePortsByHost(m)
	var out []*listener.Listener
	for _, port := range order {
		l, err := entryWildcardListener(m, port, byPort[port], byHost)
		if err != nil {
			return nil, fmt.Errorf("build listener %s: %w", OutboundHTTPListenerName(port), err)
		}
		out = append(out, l)
	}
	return out, nil
}

func entryWildcardListener(m *model.Model, port uint16, sps []servicePort, byHost map[string][]servicePort) (*listener.Listener, error) {
	var chains []networkChain
	for _, sp := range sps {
		var incoming []networkChain
		if sp.port.Protocol.IsTLS() {
			cs, err := sidecarTLSChains(m, sp, true, byHost)
			if err != nil {
				return nil, err
			}
			incoming = cs
		} else {
			f, err := outboundTCPFilter(m, sp, byHost)
			if err != nil {
				return nil, err
			}
			incoming = []networkChain{{filter: f, metadata: tcpOrigin(m, sp)}}
		}
		chains = mergeNetworkChains(chains, incoming)
	}
	l, err := outboundNetworkListener(OutboundHTTPListenerName(port), wildcardAddr, port, chains, m.Mesh.OutboundTrafficPolicy)
	if err != nil {
		return nil, err
	}
	l.Metadata = meshOrigin(m)
	return l, nil
}
