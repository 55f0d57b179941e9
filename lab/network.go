package lab

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

const bridgeName = "mlbr0"

// gateway is the node's address on the bridge: the first host of the pod CIDR.
func gateway(pods netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(pods.Masked().Addr().Next(), pods.Bits())
}

// checkHostOverlap refuses a lab range that overlaps a route of the host (other than a
// default route): the lab would shadow a real network for anyone reading addresses.
func checkHostOverlap(p netip.Prefix) error {
	routes, err := netlink.RouteList(nil, unix.AF_INET)
	if err != nil {
		return fmt.Errorf("list host routes: %w", err)
	}
	for _, r := range routes {
		if r.Dst == nil {
			continue // default route
		}
		ones, _ := r.Dst.Mask.Size()
		if ones == 0 {
			continue
		}
		addr, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		hp := netip.PrefixFrom(addr.Unmap(), ones)
		if hp.Overlaps(p) {
			return fmt.Errorf("%s overlaps the host's route to %s: choose another range", p, hp)
		}
	}
	return nil
}

// createNetwork makes the node namespace and its bridge.
func (l *Lab) createNetwork() error {
	ns := NodeNamespace(l.opts.Name)
	if err := l.jr.add(entry{Kind: "netns", Name: ns}); err != nil {
		return err
	}
	if err := l.syscalls().ns.SetupNode(netns.NodeConfig{Namespace: ns, Bridge: bridgeName, Gateway: gateway(l.opts.PodCIDR)}); err != nil {
		return fmt.Errorf("create node namespace %s: %w", ns, err)
	}
	return nil
}

// createPodNetwork makes the pod's namespace, links it to the bridge and, when the pod has
// a sidecar, installs the capture rules.
// createPodNetwork takes the pod's key (model.PodKey), which names its namespace, link
// and run directory. The namespace and its link are made in a net slot (withNetSlot),
// the journal entry before it and the capture rules after it.
func (l *Lab) createPodNetwork(name string, ip netip.Addr, sidecar bool) error {
	return l.makePodNetwork(name, ip, sidecar, l.withNetSlot)
}

// makePodNetwork is createPodNetwork with the namespace and link made inside slot.
func (l *Lab) makePodNetwork(name string, ip netip.Addr, sidecar bool, slot func(func() error) error) error {
	ns := NamespaceName(l.opts.Name, name)
	if err := l.jr.add(entry{Kind: "netns", Name: ns}); err != nil {
		return err
	}
	gw := gateway(l.opts.PodCIDR)
	nss := l.syscalls().ns
	err := slot(func() error {
		err := nss.SetupPod(netns.PodConfig{
			Namespace:     ns,
			NodeNamespace: NodeNamespace(l.opts.Name),
			Bridge:        bridgeName,
			HostIfName:    netns.HostIfName(l.opts.Name, name),
			Address:       netip.PrefixFrom(ip, l.opts.PodCIDR.Bits()),
			Gateway:       gw.Addr(),
		})
		if err != nil {
			return fmt.Errorf("create pod namespace %s: %w", ns, err)
		}
		// As container runtimes do for Kubernetes pods: any uid may bind any port, so an
		// app running unprivileged can still serve on port 80.
		if err := nss.AllowLowPorts(ns); err != nil {
			return fmt.Errorf("allow unprivileged ports in %s: %w", ns, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !sidecar {
		return nil
	}
	rules := capture.DefaultConfig().Render()
	if err := os.WriteFile(l.paths.PodDir(name)+"/iptables.rules", []byte(rules), 0o644); err != nil {
		return fmt.Errorf("write capture rules of %s: %w", name, err)
	}
	if err := nss.ApplyRules(ns, rules); err != nil {
		return fmt.Errorf("install capture rules in %s: %w", ns, err)
	}
	return nil
}

// checkExecutableByApps makes sure the apps' uids can run the meshlab binary: apps run as
// unprivileged uids of their own (allocateAppUIDs), and a binary under a private directory
// (a test's temp dir, /root) is not executable for them.
func checkExecutableByApps(path string) error {
	// Every directory on the way must be searchable by others, the file executable by others.
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("find meshlab binary: %w", err)
	}
	if info.Mode().Perm()&0o001 == 0 {
		return fmt.Errorf("meshlab binary %s is not executable by other users; apps run as unprivileged uids of their own (chmod o+x)", path)
	}
	for dir := parent(path); dir != "/"; dir = parent(dir) {
		di, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("find meshlab binary: %w", err)
		}
		if di.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("meshlab binary %s sits in %s, which other users cannot enter; apps run as unprivileged uids of their own: install meshlab somewhere readable (make build puts it in ./bin)", path, dir)
		}
	}
	return nil
}

func parent(p string) string {
	for i := len(p) - 1; i > 0; i-- {
		if p[i] == '/' {
			return p[:i]
		}
	}
	return "/"
}
