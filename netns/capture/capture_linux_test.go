package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/origdst"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
	"golang.org/x/sys/unix"
)

// newNamespace creates "ml-<unique>-<suffix>" and deletes it when the test ends.
func newNamespace(t *testing.T, prefix, suffix string) string {
	t.Helper()
	name := prefix + suffix
	if err := netns.Create(name); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			t.Errorf("delete namespace: %v", err)
		}
	})
	return name
}

var counters = regexp.MustCompile(`^\[\d+:\d+\] `)

// saved returns the namespace's nat table without comments lines and counters.
func saved(t *testing.T, ns string) string {
	t.Helper()
	out, err := Save(ns)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		lines = append(lines, counters.ReplaceAllString(l, ""))
	}
	return strings.Join(lines, "\n")
}

// TestApplyRealKernel applies each golden case in a fresh namespace and checks that
// iptables-save shows every chain and every rule (by its comment), and that applying
// again changes nothing.
func TestApplyRealKernel(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	prefix := "ml-" + testutil.UniqueName(t) + "-"
	for _, tt := range renderCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case has its own namespace
			c := DefaultConfig()
			tt.mutate(&c)
			ns := newNamespace(t, prefix, tt.name)
			a := NewApplier()
			if err := a.Apply(ns, c.Render()); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			got := saved(t, ns)
			for _, chain := range c.Chains() {
				if !strings.Contains(got, "\n:"+chain+" - [0:0]") {
					t.Errorf("iptables-save lacks chain %s:\n%s", chain, got)
				}
			}
			perChain := map[string]int{}
			for _, r := range c.Rules() {
				perChain[r.Chain]++
				quoted := "--comment " + fmt.Sprintf("%q", r.Comment)
				if !strings.Contains(r.Comment, " ") {
					quoted = "--comment " + r.Comment
				}
				if !strings.Contains(got, quoted) {
					t.Errorf("iptables-save lacks the rule %q (%s):\n%s", r.Spec, r.Comment, got)
				}
			}
			for chain, n := range perChain {
				if have := strings.Count(got, "-A "+chain+" "); have != n {
					t.Errorf("chain %s has %d rules, want %d", chain, have, n)
				}
			}
			if err := a.Apply(ns, c.Render()); err != nil {
				t.Fatalf("second Apply: %v", err)
			}
			if again := saved(t, ns); again != got {
				t.Errorf("applying twice changed the table:\n%s\n---\n%s", got, again)
			}
		})
	}
}

func TestApplyReportsOutput(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	ns := newNamespace(t, "ml-"+testutil.UniqueName(t)+"-", "bad")
	err := NewApplier().Apply(ns, "*nat\n-A NO_SUCH_CHAIN -j RETURN\nCOMMIT\n")
	if err == nil || !strings.Contains(err.Error(), "iptables-restore") || !strings.Contains(err.Error(), "line") {
		t.Fatalf("Apply of bad rules = %v, want an error with iptables-restore's output", err)
	}
	if _, err := Save("ml-" + testutil.UniqueName(t) + "-missing"); err == nil {
		t.Fatal("Save in a missing namespace succeeded")
	}
}

// labPods is a captured pod (a) and an uncaptured client pod (b) on one node.
type labPods struct {
	a, b     string
	aIP, bIP netip.Addr
	gateway  netip.Addr
}

