package lab

import (
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/lab/podnet"
	"github.com/meshlab/meshlab/netns"
)

const bridgeName = "mlbr0"

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
	if err := l.syscalls().ns.SetupNode(netns.NodeConfig{Namespace: ns, Bridge: bridgeName, Gateway: podnet.Gateway(l.opts.PodCIDR)}); err != nil {
		return fmt.Errorf("create node namespace %s: %w", ns, err)
	}
	return nil
}

// podNetworks makes the lab's pods' networks (lab/podnet), at most cap(l.netSlots) at
// once while an `up` starts them all.
func (l *Lab) podNetworks() *podnet.Maker {
	name := l.opts.Name
	return podnet.New(podnet.Deps{
		NS:            l.syscalls().ns,
		Journal:       func(ns string) error { return l.jr.add(entry{Kind: "netns", Name: ns}) },
		Namespace:     func(key string) string { return NamespaceName(name, key) },
		HostIfName:    func(key string) string { return netns.HostIfName(name, key) },
		PodDir:        l.paths.PodDir,
		NodeNamespace: NodeNamespace(name),
		Bridge:        bridgeName,
		PodCIDR:       l.opts.PodCIDR,
		Slots:         l.netSlots,
	})
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
