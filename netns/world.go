package netns

import (
	"errors"
	"fmt"
	"net/netip"
)

// WorldConfig describes a lab's outside world: a namespace of its own joined to the node
// namespace by one veth pair, on a private range of the lab's own. The world has routes
// back to the pods and to the lab's Service addresses (where a cluster's load balancer
// answers the Internet: the docs' reader curls $INGRESS_HOST from outside the cluster)
// and no default route: nothing in it reaches anything but the lab.
type WorldConfig struct {
	Namespace     string       // required, e.g. "ml-demo-world"; created if absent
	NodeNamespace string       // required
	NodeIfName    string       // required: the veth end in the node namespace, <= 15 chars
	NodeAddress   netip.Prefix // required: the node's address on the link, e.g. 172.31.255.1/24
	// Addresses are the world's addresses on its end (eth0), each in NodeAddress's
	// subnet: one per outside host. At least one.
	Addresses []netip.Addr
	PodCIDR   netip.Prefix // required: routed back via the node
	// ServiceCIDR, when valid, is routed via the node too: the node's kube-proxy rules
	// take a LoadBalancer Service's address from the world as from a pod.
	ServiceCIDR netip.Prefix
}

// Validate reports what is missing or malformed in c.
func (c WorldConfig) Validate() error {
	var errs []error
	if err := checkName(c.Namespace); err != nil {
		errs = append(errs, fmt.Errorf("world namespace: %w", err))
	}
	if err := checkName(c.NodeNamespace); err != nil {
		errs = append(errs, fmt.Errorf("node namespace: %w", err))
	}
	if err := checkIfName(c.NodeIfName); err != nil {
		errs = append(errs, fmt.Errorf("node interface: %w", err))
	}
	if !c.NodeAddress.IsValid() {
		errs = append(errs, errors.New("node address: required"))
	}
	if !c.PodCIDR.IsValid() {
		errs = append(errs, errors.New("pod CIDR: required"))
	} else if c.NodeAddress.IsValid() && c.PodCIDR.Overlaps(c.NodeAddress) {
		errs = append(errs, fmt.Errorf("world subnet %s overlaps the pod CIDR %s", c.NodeAddress.Masked(), c.PodCIDR))
	}
	if c.ServiceCIDR.IsValid() && c.NodeAddress.IsValid() && c.ServiceCIDR.Overlaps(c.NodeAddress) {
		errs = append(errs, fmt.Errorf("world subnet %s overlaps the service CIDR %s", c.NodeAddress.Masked(), c.ServiceCIDR))
	}
	if len(c.Addresses) == 0 {
		errs = append(errs, errors.New("addresses: at least one is required"))
	}
	for _, a := range c.Addresses {
		if c.NodeAddress.IsValid() && (!c.NodeAddress.Masked().Contains(a) || a == c.NodeAddress.Addr()) {
			errs = append(errs, fmt.Errorf("address %s: not a host of the world subnet %s other than the node's", a, c.NodeAddress.Masked()))
		}
	}
	return errors.Join(errs...)
}

// SetupWorld creates the world namespace with lo up and IPv6 off, a veth pair made from
// the node namespace with its world end (eth0) already in the world namespace, the
// node's address on its end, the world's addresses on eth0, and in the world a route to
// the pod CIDR (and one to the service CIDR when given) via the node. The node routes the world's subnet on its link (a
// connected route) and forwards between pods and world (ip_forward is on in the node).
func SetupWorld(c WorldConfig) error {
	return setupWorld(c, netlinkKernel{})
}

func setupWorld(c WorldConfig, k kernel) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("set up world %q: %w", c.Namespace, err)
	}
	if err := run(k, planWorld(c)); err != nil {
		return fmt.Errorf("set up world %q: %w", c.Namespace, err)
	}
	return nil
}

// planWorld lists SetupWorld's steps.
func planWorld(c WorldConfig) []step {
	world, node := c.Namespace, c.NodeNamespace
	steps := []step{
		{op: opEnsureNamespace, namespace: world},
		{op: opDisableIPv6, namespace: world},
		{op: opLinkUp, namespace: world, link: "lo"},
		{op: opAddVeth, namespace: node, link: c.NodeIfName, peer: DefaultPodIfName, peerNamespace: world},
		{op: opAddAddr, namespace: node, link: c.NodeIfName, prefix: c.NodeAddress},
		{op: opLinkUp, namespace: node, link: c.NodeIfName},
	}
	for _, a := range c.Addresses {
		steps = append(steps, step{op: opAddAddr, namespace: world, link: DefaultPodIfName, prefix: netip.PrefixFrom(a, c.NodeAddress.Bits())})
	}
	steps = append(steps,
		step{op: opLinkUp, namespace: world, link: DefaultPodIfName},
		step{op: opRoute, namespace: world, link: DefaultPodIfName, prefix: c.PodCIDR.Masked(), gateway: c.NodeAddress.Addr()},
	)
	if c.ServiceCIDR.IsValid() {
		steps = append(steps, step{op: opRoute, namespace: world, link: DefaultPodIfName, prefix: c.ServiceCIDR.Masked(), gateway: c.NodeAddress.Addr()})
	}
	return steps
}
