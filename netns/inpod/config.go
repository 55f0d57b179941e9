// Package inpod renders and applies the rules istio-cni installs inside an ambient pod's
// network namespace: iptables chains ISTIO_PRERT and ISTIO_OUTPUT in the mangle, nat and
// raw tables (inbound TCP to the node proxy's plaintext port, outbound TCP to its
// outbound port, DNS to its DNS port, the proxy's own marked packets left alone, a
// connection mark set and restored so replies to spoofed-source dials come back to the
// proxy) and the policy routing that sends connection-marked packets to lo.
//
// The package knows nothing of meshes: it is given the marks and ports. Compute, then
// apply: Config.Rules and the Render functions are pure and golden-tested (the rules are
// istio-cni's REDIRECT-mode rules, rule for rule, each with a comment saying why); an
// Applier installs the text with iptables-restore --noflush, so rules already in the
// namespace (a pod's cluster-DNS rule) stay, after istio-cni's jumps (Render inserts
// those at the head of their built-in chains), and removes exactly what it installed.
package inpod

import (
	"errors"
	"fmt"
	"net/netip"
)

// Config says which marks and ports the node proxy uses. DefaultConfig has Istio's values.
type Config struct {
	Mark, MarkMask         uint32 // required: the node proxy marks every socket it opens in the pod (0x539/0xfff)
	ConnMark, ConnMarkMask uint32 // required: the connection mark of the proxy's connections (0x111/0xfff)
	RestoreMask            uint32 // required: the masks of the connmark restore (0xffffffff)

	InboundPlaintextPort uint16 // required: inbound TCP is redirected here (15006)
	InboundTunnelPort    uint16 // required: inbound tunnel port, never redirected (15008)
	OutboundPort         uint16 // required: outbound TCP is redirected here (15001)
	DNSPort              uint16 // optional: DNS is redirected here (15053); 0 disables DNS capture

	HostProbeSource   netip.Addr // optional: kubelet probes arrive from this IPv4 address and bypass the proxy
	HostProbeSourceV6 netip.Addr // optional: the same for IPv6; required when IPv6 is on and HostProbeSource is set

	RouteTable   int // required: the table holding the local route on lo (100)
	RulePriority int // required: the priority of the fwmark rule (32764)

	IPv6 bool // optional: also render and install ip6tables rules and the IPv6 route
}

// DefaultConfig returns istio-cni's values (cni/pkg/config): ztunnel's mark 1337, the
// connection mark 0x111, ztunnel's ports, the host probe address 169.254.7.127, table 100.
func DefaultConfig() Config {
	return Config{
		Mark: 0x539, MarkMask: 0xfff,
		ConnMark: 0x111, ConnMarkMask: 0xfff,
		RestoreMask:          0xffffffff,
		InboundPlaintextPort: 15006,
		InboundTunnelPort:    15008,
		OutboundPort:         15001,
		DNSPort:              15053,
		HostProbeSource:      netip.MustParseAddr("169.254.7.127"),
		HostProbeSourceV6:    netip.MustParseAddr("fd16:9254:7127:1337:ffff:ffff:ffff:ffff"),
		RouteTable:           100,
		RulePriority:         32764,
	}
}

// Validate reports every setting that would render broken rules.
func (c Config) Validate() error {
	var errs []error
	if c.Mark == 0 || c.MarkMask == 0 || c.Mark&^c.MarkMask != 0 {
		errs = append(errs, fmt.Errorf("mark %#x/%#x: want a non-zero mark inside its mask", c.Mark, c.MarkMask))
	}
	if c.ConnMark == 0 || c.ConnMarkMask == 0 || c.ConnMark&^c.ConnMarkMask != 0 {
		errs = append(errs, fmt.Errorf("connection mark %#x/%#x: want a non-zero mark inside its mask", c.ConnMark, c.ConnMarkMask))
	}
	if c.Mark&c.MarkMask == c.ConnMark&c.MarkMask {
		errs = append(errs, fmt.Errorf("mark and connection mark: both %#x", c.Mark))
	}
	if c.RestoreMask == 0 {
		errs = append(errs, errors.New("restore mask: required"))
	}
	ports := map[uint16]string{}
	for _, p := range []struct {
		name     string
		port     uint16
		optional bool
	}{
		{"inbound plaintext port", c.InboundPlaintextPort, false},
		{"inbound tunnel port", c.InboundTunnelPort, false},
		{"outbound port", c.OutboundPort, false},
		{"dns port", c.DNSPort, true},
	} {
		switch {
		case p.port == 0 && !p.optional:
			errs = append(errs, fmt.Errorf("%s: required", p.name))
		case p.port == 0:
		case ports[p.port] != "":
			errs = append(errs, fmt.Errorf("%s %d: already the %s", p.name, p.port, ports[p.port]))
		default:
			ports[p.port] = p.name
		}
	}
	if c.HostProbeSource.IsValid() && !c.HostProbeSource.Is4() {
		errs = append(errs, fmt.Errorf("host probe source %v: want an IPv4 address", c.HostProbeSource))
	}
	if c.IPv6 && c.HostProbeSource.IsValid() && (!c.HostProbeSourceV6.IsValid() || !c.HostProbeSourceV6.Is6() || c.HostProbeSourceV6.Is4In6()) {
		errs = append(errs, fmt.Errorf("host probe source v6 %v: want an IPv6 address when IPv6 and a host probe source are set", c.HostProbeSourceV6))
	}
	if c.RouteTable <= 0 || c.RouteTable == 253 || c.RouteTable == 254 || c.RouteTable == 255 {
		errs = append(errs, fmt.Errorf("route table %d: want a table of its own (not main, local or default)", c.RouteTable))
	}
	if c.RulePriority <= 0 || c.RulePriority >= 32766 {
		errs = append(errs, fmt.Errorf("rule priority %d: want 1..32765, before the main table's rule", c.RulePriority))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate in-pod config: %w", err)
	}
	return nil
}
