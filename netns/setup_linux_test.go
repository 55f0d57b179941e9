package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/vishvananda/netlink"
)

// TestSetupNodeAndPods builds a node and two pods in throwaway namespaces and checks the
// links, addresses and routes, pod-to-pod TCP, isolation from the host, and teardown.
func TestSetupNodeAndPods(t *testing.T) {
	testutil.RequireRoot(t) // not parallel: the steps after its subtests need them finished
	prefix := testNames(t)
	lab := prefix[len("ml-") : len(prefix)-1]
	node := NodeConfig{Namespace: prefix + "node", Bridge: "mlbr0", Gateway: netip.MustParsePrefix("10.244.0.1/16")}
	pods := []PodConfig{
		podFor(prefix, lab, "a", "10.244.0.5/16"),
		podFor(prefix, lab, "b", "10.244.0.6/16"),
	}
	pods[1].AllowLowPorts = true

	if err := SetupNode(node); err != nil {
		t.Fatalf("SetupNode: %v", err)
	}
	if err := SetupNode(node); err != nil {
		t.Fatalf("SetupNode again (idempotent): %v", err)
	}
	for _, p := range pods {
		if err := SetupPod(p); err != nil {
			t.Fatalf("SetupPod(%s): %v", p.Namespace, err)
		}
	}
	if err := SetupPod(pods[0]); err == nil {
		t.Fatal("SetupPod of an existing pod succeeded, want a veth exists error")
	}

	checkNode(t, node, pods)
	for _, p := range pods {
		checkPod(t, p)
	}
	checkRootUntouched(t, node, pods)
	// Pod b's plan set the unprivileged port start; pod a keeps the kernel's default.
	for _, p := range pods {
		var got string
		err := Do(p.Namespace, func() error {
			b, err := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
			got = strings.TrimSpace(string(b))
			return err
		})
		if want := map[bool]string{true: "0", false: "1024"}[p.AllowLowPorts]; err != nil || got != want {
			t.Errorf("%s: ip_unprivileged_port_start = %q (%v), want %s", p.Namespace, got, err, want)
		}
	}

	// A pod's MAC is made from its address, so one back on a deleted pod's address is
	// reached through the neighbour entries the others kept (podMAC).
	for _, p := range pods {
		var got string
		err := Do(p.Namespace, func() error {
			l, err := net.InterfaceByName("eth0")
			if err == nil {
				got = l.HardwareAddr.String()
			}
			return err
		})
		a := p.Address.Addr().As4()
		if want := fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3]); err != nil || got != want {
			t.Errorf("%s: eth0's MAC = %q (%v), want %s", p.Namespace, got, err, want)
		}
	}

	t.Run("pods reach each other over TCP", func(t *testing.T) {
		checkTCP(t, pods[0], pods[1])
		checkTCP(t, pods[1], pods[0])
	})
	t.Run("pods cannot reach the host", func(t *testing.T) {
		checkNoHost(t, pods[0])
	})

	// Deleting a pod namespace takes its veth pair, including the node's end, with it.
	if err := Delete(pods[0].Namespace); err != nil {
		t.Fatalf("Delete pod: %v", err)
	}
	eventually(t, "the deleted pod's veth to vanish from the node", func() bool {
		return !linkExists(t, node.Namespace, pods[0].HostIfName)
	})
	if !linkExists(t, node.Namespace, pods[1].HostIfName) {
		t.Fatal("deleting pod a removed pod b's veth")
	}
	for _, n := range []string{pods[1].Namespace, node.Namespace} {
		if err := Delete(n); err != nil {
			t.Fatalf("Delete(%s): %v", n, err)
		}
	}
	if names, _ := List(prefix); len(names) != 0 {
		t.Fatalf("namespaces left after Delete: %v", names)
	}
}

func podFor(prefix, lab, pod, addr string) PodConfig {
	return PodConfig{
		Namespace:     prefix + pod,
		NodeNamespace: prefix + "node",
		Bridge:        "mlbr0",
		HostIfName:    HostIfName(lab, pod),
		Address:       netip.MustParsePrefix(addr),
		Gateway:       netip.MustParseAddr("10.244.0.1"),
	}
}

// inNS runs fn via Do and fails the test on error.
func inNS(t *testing.T, ns string, fn func() error) {
	t.Helper()
	if err := Do(ns, fn); err != nil {
		t.Fatalf("in %s: %v", ns, err)
	}
}

func linkExists(t *testing.T, ns, name string) bool {
	t.Helper()
	found := false
	inNS(t, ns, func() error {
		_, err := netlink.LinkByName(name)
		found = err == nil
		return nil
	})
	return found
}

func isUp(l netlink.Link) bool { return l.Attrs().Flags&net.FlagUp != 0 }

func hasAddr(l netlink.Link, p netip.Prefix) (bool, error) {
	addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		return false, err
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		ones, _ := a.Mask.Size()
		if netip.PrefixFrom(ip.Unmap(), ones) == p {
			return true, nil
		}
	}
	return false, nil
}

