package kubeproxy

import (
	"errors"
	"fmt"
	"net/netip"
)

// Protocol is a service port's transport protocol, spelt as kube-proxy hashes it.
type Protocol string

// Protocols kube-proxy's iptables mode handles.
const (
	TCP  Protocol = "tcp"
	UDP  Protocol = "udp"
	SCTP Protocol = "sctp"
)

// ServicePort is one port of one service: its VIP, the endpoints behind it and the names
// kube-proxy uses for chain hashes and comments.
type ServicePort struct {
	Namespace string           // required: the service's namespace
	Name      string           // required: the service's name
	PortName  string           // optional: the port's name ("" for an unnamed port)
	VIP       netip.Addr       // required: the cluster IP
	Port      uint16           // required: the port clients dial on the VIP
	Protocol  Protocol         // optional, default TCP
	Endpoints []netip.AddrPort // optional: none means connections are rejected
}

// String returns the port's name as kube-proxy's ServicePortName prints it:
// "ns/name:port", or "ns/name" for an unnamed port.
func (s ServicePort) String() string {
	n := s.Namespace + "/" + s.Name
	if s.PortName != "" {
		n += ":" + s.PortName
	}
	return n
}

// protocol returns the protocol with its default applied.
func (s ServicePort) protocol() Protocol {
	if s.Protocol == "" {
		return TCP
	}
	return s.Protocol
}

// Config is every service port of the cluster.
type Config struct {
	Services []ServicePort // rendered in this order, as given
}

// Validate reports every service port that would render broken rules.
func (c Config) Validate() error {
	var errs []error
	seen := make(map[string]string)
	for i, s := range c.Services {
		where := fmt.Sprintf("service %d (%s)", i, s)
		if s.Namespace == "" || s.Name == "" {
			errs = append(errs, fmt.Errorf("%s: namespace and name: required", where))
		}
		if !s.VIP.Is4() {
			errs = append(errs, fmt.Errorf("%s: vip %v: want an IPv4 address", where, s.VIP))
		}
		if s.Port == 0 {
			errs = append(errs, fmt.Errorf("%s: port: required", where))
		}
		switch s.protocol() {
		case TCP, UDP, SCTP:
		default:
			errs = append(errs, fmt.Errorf("%s: protocol %q: want tcp, udp or sctp", where, s.Protocol))
		}
		for _, ep := range s.Endpoints {
			if !ep.Addr().Is4() || ep.Port() == 0 {
				errs = append(errs, fmt.Errorf("%s: endpoint %v: want an IPv4 address and a port", where, ep))
			}
		}
		key := fmt.Sprintf("%s:%d/%s", s.VIP, s.Port, s.protocol())
		if prev, dup := seen[key]; dup {
			errs = append(errs, fmt.Errorf("%s: %s is also %s", where, key, prev))
		}
		seen[key] = s.String()
		chain := ServiceChain(s)
		if prev, dup := seen[chain]; dup {
			errs = append(errs, fmt.Errorf("%s: same service port name and protocol as %s", where, prev))
		}
		seen[chain] = s.String()
	}
	return errors.Join(errs...)
}