func setupPods(t *testing.T) labPods {
	t.Helper()
	unique := testutil.UniqueName(t)
	prefix := "ml-" + unique + "-"
	gw := netip.MustParsePrefix("10.244.0.1/16")
	node := netns.NodeConfig{Namespace: prefix + "node", Bridge: "mlbr0", Gateway: gw}
	p := labPods{a: prefix + "a", b: prefix + "b", gateway: gw.Addr(),
		aIP: netip.MustParseAddr("10.244.0.5"), bIP: netip.MustParseAddr("10.244.0.6")}
	t.Cleanup(func() {
		for _, n := range []string{p.a, p.b, node.Namespace} {
			if err := netns.Delete(n); err != nil {
				t.Errorf("delete %s: %v", n, err)
			}
		}
	})
	if err := netns.SetupNode(node); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []struct {
		ns   string
		name string
		ip   netip.Addr
	}{{p.a, "a", p.aIP}, {p.b, "b", p.bIP}} {
		err := netns.SetupPod(netns.PodConfig{
			Namespace: pod.ns, NodeNamespace: node.Namespace, Bridge: node.Bridge,
			HostIfName: netns.HostIfName(unique, pod.name),
			Address:    netip.PrefixFrom(pod.ip, 16), Gateway: gw.Addr(),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := NewApplier().Apply(p.a, DefaultConfig().Render()); err != nil {
		t.Fatal(err)
	}
	return p
}

// listen opens a TCP listener inside ns and closes it when the test ends.
func listen(t *testing.T, ns, addr string) *net.TCPListener {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// acceptOne accepts one connection within a deadline and returns its original destination.
func acceptOne(t *testing.T, ln *net.TCPListener) (netip.AddrPort, error) {
	t.Helper()
	_ = ln.SetDeadline(time.Now().Add(5 * time.Second))
	c, err := ln.AcceptTCP()
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer c.Close()
	return origdst.OriginalDst(c)
}

// checkNotRedirected accepts one connection on ln and asserts that no rule rewrote its
// destination. (A redirected dial would have been refused: nothing listens on the
// capture ports while these subtests run.)
func checkNotRedirected(t *testing.T, ln *net.TCPListener) {
	t.Helper()
	got, err := acceptOne(t, ln)
	if errors.Is(err, origdst.ErrNotRedirected) {
		return
	}
	if err != nil {
		t.Fatalf("accept on %s: %v", ln.Addr(), err)
	}
	if want := ln.Addr().(*net.TCPAddr).AddrPort(); got != want {
		t.Fatalf("original destination = %s, want the listener itself (%s)", got, want)
	}
}

func dial(t *testing.T, ns, addr string) (net.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := netns.DialContext(ctx, ns, "tcp", addr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// TestCaptureBehaviour proves the rules do what they say on real traffic.
func TestCaptureBehaviour(t *testing.T) {
	testutil.RequireRoot(t) // not parallel: its subtests share one listener and run in order
	p := setupPods(t)
	c := DefaultConfig()
	// One listener on the outbound capture port serves every subtest: re-binding the port
	// right after a subtest closed it can race with the kernel tearing down its connections.
	outbound := listen(t, p.a, fmt.Sprintf("127.0.0.1:%d", c.OutboundCapturePort))

	t.Run("outbound TCP is redirected to 15001 and keeps its original destination", func(t *testing.T) {
		ln := outbound
		want := netip.AddrPortFrom(p.gateway, 9999)
		if _, err := dial(t, p.a, want.String()); err != nil {
			t.Fatalf("dial %s: %v", want, err)
		}
		got, err := acceptOne(t, ln)
		if err != nil {
			t.Fatalf("accept on the outbound capture port: %v", err)
		}
		if got != want {
			t.Fatalf("original destination = %s, want %s", got, want)
		}
	})

	t.Run("the proxy's own uid is not redirected", func(t *testing.T) {
		// The outbound capture port is listening, so a captured dial would succeed. Nothing
		// listens on the gateway's port 9999, so an uncaptured dial is refused by the node.
		// A socket opened with fsuid 1337 belongs to uid 1337 for the owner match.
		var err error
		doErr := netns.Do(p.a, func() error {
			// Per-thread on Linux; Do runs this on its own locked thread.
			old, serr := unix.SetfsuidRetUid(int(c.ProxyUID))
			if serr != nil {
				return serr
			}
			defer func() { _, _ = unix.SetfsuidRetUid(old) }()
			d := net.Dialer{Timeout: 5 * time.Second}
			var conn net.Conn
			conn, err = d.Dial("tcp", netip.AddrPortFrom(p.gateway, 9999).String())
			if conn != nil {
				conn.Close()
			}
			return nil
		})
		if doErr != nil {
			t.Fatal(doErr)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial as uid %d = %v, want connection refused by the gateway (not captured)", c.ProxyUID, err)
		}
	})

	t.Run("127.0.0.1 is not redirected", func(t *testing.T) {
		ln := listen(t, p.a, "127.0.0.1:0")
		if _, err := dial(t, p.a, ln.Addr().String()); err != nil {
			t.Fatal(err)
		}
		checkNotRedirected(t, ln)
	})

	t.Run("inbound TCP is redirected to 15006", func(t *testing.T) {
		ln := listen(t, p.a, fmt.Sprintf("0.0.0.0:%d", c.InboundCapturePort))
		want := netip.AddrPortFrom(p.aIP, 9080)
		if _, err := dial(t, p.b, want.String()); err != nil {
			t.Fatalf("dial %s from the other pod: %v", want, err)
		}
		got, err := acceptOne(t, ln)
		if err != nil {
			t.Fatalf("accept on the inbound capture port: %v", err)
		}
		if got != want {
			t.Fatalf("original destination = %s, want %s", got, want)
		}
	})

	t.Run("excluded inbound ports reach their listener directly", func(t *testing.T) {
		port := c.ExcludeInboundPorts[1] // 15021
		ln := listen(t, p.a, netip.AddrPortFrom(p.aIP, port).String())
		if _, err := dial(t, p.b, ln.Addr().String()); err != nil {
			t.Fatalf("dial excluded port %d: %v", port, err)
		}
		checkNotRedirected(t, ln)
	})

	t.Run("DNS over UDP is redirected to 15053", func(t *testing.T) {
		var pc net.PacketConn
		err := netns.Do(p.a, func() (err error) {
			pc, err = net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", c.DNSCapturePort))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := netns.DialContext(ctx, p.a, "udp", netip.AddrPortFrom(p.gateway, 53).String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("query")); err != nil {
			t.Fatal(err)
		}
		_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 16)
		n, from, err := pc.ReadFrom(buf)
		if err != nil || string(buf[:n]) != "query" {
			t.Fatalf("DNS proxy read %q from %v: %v", buf[:n], from, err)
		}
	})
}