func checkNode(t *testing.T, node NodeConfig, pods []PodConfig) {
	t.Helper()
	checkNoIPv6(t, node.Namespace)
	inNS(t, node.Namespace, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		br, err := netlink.LinkByName(node.Bridge)
		if err != nil {
			return err
		}
		if br.Type() != "bridge" || !isUp(br) || !isUp(lo) {
			t.Errorf("node: bridge type=%s up=%v, lo up=%v", br.Type(), isUp(br), isUp(lo))
		}
		if ok, err := hasAddr(br, node.Gateway); err != nil || !ok {
			t.Errorf("node: bridge lacks %s (%v)", node.Gateway, err)
		}
		for _, p := range pods {
			veth, err := netlink.LinkByName(p.HostIfName)
			if err != nil {
				return err
			}
			if veth.Type() != "veth" || !isUp(veth) || veth.Attrs().MasterIndex != br.Attrs().Index {
				t.Errorf("node: %s type=%s up=%v master=%d, want veth up on bridge %d",
					p.HostIfName, veth.Type(), isUp(veth), veth.Attrs().MasterIndex, br.Attrs().Index)
			}
		}
		// The node forwards nothing beyond the bridge: no default route.
		routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst == nil {
				t.Errorf("node: unexpected default route %v", r)
			}
		}
		return nil
	})
}

func checkPod(t *testing.T, p PodConfig) {
	t.Helper()
	checkNoIPv6(t, p.Namespace)
	inNS(t, p.Namespace, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		eth, err := netlink.LinkByName(p.podIfName())
		if err != nil {
			return err
		}
		if eth.Type() != "veth" || !isUp(eth) || !isUp(lo) {
			t.Errorf("pod %s: %s type=%s up=%v, lo up=%v", p.Namespace, eth.Attrs().Name, eth.Type(), isUp(eth), isUp(lo))
		}
		if ok, err := hasAddr(eth, p.Address); err != nil || !ok {
			t.Errorf("pod %s: eth0 lacks %s (%v)", p.Namespace, p.Address, err)
		}
		routes, err := netlink.RouteList(nil, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		var gw []string
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				gw = append(gw, r.Gw.String())
				if r.LinkIndex != eth.Attrs().Index {
					t.Errorf("pod %s: default route on link %d, want %d", p.Namespace, r.LinkIndex, eth.Attrs().Index)
				}
			}
		}
		if len(gw) != 1 || gw[0] != p.Gateway.String() {
			t.Errorf("pod %s: default routes via %v, want exactly [%s]", p.Namespace, gw, p.Gateway)
		}
		return nil
	})
}

// checkRootUntouched asserts, read-only, that nothing was created in the root namespace.
func checkRootUntouched(t *testing.T, node NodeConfig, pods []PodConfig) {
	t.Helper()
	for _, p := range pods {
		if _, err := netlink.LinkByName(p.HostIfName); err == nil {
			t.Errorf("root namespace has link %s", p.HostIfName)
		}
	}
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if ok, _ := hasAddr(l, node.Gateway); ok {
			t.Errorf("root namespace link %s has the gateway address", l.Attrs().Name)
		}
	}
}

// checkTCP listens on from's pod IP inside from and connects to it from to.
func checkTCP(t *testing.T, server, client PodConfig) {
	t.Helper()
	var ln net.Listener
	inNS(t, server.Namespace, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(server.Address.Addr(), 0).String())
		return err
	})
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		defer c.Close()
		if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != client.Address.Addr() {
			accepted <- errors.New("peer address " + got.String() + ", want " + client.Address.Addr().String())
			return
		}
		_, err = io.Copy(c, io.LimitReader(c, 5))
		accepted <- err
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := DialContext(ctx, client.Namespace, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial %s from %s: %v", ln.Addr(), client.Namespace, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo = %q, %v", buf, err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("server: %v", err)
	}
}

// checkNoHost dials an address of the host's root namespace from the pod: the packet can
// only reach the node namespace, which does not forward, so the dial must fail.
func checkNoHost(t *testing.T, p PodConfig) {
	t.Helper()
	hostAddr, ok := rootGlobalIPv4(t)
	if !ok {
		t.Skip("the root namespace has no global IPv4 address to try")
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(hostAddr, 0).String())
	if err != nil {
		t.Fatalf("listen on host address: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	conn, err := DialContext(ctx, p.Namespace, "tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatalf("pod %s reached the host at %s", p.Namespace, ln.Addr())
	}
}

func rootGlobalIPv4(t *testing.T) (netip.Addr, bool) {
	t.Helper()
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		ip = ip.Unmap()
		if ip.IsGlobalUnicast() && !ip.IsLoopback() {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// checkNoIPv6 fails unless the namespace has no IPv6 address at all (not even link-local
// or ::1) and IPv6 is off on every link, present and future: the capture rules are IPv4.
func checkNoIPv6(t *testing.T, ns string) {
	t.Helper()
	inNS(t, ns, func() error {
		addrs, err := netlink.AddrList(nil, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			t.Errorf("%s: IPv6 address %s on link %d", ns, a.IPNet, a.LinkIndex)
		}
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		names := []string{"all", "default"}
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		for _, n := range names {
			b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + n + "/disable_ipv6")
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(b)) != "1" {
				t.Errorf("%s: net.ipv6.conf.%s.disable_ipv6 = %s, want 1", ns, n, strings.TrimSpace(string(b)))
			}
		}
		return nil
	})
}
