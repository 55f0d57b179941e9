package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// kernel applies steps. The real one is netlinkKernel; tests use a recording fake.
// Implementations are called from one goroutine at a time per plan.
type kernel interface {
	// apply makes the change s describes, or returns why it could not.
	apply(s step) error
}

// batchKernel is a kernel that makes several steps of one namespace at once.
type batchKernel interface {
	kernel
	// applyAll makes steps, all in one namespace (none creates it), in order, and stops at
	// the first failure, naming its step.
	applyAll(steps []step) error
}

var _ batchKernel = netlinkKernel{}

// netlinkKernel applies steps with netlink from inside each step's namespace.
type netlinkKernel struct{}

func (netlinkKernel) apply(s step) error {
	if s.op == opEnsureNamespace {
		if Exists(s.namespace) {
			return nil
		}
		return Create(s.namespace)
	}
	if s.op == opDisableIPv6 {
		return Do(s.namespace, disableIPv6Here)
	}
	return Do(s.namespace, func() error { return applyHere(s) })
}

// applyAll enters the namespace once for all of steps: a pod's nine steps are three runs
// in two namespaces, and each entry is a locked thread, two setns and a goroutine hop,
// which a busy lab (a hundred pods at `up`) waits on for a free P every time.
func (netlinkKernel) applyAll(steps []step) error {
	failed := steps[0] // entering the namespace fails as its first step would
	err := Do(steps[0].namespace, func() error {
		for _, s := range steps {
			failed = s
			var err error
			if s.op == opDisableIPv6 {
				err = disableIPv6Here()
			} else {
				err = applyHere(s)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", failed, err)
	}
	return nil
}

// applyHere makes one link change in the calling thread's namespace. The package-level
// netlink functions open a fresh socket per request, so it is created inside the namespace.
func applyHere(s step) error {
	switch s.op {
	case opAddBridge:
		if l, err := netlink.LinkByName(s.link); err == nil {
			if l.Type() != "bridge" {
				return fmt.Errorf("link %s exists and is a %s, not a bridge", s.link, l.Type())
			}
			return nil
		}
		return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: s.link}})
	case opAddVeth:
		peerNS, err := openNamespace(s.peerNamespace)
		if err != nil {
			return err
		}
		defer unix.Close(peerNS)
		return netlink.LinkAdd(&netlink.Veth{
			LinkAttrs:     netlink.LinkAttrs{Name: s.link},
			PeerName:      s.peer,
			PeerNamespace: netlink.NsFd(peerNS),
		})
	}
	link, err := netlink.LinkByName(s.link)
	if err != nil {
		return fmt.Errorf("find link %s: %w", s.link, err)
	}
	switch s.op {
	case opSetMaster:
		master, err := netlink.LinkByName(s.master)
		if err != nil {
			return fmt.Errorf("find link %s: %w", s.master, err)
		}
		return netlink.LinkSetMaster(link, master)
	case opAddAddr:
		return netlink.AddrReplace(link, &netlink.Addr{IPNet: &net.IPNet{
			IP:   s.prefix.Addr().AsSlice(),
			Mask: net.CIDRMask(s.prefix.Bits(), s.prefix.Addr().BitLen()),
		}})
	case opLinkUp:
		return netlink.LinkSetUp(link)
	case opDefaultRoute:
		return netlink.RouteReplace(&netlink.Route{
			LinkIndex: link.Attrs().Index,
			Gw:        s.gateway.AsSlice(),
			Scope:     netlink.SCOPE_UNIVERSE,
		})
	case opRoute:
		return netlink.RouteReplace(&netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: s.prefix.Masked().Addr().AsSlice(), Mask: net.CIDRMask(s.prefix.Bits(), s.prefix.Addr().BitLen())},
			Gw:        s.gateway.AsSlice(),
			Scope:     netlink.SCOPE_UNIVERSE,
		})
	}
	return errors.New("unknown step")
}

// ipv6Sysctls are the switches that keep IPv6 off in a namespace: "all" turns it off on
// every existing link, "default" on every link created afterwards, lo named for clarity.
var ipv6Sysctls = []string{
	"/proc/sys/net/ipv6/conf/all/disable_ipv6",
	"/proc/sys/net/ipv6/conf/default/disable_ipv6",
	"/proc/sys/net/ipv6/conf/lo/disable_ipv6",
}

// disableIPv6Here turns IPv6 off in the calling thread's network namespace (/proc/sys/net
// is the namespace of the thread that opens it). A kernel without IPv6 has no such files:
// there is nothing to turn off.
func disableIPv6Here() error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, p := range ipv6Sysctls {
		if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("disable IPv6: write %s: %w", p, err)
		}
	}
	return nil
}
