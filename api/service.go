package api

import "net/netip"

// ServiceView is `meshlab describe service`: a Service with what serves it and what
// applies to it, computed by the lab from its live model.
type ServiceView struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Hostname  string            `json:"hostname"`
	VIP       string            `json:"vip,omitempty"`
	Selector  map[string]string `json:"selector,omitempty"`
	Ports     []ServicePortView `json:"ports"`
	Pods      []ServicePodView  `json:"pods"`
	// Endpoints are the service's endpoints as a client proxy sees them (its /clusters),
	// with that proxy's health flags; EndpointsFrom names the proxy.
	Endpoints       []EndpointView `json:"endpoints,omitempty"`
	EndpointsFrom   string         `json:"endpointsFrom,omitempty"`
	VirtualServices []string       `json:"virtualServices,omitempty"`
	// DestinationRules map a rule's namespace/name to the subsets it defines.
	DestinationRules      map[string][]string `json:"destinationRules,omitempty"`
	PeerAuthentications   []string            `json:"peerAuthentications,omitempty"`
	AuthorizationPolicies []string            `json:"authorizationPolicies,omitempty"`
}

// ServicePortView is one port of the service with its protocol and mTLS mode.
type ServicePortView struct {
	Name       string `json:"name,omitempty"`
	Port       uint16 `json:"port"`
	TargetPort uint16 `json:"targetPort"`
	// Protocol is the protocol the proxies treat the port as (from appProtocol or the
	// port name's prefix): HTTP, HTTP2, GRPC, TCP, TLS or HTTPS.
	Protocol string `json:"protocol"`
	// MTLS is the PeerAuthentication mode the selected pods' proxies enforce on the
	// target port: STRICT, PERMISSIVE or DISABLE; pods that differ are listed by mode
	// ("STRICT (a); DISABLE (b)"); with no pod selected, the namespace's mode.
	MTLS string `json:"mtls"`
}

// ServicePodView is one pod the service selects.
type ServicePodView struct {
	Name  string     `json:"name"`
	IP    netip.Addr `json:"ip"`
	Ready bool       `json:"ready"`
}

// EndpointView is one endpoint of an outbound cluster of the service.
type EndpointView struct {
	Cluster string `json:"cluster"`
	Address string `json:"address"`
	Health  string `json:"health"`
}

// ErrUnknownService is returned for a Service the lab does not have; the error's text
// lists the services there are.
var ErrUnknownService = sentinel("unknown service", ErrNotFound)
