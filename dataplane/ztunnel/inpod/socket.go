package inpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/meshlab/meshlab/netns"
)

// Mark is the packet mark on every socket ztunnel opens in a pod (istio-cni's rules skip
// packets carrying it, so ztunnel's own traffic is never captured again).
const Mark = 0x539

// Netns is one pod's network namespace, as handed over by the node agent. Its methods
// create sockets inside it from any goroutine (each call enters the namespace on a locked
// thread of its own through netns.DoFd); the sockets stay there. Safe for concurrent use.
type Netns struct {
	f *os.File
}

// NewNetns wraps f (a network namespace; the Netns owns and closes it).
func NewNetns(f *os.File) *Netns { return &Netns{f: f} }

// Close releases the namespace handle (the sockets made in it live on until closed).
func (n *Netns) Close() error { return n.f.Close() }

// Same reports whether n and o are the same namespace (device and inode).
func (n *Netns) Same(o *Netns) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(n.f.Fd()), &a) != nil || unix.Fstat(int(o.f.Fd()), &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// Do runs fn on a thread inside the namespace.
func (n *Netns) Do(fn func() error) error { return netns.DoFd(int(n.f.Fd()), fn) }

// markControl sets SO_MARK, and IP_TRANSPARENT when transparent (best effort for a
// listener, as ztunnel's; required to bind a foreign source address).
func markControl(transparent, freebind, required bool) func(string, string, syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, Mark); err != nil {
				serr = fmt.Errorf("set SO_MARK: %w", err)
				return
			}
			level, opt := unix.SOL_IP, unix.IP_TRANSPARENT
			if network == "tcp6" || network == "udp6" {
				level, opt = unix.SOL_IPV6, unix.IPV6_TRANSPARENT
			}
			if transparent {
				if err := unix.SetsockoptInt(int(fd), level, opt, 1); err != nil && required {
					serr = fmt.Errorf("set IP_TRANSPARENT: %w", err)
					return
				}
			}
			if freebind {
				fo := unix.IP_FREEBIND
				if level == unix.SOL_IPV6 {
					fo = unix.IPV6_FREEBIND
				}
				if err := unix.SetsockoptInt(int(fd), level, fo, 1); err != nil {
					serr = fmt.Errorf("set IP_FREEBIND: %w", err)
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// Listen opens a TCP listener at addr inside the namespace (marked, IP_TRANSPARENT best
// effort as ztunnel's listeners).
func (n *Netns) Listen(network, addr string) (*net.TCPListener, error) {
	var ln net.Listener
	err := n.Do(func() error {
		lc := net.ListenConfig{Control: markControl(true, false, false)}
		var err error
		ln, err = lc.Listen(context.Background(), network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s %s in pod: %w", network, addr, err)
	}
	return ln.(*net.TCPListener), nil
}

// Socket is one socket ListenAll opens: Network "tcp", "tcp4" or "tcp6" for a listener
// as Listen's, "udp", "udp4" or "udp6" for a socket as ListenPacket's; Addr its address.
type Socket struct{ Network, Addr string }

// ListenAll opens every one of socks in one entry into the namespace: each entry is a
// locked thread and two setns, and ztunnel opens five sockets in every pod it takes,
// one pod after another while the node agent waits for its ack. The i-th result is a
// *net.TCPListener or a net.PacketConn, as socks[i] asks; on failure, those opened are
// closed.
func (n *Netns) ListenAll(socks []Socket) ([]io.Closer, error) {
	out := make([]io.Closer, 0, len(socks))
	err := n.Do(func() error {
		for _, s := range socks {
			if strings.HasPrefix(s.Network, "udp") {
				lc := net.ListenConfig{Control: markControl(false, false, false)}
				pc, err := lc.ListenPacket(context.Background(), s.Network, s.Addr)
				if err != nil {
					return fmt.Errorf("listen %s %s in pod: %w", s.Network, s.Addr, err)
				}
				out = append(out, pc)
				continue
			}
			lc := net.ListenConfig{Control: markControl(true, false, false)}
			ln, err := lc.Listen(context.Background(), s.Network, s.Addr)
			if err != nil {
				return fmt.Errorf("listen %s %s in pod: %w", s.Network, s.Addr, err)
			}
			out = append(out, ln.(*net.TCPListener))
		}
		return nil
	})
	if err != nil {
		for _, c := range out {
			_ = c.Close()
		}
		return nil, err
	}
	return out, nil
}

// ListenPacket opens a UDP socket at addr inside the namespace (marked).
func (n *Netns) ListenPacket(network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := n.Do(func() error {
		lc := net.ListenConfig{Control: markControl(false, false, false)}
		var err error
		pc, err = lc.ListenPacket(context.Background(), network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s %s in pod: %w", network, addr, err)
	}
	return pc, nil
}

// Dial connects to dst from inside the namespace, marked. A valid src makes the socket
// bind it first with IP_TRANSPARENT and IP_FREEBIND (ztunnel's freebind_connect), so the
// destination sees the original client's address though it is not the pod's.
func (n *Netns) Dial(ctx context.Context, network string, src netip.Addr, dst netip.AddrPort) (net.Conn, error) {
	var conn net.Conn
	err := n.Do(func() error {
		d := net.Dialer{FallbackDelay: -1, Control: markControl(src.IsValid(), src.IsValid(), true)}
		if src.IsValid() {
			d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
			if network == "udp" || network == "udp4" || network == "udp6" {
				d.LocalAddr = &net.UDPAddr{IP: src.AsSlice()}
			}
		}
		var err error
		conn, err = d.DialContext(ctx, network, dst.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s in pod: %w", network, dst, err)
	}
	return conn, nil
}

// OriginalDst returns where a connection REDIRECTed to 15001 or 15006 was going
// (SO_ORIGINAL_DST, or IP6T_SO_ORIGINAL_DST for IPv6; both option 80).
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	local, _ := c.LocalAddr().(*net.TCPAddr)
	if local == nil {
		return netip.AddrPort{}, errors.New("original destination: no local address")
	}
	v6 := !local.AddrPort().Addr().Unmap().Is4()
	rc, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	var (
		out  netip.AddrPort
		serr error
	)
	err = rc.Control(func(fd uintptr) {
		if v6 {
			mreq, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.SOL_IPV6, 80)
			if err != nil {
				serr = err
				return
			}
			a := mreq.Addr
			port := uint16(a.Port>>8) | uint16(a.Port&0xff)<<8
			out = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), port)
			return
		}
		mreq, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, 80)
		if err != nil {
			serr = err
			return
		}
		// struct sockaddr_in: family(2) port(2, network order) addr(4), read as bytes.
		b := mreq.Multiaddr
		out = netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), uint16(b[2])<<8|uint16(b[3]))
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("original destination: %w", err)
	}
	return out, nil
}
