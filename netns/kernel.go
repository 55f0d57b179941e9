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

var _ kernel = netlinkKernel{}

// netlinkKernel applies steps with netlink from inside each step's namespace.
type netlinkKernel struct{}

func (netlinkKernel) apply(s step) error {
	if s.op == opEnsureNamespace {
		if Exists(s.namespace) {
			return nil
		}
		return Create(s.namespace)
	}
	return Do(s.namespace, func() error { return applyHere(s) })
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
	}
	return errors.New("unknown step")
}
