package kubeproxy

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"

	"github.com/meshlab/meshlab/netns"
)

// PrepareNode makes the namespace route VIP traffic as a node does:
//
//   - net.ipv4.ip_forward=1, so DNATed connections are forwarded to their endpoint;
//   - no ICMP redirects: a pod's packet to a VIP leaves by the bridge it came in on, which
//     makes Linux tell the client to reach the endpoint directly; with the DNAT reversed in
//     that redirect, the client would learn "VIP via the endpoint pod" and its next
//     connections would go nowhere;
//   - a route for the service CIDR on dev (the bridge). A real node has a default route, so
//     a VIP nothing DNATs (a service without endpoints) is forwarded, and the filter table
//     rejects it; the lab's node has no uplink, and without this route the client would get
//     "network unreachable" from the routing lookup before any rule sees the packet.
//
// Sysctls under /proc/sys/net belong to the namespace of the thread that opens them, so
// this never touches the host's. It is idempotent.
func PrepareNode(namespace string, serviceCIDR netip.Prefix, dev string) error {
	err := netns.Do(namespace, func() error {
		// send_redirects is "all OR the interface", so every existing interface must say 0.
		confs, err := filepath.Glob("/proc/sys/net/ipv4/conf/*/send_redirects")
		if err != nil {
			return err
		}
		for _, p := range confs {
			if err := os.WriteFile(p, []byte("0"), 0o644); err != nil {
				return err
			}
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return err
		}
		link, err := netlink.LinkByName(dev)
		if err != nil {
			return fmt.Errorf("find %s: %w", dev, err)
		}
		p := serviceCIDR.Masked()
		dst := &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: dst, Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route %s via %s: %w", p, dev, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("prepare node %s for service VIPs: %w", namespace, err)
	}
	return nil
}
