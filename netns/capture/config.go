// Package capture renders and applies the iptables rules that send a pod's traffic to its
// sidecar, as istio-init does: inbound TCP to 15006, outbound TCP to 15001, DNS to the
// agent on 15053, with the proxy's own traffic (uid/gid 1337) and ports excluded.
//
// Compute, then apply: Config.Rules and Config.Render are pure and golden-tested; the same
// text is shown on the dashboard and handed to an Applier, which runs iptables-restore in
// the pod's namespace (or, for --dry-run and tests, a Recorder keeps it).
package capture

import (
	"errors"
	"fmt"
	"net/netip"
)

// Config says which ports the sidecar listens on and whose traffic it must not see.
type Config struct {
	ProxyUID, ProxyGID       uint32     // required, 1337: the proxy's traffic is never captured
	InboundCapturePort       uint16     // required, 15006 (virtualInbound)
	OutboundCapturePort      uint16     // required, 15001 (virtualOutbound)
	DNSCapturePort           uint16     // optional, 15053; 0 disables DNS capture
	ExcludeInboundPorts      []uint16   // optional, 15020, 15021, 15090: reach the agent/proxy directly
	InboundPassthroughSource netip.Addr // required, 127.0.0.6: source of the proxy's inbound passthrough
}

// DefaultConfig returns Istio's sidecar settings with meshlab's fixed ports.
func DefaultConfig() Config {
	return Config{
		ProxyUID:                 1337,
		ProxyGID:                 1337,
		InboundCapturePort:       15006,
		OutboundCapturePort:      15001,
		DNSCapturePort:           15053,
		ExcludeInboundPorts:      []uint16{15020, 15021, 15090},
		InboundPassthroughSource: netip.MustParseAddr("127.0.0.6"),
	}
}

// Validate reports every setting that would render broken or dangerous rules.
func (c Config) Validate() error {
	var errs []error
	if c.ProxyUID == 0 {
		errs = append(errs, errors.New("proxy uid: 0 would exempt every root process from capture"))
	}
	if c.ProxyGID == 0 {
		errs = append(errs, errors.New("proxy gid: 0 would exempt every root-group process from capture"))
	}
	if c.InboundCapturePort == 0 {
		errs = append(errs, errors.New("inbound capture port: required"))
	}
	if c.OutboundCapturePort == 0 {
		errs = append(errs, errors.New("outbound capture port: required"))
	}
	if c.InboundCapturePort != 0 && c.InboundCapturePort == c.OutboundCapturePort {
		errs = append(errs, fmt.Errorf("inbound and outbound capture ports: both %d", c.InboundCapturePort))
	}
	if c.DNSCapturePort != 0 && (c.DNSCapturePort == c.InboundCapturePort || c.DNSCapturePort == c.OutboundCapturePort) {
		errs = append(errs, fmt.Errorf("dns capture port %d: already a TCP capture port", c.DNSCapturePort))
	}
	seen := map[uint16]bool{}
	for _, p := range c.ExcludeInboundPorts {
		switch {
		case p == 0:
			errs = append(errs, errors.New("exclude inbound ports: port 0"))
		case seen[p]:
			errs = append(errs, fmt.Errorf("exclude inbound ports: %d listed twice", p))
		}
		seen[p] = true
	}
	if !c.InboundPassthroughSource.Is4() || !c.InboundPassthroughSource.IsLoopback() {
		errs = append(errs, fmt.Errorf("inbound passthrough source %v: want an IPv4 loopback address such as 127.0.0.6", c.InboundPassthroughSource))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("validate capture config: %w", err)
	}
	return nil
}
