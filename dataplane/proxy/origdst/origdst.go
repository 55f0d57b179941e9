// Package origdst reads the destination a connection had before iptables REDIRECT
// rewrote it (SO_ORIGINAL_DST), which is how a transparent proxy learns where the
// application meant to connect.
package origdst

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST (linux/netfilter_ipv4.h) and IP6T_SO_ORIGINAL_DST
// (linux/netfilter_ipv6/ip6_tables.h); both are 80.
const soOriginalDst = 80

// ErrNotRedirected is returned when the kernel tracks no connection for the socket
// (ENOENT), so no NAT rule saw it and there is no original destination. A connection that
// conntrack saw but no rule rewrote returns its own destination instead.
var ErrNotRedirected = errors.New("connection was not redirected")

// OriginalDst returns the address the peer dialled before a REDIRECT or DNAT rule sent
// the connection to this socket. It is safe to call from any goroutine.
func OriginalDst(c *net.TCPConn) (netip.AddrPort, error) {
	local, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok || local == nil {
		return netip.AddrPort{}, errors.New("read original destination: connection has no local TCP address")
	}
	ipv6 := !local.AddrPort().Addr().Unmap().Is4()
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("read original destination: %w", err)
	}
	var (
		buf    [unix.SizeofSockaddrInet6]byte
		sysErr error
	)
	err = raw.Control(func(fd uintptr) {
		level := unix.SOL_IP
		if ipv6 {
			level = unix.SOL_IPV6
		}
		sysErr = getsockopt(int(fd), level, buf[:])
	})
	if err == nil {
		err = sysErr
	}
	if errors.Is(err, unix.ENOENT) {
		return netip.AddrPort{}, fmt.Errorf("read original destination: %w", ErrNotRedirected)
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("read original destination: %w", err)
	}
	return decode(buf[:])
}

// getsockopt reads SO_ORIGINAL_DST at level into buf (a struct sockaddr_in or sockaddr_in6).
func getsockopt(fd, level int, buf []byte) error {
	size := uint32(len(buf))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), soOriginalDst,
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// decode parses a struct sockaddr_in or sockaddr_in6 as the kernel writes it: family in
// host byte order, then the port in network byte order, then the address.
func decode(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, errors.New("decode original destination: short sockaddr")
	}
	family := binary.NativeEndian.Uint16(b[0:2])
	switch family {
	case unix.AF_INET:
		if len(b) < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}, errors.New("decode original destination: short sockaddr_in")
		}
		addr := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(b[2:4])), nil
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, errors.New("decode original destination: short sockaddr_in6")
		}
		addr := netip.AddrFrom16([16]byte(b[8:24]))
		return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(b[2:4])), nil
	}
	return netip.AddrPort{}, fmt.Errorf("decode original destination: address family %d", family)
}
