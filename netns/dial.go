package netns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// DialContext returns a connection whose socket was created inside the namespace.
//
// A host name in addr is resolved first, in the caller's namespace (Go's resolver runs on
// other threads); pass IP literals to avoid that. Fast fallback between address families
// is off, so the dial happens on the thread Do put into the namespace.
func DialContext(ctx context.Context, name, network, addr string) (net.Conn, error) {
	target, err := resolve(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s %s in netns %q: %w", network, addr, name, err)
	}
	var conn net.Conn
	err = Do(name, func() error {
		d := net.Dialer{FallbackDelay: -1}
		c, err := d.DialContext(ctx, network, target)
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s %s in netns %q: %w", network, addr, name, err)
	}
	return conn, nil
}

// resolve turns the host of an ip network address into an IP literal.
func resolve(ctx context.Context, network, addr string) (string, error) {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return addr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if host == "" {
		return addr, nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return addr, nil
	}
	family := "ip"
	switch network[len(network)-1] {
	case '4':
		family = "ip4"
	case '6':
		family = "ip6"
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, family, host)
	if err != nil {
		return "", err
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("resolve %q: no addresses", host)
	}
	return net.JoinHostPort(ips[0].Unmap().String(), port), nil
}
