package inpod

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/origdst"
	"github.com/meshlab/meshlab/internal/testutil"
	"github.com/meshlab/meshlab/netns"
	"github.com/meshlab/meshlab/netns/capture"
)

// pods are an ambient pod (a) and a plain client pod (b) on one node bridge.
type pods struct {
	a, b     string
	aIP, bIP netip.Addr
	gateway  netip.Addr
}

func setupPods(t *testing.T) pods {
	t.Helper()
	unique := testutil.UniqueName(t)
	prefix := "ml-" + unique + "-"
	gw := netip.MustParsePrefix("10.244.0.1/16")
	node := netns.NodeConfig{Namespace: prefix + "node", Bridge: "mlbr0", Gateway: gw}
	p := pods{a: prefix + "a", b: prefix + "b", gateway: gw.Addr(),
		aIP: netip.MustParseAddr("10.244.0.5"), bIP: netip.MustParseAddr("10.244.0.6")}
	t.Cleanup(func() {
		for _, n := range []string{p.a, p.b, node.Namespace} {
			if netns.Exists(n) {
				if err := netns.Delete(n); err != nil {
					t.Errorf("delete %s: %v", n, err)
				}
			}
		}
	})
	if err := netns.SetupNode(node); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []struct {
		ns, name string
		ip       netip.Addr
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
	return p
}

var counters = regexp.MustCompile(`^\[\d+:\d+\] `)

// saved is Save without comment lines and counters.
func saved(t *testing.T, ns string) string {
	t.Helper()
	out, err := Save(ns, IPv4)
	if err != nil {
		t.Fatalf("Save: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, counters.ReplaceAllString(l, ""))
		}
	}
	return strings.Join(lines, "\n")
}

// otherRule is a rule of someone else in the pod's nat table (the lab's cluster-DNS rule
// is one): installing and removing the in-pod rules must leave it alone.
const otherRule = `-A OUTPUT -p udp -m udp --dport 53 -m comment --comment "cluster DNS" -j REDIRECT --to-ports 53`

func TestInstallRemoveRealKernel(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := setupPods(t)
	if _, err := runIn(p.a, "*nat\n"+otherRule+"\nCOMMIT\n", "iptables-restore", "--noflush"); err != nil {
		t.Fatal(err)
	}
	before := tables(t, p.a)
	c := DefaultConfig()
	a := NewApplier()
	if err := a.Install(p.a, c); err != nil {
		t.Fatalf("Install: %v", err)
	}
	got := tables(t, p.a)
	for _, r := range c.Rules(IPv4) {
		if !strings.Contains(got, fmt.Sprintf("--comment %q", r.Comment)) {
			t.Errorf("iptables-save lacks %s %s %q:\n%s", r.Table, r.Chain, r.Spec, got)
		}
	}
	if !strings.Contains(got, otherRule) {
		t.Errorf("Install removed the rule already there:\n%s", got)
	}
	// The jump to istio-cni's chain comes first: the pod's queries go to the node proxy's
	// DNS port, and the rule already there sees only what the chain lets through.
	if jump := strings.Index(got, "-A OUTPUT -m comment --comment \"connections the pod opens"); jump < 0 || jump > strings.Index(got, otherRule) {
		t.Errorf("the jump to %s is not ahead of the rule already in nat OUTPUT:\n%s", ChainOutput, got)
	}
	routing, err := Routing(p.a, c.RouteTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"32764:", "fwmark 0x111/0xfff lookup 100", "local default dev lo"} {
		if !strings.Contains(routing, want) {
			t.Errorf("routing lacks %q:\n%s", want, routing)
		}
	}
	if err := a.Install(p.a, c); err != nil {
		t.Fatalf("second Install: %v", err)
	}
	if again := tables(t, p.a); again != got {
		t.Errorf("installing twice changed the tables:\n%s\n---\n%s", got, again)
	}
	if again, _ := Routing(p.a, c.RouteTable); again != routing {
		t.Errorf("installing twice changed the routing:\n%s\n---\n%s", routing, again)
	}
	if err := a.Remove(p.a, c); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tables(t, p.a); after != before {
		t.Errorf("Remove left the tables different from before Install:\n%s\n---\n%s", before, after)
	}
	if after, _ := Routing(p.a, c.RouteTable); strings.Contains(after, "fwmark") || strings.Contains(after, "local default") {
		t.Errorf("Remove left routing:\n%s", after)
	}
	if err := a.Remove(p.a, c); err != nil {
		t.Errorf("second Remove: %v", err)
	}
}

// TestInstallNewRealKernel: on a new pod, InstallNew's one iptables-restore (the lab's
// cluster-DNS rules ahead of istio-cni's) leaves the same tables and routing as the lab's
// rules restored first (as the lab restores them alone) and Install after them (an
// iptables-save, then a restore), and Remove takes out istio-cni's alone.
// chainCounters are the packet counters of a built-in chain's policy line, which stray
// packets on the node's bridge move.
var chainCounters = regexp.MustCompile(`(?m)^(:\S+ \S+) \[\d+:\d+\]$`)

// tables is saved with the chains' counters zeroed, to compare two namespaces.
func tables(t *testing.T, ns string) string {
	t.Helper()
	return chainCounters.ReplaceAllString(saved(t, ns), "$1 [0:0]")
}

func TestInstallNewRealKernel(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := setupPods(t)
	podRule := capture.KubeDNSRules(53)
	c := DefaultConfig()
	a := NewApplier()
	if _, err := runIn(p.b, podRule, "iptables-restore"); err != nil {
		t.Fatal(err)
	}
	before := tables(t, p.b)
	if err := a.Install(p.b, c); err != nil {
		t.Fatalf("Install: %v", err)
	}
	if err := a.InstallNew(p.a, c, podRule); err != nil {
		t.Fatalf("InstallNew: %v", err)
	}
	if got, want := tables(t, p.a), tables(t, p.b); got != want {
		t.Errorf("InstallNew's tables differ from the pod rule and Install's:\n%s\n---\n%s", got, want)
	}
	got, err := Routing(p.a, c.RouteTable)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := Routing(p.b, c.RouteTable); got != want {
		t.Errorf("InstallNew's routing differs from Install's:\n%s\n---\n%s", got, want)
	}
	if err := a.Remove(p.a, c); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if after := tables(t, p.a); after != before {
		t.Errorf("Remove after InstallNew left something else than the pod's rule:\n%s\n---\n%s", after, before)
	}
}

func listen(t *testing.T, ns, addr string) *net.TCPListener {
	t.Helper()
	var ln net.Listener
	if err := netns.Do(ns, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.(*net.TCPListener)
}

// accept takes one connection and returns its original destination; ErrNotRedirected
// when no rule rewrote it.
func accept(t *testing.T, ln *net.TCPListener) (netip.AddrPort, error) {
	t.Helper()
	_ = ln.SetDeadline(time.Now().Add(5 * time.Second))
	c, err := ln.AcceptTCP()
	if err != nil {
		return netip.AddrPort{}, err
	}
	defer c.Close()
	return origdst.OriginalDst(c)
}

// checkNotRedirected accepts one connection on ln, dialled to addr, and asserts that no
// rule rewrote its destination.
func checkNotRedirected(t *testing.T, ln *net.TCPListener, addr netip.AddrPort) {
	t.Helper()
	got, err := accept(t, ln)
	if errors.Is(err, origdst.ErrNotRedirected) || (err == nil && got == addr) {
		return
	}
	t.Fatalf("accepted on %s with original destination %v (%v), want %s, not redirected", ln.Addr(), got, err, addr)
}

// dial connects from ns, with SO_MARK mark when it is not 0 (as the node proxy's sockets).
func dial(t *testing.T, ns string, addr netip.AddrPort, mark int) error {
	t.Helper()
	return netns.Do(ns, func() error {
		d := net.Dialer{Timeout: 5 * time.Second}
		if mark != 0 {
			d.Control = func(_, _ string, rc syscall.RawConn) error {
				var serr error
				if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, mark) }); err != nil {
					return err
				}
				return serr
			}
		}
		c, err := d.DialContext(context.Background(), "tcp", addr.String())
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return err
	})
}

