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

// SetupPod creates the pod namespace (if absent) with lo up, then a veth pair created from
// inside the node namespace with its peer already in the pod namespace (netlink
// Veth.PeerNamespace = NsFd; no move afterwards, and no end ever in the root namespace): the
// host end HostIfName attached to the bridge and up, the pod end PodIfName addressed and
// up, and a default route via Gateway.
//
// The node must have been set up first. Both ends are created under their final names, so
// nothing is renamed. If the host-side veth already exists SetupPod fails: HostIfName is
// deterministic per pod, so that means the pod exists.
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

// run applies steps in order and stops at the first failure, naming the step. A kernel
// that can (batchKernel) gets each run of consecutive steps in one namespace at once.
func run(k kernel, steps []step) error {
	b, batches := k.(batchKernel)
	for i := 0; i < len(steps); {
		j := i + 1
		if batches && steps[i].op != opEnsureNamespace {
			for j < len(steps) && steps[j].op != opEnsureNamespace && steps[j].namespace == steps[i].namespace {
				j++
			}
		}
		if j-i > 1 {
			if err := b.applyAll(steps[i:j]); err != nil {
				return err
			}
			i = j
			continue
		}
		if err := k.apply(steps[i]); err != nil {
			return fmt.Errorf("%s: %w", steps[i], err)
		}
		i = j
	}
	return nil
}
