package netns

import (
	"errors"
	"fmt"
	"net"

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
	return Do(s.namespace, func() error {
		h := newHere()
		defer h.close()
		return h.apply(s)
	})
}

// applyAll enters the namespace once for all of steps: a pod's steps are three runs in
// two namespaces, and each entry is a locked thread, two setns and a goroutine hop, which
// a busy lab (a hundred pods at `up`) waits on for a free P every time. The run shares one
// netlink socket and the links it looked up.
func (netlinkKernel) applyAll(steps []step) error {
	failed := steps[0] // entering the namespace fails as its first step would
	err := Do(steps[0].namespace, func() error {
		h := newHere()
		defer h.close()
		for _, s := range steps {
			failed = s
			if err := h.apply(s); err != nil {
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

// here makes steps in the calling thread's namespace, which it must not leave while here
// lives: its netlink socket (made at the first request) is that namespace's. The
// package-level netlink functions opened a socket per request, and each link change
// looked its link up again.
type here struct {
	nl    *netlink.Handle
	links map[string]netlink.Link // looked up by name; no step renames or deletes one
}

func newHere() *here { return &here{links: map[string]netlink.Link{}} }

func (h *here) close() {
	if h.nl != nil {
		h.nl.Close()
	}
}

func (h *here) handle() (*netlink.Handle, error) {
	if h.nl == nil {
		nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink: %w", err)
		}
		h.nl = nl
	}
	return h.nl, nil
}

func (h *here) link(name string) (netlink.Link, error) {
	if l, ok := h.links[name]; ok {
		return l, nil
	}
	nl, err := h.handle()
	if err != nil {
		return nil, err
	}
	l, err := nl.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("find link %s: %w", name, err)
	}
	h.links[name] = l
	return l, nil
}

// apply makes one change in the calling thread's namespace.
func (h *here) apply(s step) error {
	switch s.op {
	case opDisableIPv6:
		return h.disableIPv6()
	case opAllowLowPorts:
		const p = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
		if err := writeAt(unix.AT_FDCWD, p, "0"); err != nil {
			return fmt.Errorf("allow unprivileged ports: write %s: %w", p, err)
		}
		return nil
	}
	nl, err := h.handle()
	if err != nil {
		return err
	}
	switch s.op {
	case opAddBridge:
		if l, err := nl.LinkByName(s.link); err == nil {
			if l.Type() != "bridge" {
				return fmt.Errorf("link %s exists and is a %s, not a bridge", s.link, l.Type())
			}
			return nil
		}
		return nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: s.link}})
	case opAddVeth:
		peerNS, err := openNamespace(s.peerNamespace)
		if err != nil {
			return err
		}
		defer unix.Close(peerNS)
		return nl.LinkAdd(&netlink.Veth{
			LinkAttrs:        netlink.LinkAttrs{Name: s.link},
			PeerName:         s.peer,
			PeerNamespace:    netlink.NsFd(peerNS),
			PeerHardwareAddr: podMAC(s.prefix),
		})
	}
	link, err := h.link(s.link)
	if err != nil {
		return err
	}
	switch s.op {
	case opSetMaster:
		master, err := h.link(s.master)
		if err != nil {
			return err
		}
		return nl.LinkSetMasterByIndex(link, master.Attrs().Index)
	case opAddAddr:
		return nl.AddrReplace(link, &netlink.Addr{IPNet: &net.IPNet{
			IP:   s.prefix.Addr().AsSlice(),
			Mask: net.CIDRMask(s.prefix.Bits(), s.prefix.Addr().BitLen()),
		}})
	case opLinkUp:
		return nl.LinkSetUp(link)
	case opDefaultRoute:
		return nl.RouteReplace(&netlink.Route{
			LinkIndex: link.Attrs().Index,
			Gw:        s.gateway.AsSlice(),
			Scope:     netlink.SCOPE_UNIVERSE,
		})
	case opRoute:
		return nl.RouteReplace(&netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: s.prefix.Masked().Addr().AsSlice(), Mask: net.CIDRMask(s.prefix.Bits(), s.prefix.Addr().BitLen())},
			Gw:        s.gateway.AsSlice(),
			Scope:     netlink.SCOPE_UNIVERSE,
		})
	}
	return errors.New("unknown step")
}

// ipv6Sysctls are the switches, under /proc/sys/net/ipv6/conf, that keep IPv6 off in a
// namespace: "all" turns it off on every existing link, "default" on every link created
// afterwards, lo named for clarity.
var ipv6Sysctls = []string{"all/disable_ipv6", "default/disable_ipv6", "lo/disable_ipv6"}

// disableIPv6 turns IPv6 off in the namespace. A kernel without IPv6 has no such files:
// there is nothing to turn off.
//
// Every namespace has its own ipv4 and ipv6 directories under the one /proc/sys/net, and
// a lookup of either name there compares against each namespace's entry of that name
// (proc_sys_compare): O(pods) per path. The three switches are reached from one open of
// their conf directory, one such lookup instead of one per file.
func (h *here) disableIPv6() error {
	dir, err := unix.Open("/proc/sys/net/ipv6/conf", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("disable IPv6: open /proc/sys/net/ipv6/conf: %w", err)
	}
	defer unix.Close(dir)
	for _, p := range ipv6Sysctls {
		if err := writeAt(dir, p, "1"); err != nil {
			return fmt.Errorf("disable IPv6: write /proc/sys/net/ipv6/conf/%s: %w", p, err)
		}
	}
	return nil
}

// writeAt writes value to the file rel under the directory dir (AT_FDCWD: the current
// directory, or rel absolute).
func writeAt(dir int, rel, value string) error {
	fd, err := unix.Openat(dir, rel, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(value))
	return err
}