// TestRedirectBehaviour proves on real traffic what the rules say: outbound TCP lands on
// 15001, inbound on 15006, 15008 is not redirected, the proxy's marked packets are left
// alone, and after Remove nothing is redirected.
func TestRedirectBehaviour(t *testing.T) {
	testutil.RequireRoot(t) // not parallel: its subtests share listeners and run in order
	p := setupPods(t)
	c := DefaultConfig()
	a := NewApplier()
	if err := a.Install(p.a, c); err != nil {
		t.Fatal(err)
	}
	// The node proxy's listeners, wildcard in the pod's namespace as ztunnel binds them.
	outbound := listen(t, p.a, fmt.Sprintf("0.0.0.0:%d", c.OutboundPort))
	inbound := listen(t, p.a, fmt.Sprintf("0.0.0.0:%d", c.InboundPlaintextPort))
	tunnel := listen(t, p.a, fmt.Sprintf("0.0.0.0:%d", c.InboundTunnelPort))
	unused := netip.AddrPortFrom(p.gateway, 9999) // nothing listens there: a dial that is not redirected is refused

	// Subtests run in order: each accepts the one connection it made.
	t.Run("outbound TCP lands on 15001 with its original destination", func(t *testing.T) {
		if err := dial(t, p.a, unused, 0); err != nil {
			t.Fatalf("dial %s: %v", unused, err)
		}
		if got, err := accept(t, outbound); err != nil || got != unused {
			t.Fatalf("accepted on 15001 with original destination %v (%v), want %s", got, err, unused)
		}
	})
	t.Run("inbound TCP lands on 15006 with its original destination", func(t *testing.T) {
		want := netip.AddrPortFrom(p.aIP, 9080)
		if err := dial(t, p.b, want, 0); err != nil {
			t.Fatalf("dial %s from the other pod: %v", want, err)
		}
		if got, err := accept(t, inbound); err != nil || got != want {
			t.Fatalf("accepted on 15006 with original destination %v (%v), want %s", got, err, want)
		}
	})
	t.Run("inbound to 15008 is not redirected", func(t *testing.T) {
		to := netip.AddrPortFrom(p.aIP, c.InboundTunnelPort)
		if err := dial(t, p.b, to, 0); err != nil {
			t.Fatal(err)
		}
		checkNotRedirected(t, tunnel, to)
	})
	t.Run("the node proxy's marked dials are not redirected", func(t *testing.T) {
		if err := dial(t, p.a, unused, int(c.Mark)); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("marked dial to %s = %v, want refused by the gateway (not redirected)", unused, err)
		}
	})
	t.Run("the app calling itself on 127.0.0.1 is not redirected", func(t *testing.T) {
		ln := listen(t, p.a, "127.0.0.1:0")
		to := ln.Addr().(*net.TCPAddr).AddrPort()
		if err := dial(t, p.a, to, 0); err != nil {
			t.Fatal(err)
		}
		checkNotRedirected(t, ln, to)
	})
	t.Run("counters count the redirected connections", func(t *testing.T) {
		out, err := Save(p.a, IPv4)
		if err != nil {
			t.Fatal(err)
		}
		for _, port := range []uint16{c.OutboundPort, c.InboundPlaintextPort} {
			re := regexp.MustCompile(`(?m)^\[([1-9]\d*):\d+\] -A ISTIO_(OUTPUT|PRERT) .*--to-ports ` + fmt.Sprint(port) + `$`)
			if !re.MatchString(out) {
				t.Errorf("no rule redirecting to %d counted a packet:\n%s", port, out)
			}
		}
	})
	t.Run("after Remove nothing is redirected", func(t *testing.T) {
		if err := a.Remove(p.a, c); err != nil {
			t.Fatal(err)
		}
		if err := dial(t, p.a, unused, 0); !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("dial to %s after Remove = %v, want refused (not redirected)", unused, err)
		}
	})
}

