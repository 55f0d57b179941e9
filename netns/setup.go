package netns

import "fmt"

// SetupNode creates the node namespace, brings lo up, creates the bridge with the gateway address, up.
// It is idempotent: an existing namespace, bridge or address is kept.
func SetupNode(c NodeConfig) error {
	return setupNode(c, netlinkKernel{})
}

func setupNode(c NodeConfig, k kernel) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("set up node %q: %w", c.Namespace, err)
	}
	if err := run(k, planNode(c)); err != nil {
		return fmt.Errorf("set up node %q: %w", c.Namespace, err)
	}
	return nil
}

// SetupPod creates the pod namespace, lo up, a veth created with its peer already in the pod
// namespace (netlink LinkAttrs.Namespace = NsFd; no move afterwards), the host end in the node
// namespace attached to the bridge and up, the pod end renamed/addressed/up, default route via Gateway.
//
// The node must have been set up first. The veth is created under its final names (the
// pod end is named PodIfName in the pod namespace directly), so nothing is renamed. If the
// host-side veth already exists, SetupPod fails: HostIfName is deterministic per pod, so
// that means the pod exists.
func SetupPod(c PodConfig) error {
	return setupPod(c, netlinkKernel{})
}

func setupPod(c PodConfig, k kernel) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("set up pod %q: %w", c.Namespace, err)
	}
	if err := run(k, planPod(c)); err != nil {
		return fmt.Errorf("set up pod %q: %w", c.Namespace, err)
	}
	return nil
}

// run applies steps in order and stops at the first failure, naming the step.
func run(k kernel, steps []step) error {
	for _, s := range steps {
		if err := k.apply(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}
