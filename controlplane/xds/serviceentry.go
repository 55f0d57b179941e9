package xds

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspector "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
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
	case "tcp", "tls", "https", "mongo", "mysql", "redis", "thrift":
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

// tlsPort reports whether sp is a ServiceEntry port of protocol TLS or HTTPS: opaque
// bytes to the sidecar, told apart by the SNI of the client's handshake.
func (sp servicePort) tlsPort() bool {
	if sp.se == nil {
		return false
	}
	for _, p := range sp.se.Spec.GetPorts() {
		if p.GetNumber() == uint32(sp.port.Port) {
			switch strings.ToUpper(p.GetProtocol()) {
			case "TLS", "HTTPS":
				return true
			}
		}
	}
	return false
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
// TLS and HTTPS ports get one chain per host matched on the SNI the client sends
// (tls_inspector reads it), to the host's cluster; a TCP port gets one chain without a
// match, to the first such host's cluster (istiod's conflict rule: the first wins).
// Connections matching no chain take the default PassthroughFilterChain, to
// PassthroughCluster, or BlackHoleCluster under REGISTRY_ONLY. A port that is also an
// HTTP service port is left to the HTTP listener of that port.
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
	var chains []*listener.FilterChain
	sniSeen := map[string]bool{}
	tcpChain := false
	for _, sp := range sps {
		f, err := outboundTCPFilter(m, sp, byHost)
		if err != nil {
			return nil, err
		}
		fc := &listener.FilterChain{
			Filters:                       []*listener.Filter{f},
			TransportSocketConnectTimeout: transportSocketConnectTimeout,
			Metadata:                      tcpOrigin(m, sp),
		}
		switch {
		case sp.tlsPort():
			if sniSeen[sp.host] {
				continue
			}
			sniSeen[sp.host] = true
			fc.FilterChainMatch = &listener.FilterChainMatch{ServerNames: []string{sp.host}}
		case tcpChain:
			continue // one match-less chain per port: the first entry's
		default:
			tcpChain = true
		}
		chains = append(chains, fc)
	}
	catchAll := PassthroughCluster
	if m.Mesh.OutboundTrafficPolicy == model.RegistryOnly {
		catchAll = BlackHoleCluster
	}
	passthrough, err := tcpProxyFilter(catchAll, catchAll)
	if err != nil {
		return nil, err
	}
	l := &listener.Listener{
		Name:             OutboundHTTPListenerName(port),
		Address:          socketAddress(wildcardAddr, port),
		BindToPort:       wrapperspb.Bool(false),
		TrafficDirection: core.TrafficDirection_OUTBOUND,
		FilterChains:     chains,
		DefaultFilterChain: &listener.FilterChain{
			Name:             PassthroughFilterChain,
			FilterChainMatch: &listener.FilterChainMatch{},
			Filters:          []*listener.Filter{passthrough},
		},
		Metadata: meshOrigin(m),
	}
	if len(sniSeen) > 0 {
		ti, err := typed(&tlsinspector.TlsInspector{})
		if err != nil {
			return nil, err
		}
		l.ListenerFilters = []*listener.ListenerFilter{{Name: wellknown.TlsInspector, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: ti}}}
		// Istio's default protocolDetectionTimeout: 0s, no timeout.
		l.ListenerFiltersTimeout = durationpb.New(0)
		l.ContinueOnListenerFiltersTimeout = true
	}
	return l, nil
}