// listings is everything a learner reads of a pod's rules, from both iptables and nft:
// iptables-save with counters, iptables -L -v of each table, nft's whole ruleset (with
// each rule's expressions) and the policy routing, for family f.
func listings(t *testing.T, ns string, f Family, table int) string {
	t.Helper()
	save, list := "iptables-save", "iptables"
	if f == IPv6 {
		save, list = "ip6tables-save", "ip6tables"
	}
	var b strings.Builder
	out, err := runIn(ns, "", save, "-c")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(l, "#") { // the time of the save
			b.WriteString(l + "\n")
		}
	}
	for _, tbl := range Tables {
		out, err := runIn(ns, "", list, "-t", tbl, "-L", "-v", "-n", "-x")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
	}
	if _, err := exec.LookPath("nft"); err == nil { // nft's view of the same objects, where installed
		out, err = runIn(ns, "", "nft", "list", "ruleset")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
	}
	routing, err := Routing(ns, table)
	if err != nil {
		t.Fatal(err)
	}
	return b.String() + routing
}

// TestInstallNewReplayRealKernel holds the replay of a new pod's rules (replay.go) to
// iptables-restore: a second new pod gets its rules without a process, and everything
// iptables and nft show of them, counters included, is what iptables-restore made in the
// first (both families); the replayed rules redirect and count real traffic.
func TestInstallNewReplayRealKernel(t *testing.T) {
	testutil.RequireRoot(t)
	t.Parallel()
	p := setupPods(t)
	var plain []string // namespaces with only lo, which has IPv6 (the pods' links have not)
	for _, n := range []string{"first", "second"} {
		ns := "ml-" + testutil.UniqueName(t) + "-" + n
		if err := netns.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = netns.Delete(ns) })
		if _, err := runIn(ns, "", "ip", "link", "set", "lo", "up"); err != nil {
			t.Fatal(err)
		}
		plain = append(plain, ns)
	}
	c := DefaultConfig()
	c.IPv6 = true
	podRule := capture.KubeDNSRules(53)
	a := NewApplier().(kernelApplier)
	for _, ns := range plain {
		if err := a.InstallNew(ns, c, podRule); err != nil {
			t.Fatalf("InstallNew in %s: %v", ns, err)
		}
	}
	replayed := func(f Family) int {
		text := c.Render(f)
		if f == IPv4 {
			text = podRule + text
		}
		if e := a.replays.m[replayKey{f, text}]; e != nil && e.msgs != nil {
			return e.replayed
		}
		return 0
	}
	for _, f := range c.Families() {
		if n := replayed(f); n != 1 {
			t.Fatalf("%s: the second pod's rules were not replayed (%d replays)", f, n)
		}
		if got, want := listings(t, plain[1], f, c.RouteTable), listings(t, plain[0], f, c.RouteTable); got != want {
			t.Errorf("%s: the replayed pod's rules differ from iptables-restore's:\n%s\n---\n%s", f, got, want)
		}
	}

	c.IPv6 = false
	if err := a.InstallNew(p.a, c, podRule); err != nil {
		t.Fatalf("InstallNew in a pod: %v", err)
	}
	if n := replayed(IPv4); n != 2 {
		t.Fatalf("the pod's rules were not replayed (%d replays)", n)
	}
	outbound := listen(t, p.a, fmt.Sprintf("0.0.0.0:%d", c.OutboundPort))
	unused := netip.AddrPortFrom(p.gateway, 9999)
	if err := dial(t, p.a, unused, 0); err != nil {
		t.Fatalf("dial %s: %v", unused, err)
	}
	if got, err := accept(t, outbound); err != nil || got != unused {
		t.Fatalf("accepted on %d with original destination %v (%v), want %s", c.OutboundPort, got, err, unused)
	}
	out, err := Save(p.a, IPv4)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{
		`(?m)^\[[1-9]\d*:\d+\] -A ISTIO_OUTPUT .*--to-ports 15001$`, // a rule's counter
		`(?m)^:POSTROUTING ACCEPT \[[1-9]\d*:\d+\]$`,                // a base chain's policy (nat's)
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("no %s in the replayed pod's counters:\n%s", re, out)
		}
	}
}
