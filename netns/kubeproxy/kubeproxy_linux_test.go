package kubeproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// testLab is a node and its pods in throwaway namespaces, deleted by t.Cleanup.
type testLab struct {
	prefix string
	node   string
	pods   map[string]netip.Addr
}

func newTestLab(t *testing.T, pods map[string]string) *testLab {
	t.Helper()
	lab := testutil.UniqueName(t)
	l := &testLab{prefix: "ml-" + lab + "-", pods: make(map[string]netip.Addr)}
	l.node = l.prefix + "node"
	t.Cleanup(func() {
		names, err := netns.List(l.prefix)
		if err != nil {
			t.Errorf("list namespaces: %v", err)
		}
		for _, n := range names {
			if err := netns.Delete(n); err != nil {
				t.Errorf("delete %s: %v", n, err)
			}
		}
	})
	gw := netip.MustParsePrefix("10.244.0.1/16")
	if err := netns.SetupNode(netns.NodeConfig{Namespace: l.node, Bridge: "mlbr0", Gateway: gw}); err != nil {
		t.Fatalf("SetupNode: %v", err)
	}
	for name, addr := range pods {
		err := netns.SetupPod(netns.PodConfig{
			Namespace: l.prefix + name, NodeNamespace: l.node, Bridge: "mlbr0",
			HostIfName: netns.HostIfName(lab, name), Address: netip.MustParsePrefix(addr), Gateway: gw.Addr(),
		})
		if err != nil {
			t.Fatalf("SetupPod(%s): %v", name, err)
		}
		l.pods[name] = netip.MustParsePrefix(addr).Addr()
	}
	return l
}

// serve answers every connection to port in pod with "<pod> <peer address>".
func (l *testLab) serve(t *testing.T, pod string, port uint16) {
	t.Helper()
	var ln net.Listener
	err := netns.Do(l.prefix+pod, func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(l.pods[pod], port).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s: %v", pod, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, pod+" "+c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().String())
			c.Close()
		}
	}()
}

// get connects from pod to addr and returns the whole answer.
func (l *testLab) get(t *testing.T, pod, addr string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := netns.DialContext(ctx, l.prefix+pod, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err
}

func (l *testLab) apply(t *testing.T, c Config) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := capture.NewApplier().Apply(l.node, c.Render()); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// TestVIPInNode applies kube-proxy rules in a real node namespace and connects to the VIPs
// from a pod with no capture rules: both endpoints answer over the reply path through the
// node, the endpoint sees the node's address (masquerade), a service without endpoints is
// refused, and re-applying with one endpoint leaves only that one.
func TestVIPInNode(t *testing.T) {
	testutil.RequireRoot(t) // not parallel: its subtests are steps over one node, in order
	hostForward, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	l := newTestLab(t, map[string]string{"client": "10.244.0.2/16", "a": "10.244.0.3/16", "b": "10.244.0.4/16"})
	l.serve(t, "a", 8080)
	l.serve(t, "b", 8080)
	if err := PrepareNode(l.node, netip.MustParsePrefix("10.96.0.0/16"), "mlbr0"); err != nil {
		t.Fatal(err)
	}
	backend := ServicePort{
		Namespace: "default", Name: "backend", PortName: "http", VIP: netip.MustParseAddr("10.96.0.10"), Port: 80,
		Endpoints: []netip.AddrPort{ep("10.244.0.3:8080"), ep("10.244.0.4:8080")},
	}
	empty := ServicePort{Namespace: "default", Name: "empty", VIP: netip.MustParseAddr("10.96.0.11"), Port: 80}
	l.apply(t, Config{Services: []ServicePort{backend, empty}})
	l.apply(t, Config{Services: []ServicePort{backend, empty}}) // a full re-sync is harmless

	t.Run("both endpoints answer", func(t *testing.T) {
		// 1 in 2^19 that a fair coin misses one endpoint in 20 tries.
		seen := map[string]int{}
		for range 20 {
			got, err := l.get(t, "client", "10.96.0.10:80")
			if err != nil {
				t.Fatalf("connect to the VIP: %v", err)
			}
			pod, peer, _ := strings.Cut(got, " ")
			if peer != "10.244.0.1" {
				t.Fatalf("endpoint %s saw the client as %q, want the node 10.244.0.1 (masquerade)", pod, peer)
			}
			seen[pod]++
		}
		if seen["a"] == 0 || seen["b"] == 0 || len(seen) != 2 {
			t.Fatalf("answers per endpoint %v, want both a and b", seen)
		}
	})
	t.Run("no endpoints is refused", func(t *testing.T) {
		_, err := l.get(t, "client", "10.96.0.11:80")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("connect to a VIP without endpoints: %v, want connection refused", err)
		}
	})
	t.Run("re-applied with one endpoint", func(t *testing.T) {
		one := backend
		one.Endpoints = one.Endpoints[1:]
		l.apply(t, Config{Services: []ServicePort{one}})
		for range 5 {
			got, err := l.get(t, "client", "10.96.0.10:80")
			if err != nil || !strings.HasPrefix(got, "b ") {
				t.Fatalf("answer %q (%v), want b only", got, err)
			}
		}
	})
	after, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil || string(after) != string(hostForward) {
		t.Fatalf("host ip_forward changed: %q -> %q (%v)", hostForward, after, err)
	}
}
