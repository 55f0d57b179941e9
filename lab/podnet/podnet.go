// Package podnet makes a pod's network as the lab starts it: its namespace with a veth
// on the node's bridge, the unprivileged-port sysctl container runtimes set, and, for a
// pod with a sidecar, istio-init's capture rules. It bounds how many pods do the kernel
// part at once.
package podnet

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// Namespaces is the kernel as making a pod's network reaches it (the lab's system: the
// host's, or its tests' recorder).
type Namespaces interface {
	// SetupPod creates a pod's namespace with its veth on the node's bridge (and, with
	// c.AllowLowPorts, lets every uid in it bind any port).
	SetupPod(c netns.PodConfig) error
	// ApplyRules installs iptables-restore rules in the namespace.
	ApplyRules(name, rules string) error
}

// Deps are what a Maker needs of its lab.
type Deps struct {
	NS Namespaces // required
	// Journal records the pod's namespace before it is made, so that down and clean
	// remove it whatever happens next. Required.
	Journal func(namespace string) error
	// Namespace names a pod's namespace from its key (lab.NamespaceName). Required.
	Namespace func(key string) string
	// HostIfName names the pod's veth end on the node (netns.HostIfName). Required.
	HostIfName func(key string) string
	// PodDir is the pod's run directory, where its capture rules are kept. Required.
	PodDir func(key string) string
	// NodeNamespace and Bridge are the node's namespace and the bridge on it. Required.
	NodeNamespace string
	Bridge        string
	// PodCIDR is the pods' range; its first host is their gateway. Required.
	PodCIDR netip.Prefix
	// Slots bounds how many pods make their namespace and link at once (cap(Slots));
	// nil: no bound.
	Slots chan struct{}
}

// Maker makes pods' networks.
type Maker struct{ d Deps }

// New returns a Maker over d.
func New(d Deps) *Maker { return &Maker{d: d} }

// Gateway is the node's address on the bridge: the first host of the pod CIDR.
func Gateway(pods netip.Prefix) netip.Prefix {
	return netip.PrefixFrom(pods.Masked().Addr().Next(), pods.Bits())
}

// Make makes the network of the pod key at ip, in a slot; with capture it installs the
// sidecar's capture rules after it. Every pod of an `up` starts at once, but their
// namespaces and links are kernel work serialised on the RTNL lock, and a disable_ipv6
// write that finds the lock taken restarts its system call until it gets it
// (addrconf_sysctl_disable's rtnl_trylock): with 100 pods at once that spinning was a
// fifth of the lab process's start CPU (docs/BENCHMARKS.md, "100 pods"). As many at once
// as the lab has Ps keeps the cores busy without it; journal entries, rules, processes
// and readiness stay fully concurrent.
func (m *Maker) Make(key string, ip netip.Addr, capture bool) error {
	return m.make(key, ip, capture, m.inSlot)
}

// MakeNow makes the network of a pod that every other pod waits for (ztunnel) ahead of
// those waiting for a slot, without capture rules.
func (m *Maker) MakeNow(key string, ip netip.Addr) error {
	return m.make(key, ip, false, func(fn func() error) error { return fn() })
}

func (m *Maker) make(key string, ip netip.Addr, withCapture bool, slot func(func() error) error) error {
	ns := m.d.Namespace(key)
	if err := m.d.Journal(ns); err != nil {
		return err
	}
	err := slot(func() error {
		err := m.d.NS.SetupPod(netns.PodConfig{
			Namespace:     ns,
			NodeNamespace: m.d.NodeNamespace,
			Bridge:        m.d.Bridge,
			HostIfName:    m.d.HostIfName(key),
			Address:       netip.PrefixFrom(ip, m.d.PodCIDR.Bits()),
			Gateway:       Gateway(m.d.PodCIDR).Addr(),
			// As container runtimes do for Kubernetes pods: any uid may bind any port, so
			// an app running unprivileged can still serve on port 80.
			AllowLowPorts: true,
		})
		if err != nil {
			return fmt.Errorf("create pod namespace %s: %w", ns, err)
		}
		return nil
	})
	if err != nil || !withCapture {
		return err
	}
	rules := capture.DefaultConfig().Render()
	if err := os.WriteFile(filepath.Join(m.d.PodDir(key), "iptables.rules"), []byte(rules), 0o644); err != nil {
		return fmt.Errorf("write capture rules of %s: %w", key, err)
	}
	if err := m.d.NS.ApplyRules(ns, rules); err != nil {
		return fmt.Errorf("install capture rules in %s: %w", ns, err)
	}
	return nil
}

// inSlot runs fn once fewer than cap(Slots) others are running theirs.
func (m *Maker) inSlot(fn func() error) error {
	if m.d.Slots == nil {
		return fn()
	}
	m.d.Slots <- struct{}{}
	defer func() { <-m.d.Slots }()
	return fn()
}
