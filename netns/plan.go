package netns

import (
	"fmt"
	"net"
	"net/netip"
)

// op is one kind of kernel change a step makes.
type op int

const (
	opEnsureNamespace op = iota // create Namespace if absent
	opDisableIPv6               // IPv6 off in Namespace (all, default and lo), before any link is up
	opAllowLowPorts             // every uid in Namespace may bind any port (ip_unprivileged_port_start 0)
	opAddBridge                 // bridge Link in Namespace (kept if it exists)
	opAddVeth                   // veth Link in Namespace, its end Peer created in PeerNamespace
	opSetMaster                 // attach Link to bridge Master
	opAddAddr                   // put Prefix on Link (replace)
	opLinkUp                    // bring Link up
	opDefaultRoute              // default route via Gateway on Link (replace)
	opRoute                     // route to Prefix via Gateway on Link (replace)
)

// step is one change to make in one namespace. Plans are lists of steps, computed
// without side effects, so they can be golden-tested and applied by any kernel.
type step struct {
	op            op
	namespace     string
	link          string
	peer          string
	peerNamespace string
	master        string
	prefix        netip.Prefix
	gateway       netip.Addr
}

// String renders the step as the equivalent iproute2 command, for logs and golden files.
func (s step) String() string {
	in := "ip -n " + s.namespace + " "
	switch s.op {
	case opEnsureNamespace:
		return "ip netns add " + s.namespace + " # if absent"
	case opDisableIPv6:
		return "ip netns exec " + s.namespace + " sysctl -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.lo.disable_ipv6=1"
	case opAllowLowPorts:
		return "ip netns exec " + s.namespace + " sysctl -w net.ipv4.ip_unprivileged_port_start=0"
	case opAddBridge:
		return in + "link add " + s.link + " type bridge # if absent"
	case opAddVeth:
		line := in + "link add " + s.link + " type veth peer name " + s.peer + " netns " + s.peerNamespace
		if mac := podMAC(s.prefix); mac != nil {
			line += " address " + mac.String()
		}
		return line
	case opSetMaster:
		return in + "link set " + s.link + " master " + s.master
	case opAddAddr:
		return in + "addr replace " + s.prefix.String() + " dev " + s.link
	case opLinkUp:
		return in + "link set " + s.link + " up"
	case opDefaultRoute:
		return in + "route replace default via " + s.gateway.String() + " dev " + s.link
	case opRoute:
		return in + "route replace " + s.prefix.String() + " via " + s.gateway.String() + " dev " + s.link
	}
	return fmt.Sprintf("unknown op %d", s.op)
}

// planNode lists the steps that make the node namespace and its bridge.
//
// IPv6 is turned off in every namespace before its first link comes up, so no link-local
// (or any other) IPv6 address ever exists: the capture rules are IPv4 iptables rules, and
// an address they do not cover would let a pod reach another pod's app around its sidecar.
func planNode(c NodeConfig) []step {
	ns := c.Namespace
	return []step{
		{op: opEnsureNamespace, namespace: ns},
		{op: opDisableIPv6, namespace: ns},
		{op: opLinkUp, namespace: ns, link: "lo"},
		{op: opAddBridge, namespace: ns, link: c.Bridge},
		{op: opAddAddr, namespace: ns, link: c.Bridge, prefix: c.Gateway},
		{op: opLinkUp, namespace: ns, link: c.Bridge},
	}
}

// podMAC is the hardware address of the pod end of a veth, made from the pod's IPv4
// address as the CNI bridge plugin made it (0a:58 and the address's four bytes): a pod
// that comes back on the address of a deleted one (the lab hands freed addresses out
// again; a namespace deleted and created again gets the same) has the same MAC, so the
// other pods' and the node's neighbour entries for that address, which stay REACHABLE
// while traffic flows to it, still reach it. With a random MAC the old entry sent every
// frame to a MAC no longer on the bridge: connections timed out until it expired. nil
// for no IPv4 address (the kernel picks one).
func podMAC(p netip.Prefix) net.HardwareAddr {
	if !p.IsValid() || !p.Addr().Is4() {
		return nil
	}
	a := p.Addr().As4()
	return net.HardwareAddr{0x0a, 0x58, a[0], a[1], a[2], a[3]}
}

// planPod lists the steps that make a pod namespace and join it to the node's bridge, with
// IPv6 off (see planNode): the veth's pod end is created in a namespace whose default
// already disables IPv6, and the node end in the node namespace, whose default does too.
// The veth is created from the node namespace with its pod end already in the pod
// namespace, so no end ever sits in the root namespace and nothing is moved afterwards.
//
// With AllowLowPorts the unprivileged-port sysctl goes with IPv6's, in the same entry into
// the namespace (a pod's start entered it once more for it alone).
func planPod(c PodConfig) []step {
	pod, node, podIf := c.Namespace, c.NodeNamespace, c.podIfName()
	steps := []step{
		{op: opEnsureNamespace, namespace: pod},
		{op: opDisableIPv6, namespace: pod},
	}
	if c.AllowLowPorts {
		steps = append(steps, step{op: opAllowLowPorts, namespace: pod})
	}
	return append(steps,
		step{op: opLinkUp, namespace: pod, link: "lo"},
		step{op: opAddVeth, namespace: node, link: c.HostIfName, peer: podIf, peerNamespace: pod, prefix: c.Address},
		step{op: opSetMaster, namespace: node, link: c.HostIfName, master: c.Bridge},
		step{op: opLinkUp, namespace: node, link: c.HostIfName},
		step{op: opAddAddr, namespace: pod, link: podIf, prefix: c.Address},
		step{op: opLinkUp, namespace: pod, link: podIf},
		step{op: opDefaultRoute, namespace: pod, link: podIf, gateway: c.Gateway},
	)
}
