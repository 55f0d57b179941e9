package inpod

import (
	"fmt"
	"slices"
	"strings"
)

// Chain names, istio-cni's, so what a learner sees here matches a real ambient pod.
const (
	ChainPrerouting = "ISTIO_PRERT"  // packets arriving at the pod
	ChainOutput     = "ISTIO_OUTPUT" // packets the pod sends
)

// Tables, in the order istio-cni writes them.
var Tables = []string{"mangle", "nat", "raw"}

// Family is the IP family a rule set is rendered for: iptables or ip6tables.
type Family int

// The families.
const (
	IPv4 Family = iota
	IPv6
)

func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// Families are the families c installs rules for.
func (c Config) Families() []Family {
	if c.IPv6 {
		return []Family{IPv4, IPv6}
	}
	return []Family{IPv4}
}

// loopback is the family's localhost, which the rules never redirect.
func (f Family) loopback() string {
	if f == IPv6 {
		return "::1/128"
	}
	return "127.0.0.1/32"
}

// Rule is one rendered rule with its table, chain and comment, for `describe pod` to
// explain. Spec is the rule's matches and target as istio-cni writes them, without the
// comment.
type Rule struct{ Table, Chain, Spec, Comment string }

// Line renders the rule as an iptables-restore line with the comment match placed before
// the target, where iptables-save prints it.
func (r Rule) Line() string { return r.line("-A") }

func (r Rule) line(op string) string {
	matches, target, _ := strings.Cut(r.Spec, "-j ")
	chain := r.Chain
	if op == "-I" {
		chain += " 1"
	}
	return fmt.Sprintf("%s %s %s-m comment --comment %q -j %s", op, chain, matches, r.Comment, target)
}

// installLine renders the rule for Render: a jump from a built-in chain is inserted at
// the chain's head (-I CHAIN 1), a rule of istio-cni's own chains appended. In a real pod
// the built-in chains are empty when istio-cni appends its jumps; a lab pod's may
// already hold the lab's stand-in for what lies beyond the pod (the cluster-DNS redirect,
// kube-proxy's part), which must see only what istio-cni's chains let through, as the
// node sees it.
func (r Rule) installLine() string {
	if !r.Builtin() {
		return r.Line()
	}
	return r.line("-I")
}

// Builtin reports whether the rule sits in a built-in chain (a jump to istio-cni's chain).
func (r Rule) Builtin() bool { return r.Chain != ChainPrerouting && r.Chain != ChainOutput }

// Rules returns the rules for family f in istio-cni's order (cni/pkg/iptables
// AppendInpodRules, REDIRECT mode, no virtual interfaces, not an ingress pod). c must be
// valid.
func (c Config) Rules(f Family) []Rule {
	var rs []Rule
	add := func(table, chain, comment, format string, args ...any) {
		rs = append(rs, Rule{Table: table, Chain: chain, Spec: fmt.Sprintf(format, args...), Comment: comment})
	}
	mark := fmt.Sprintf("%#x/%#x", c.Mark, c.MarkMask)
	connMark := fmt.Sprintf("%#x/%#x", c.ConnMark, c.ConnMarkMask)
	lo := f.loopback()
	probe := c.HostProbeSource
	if f == IPv6 {
		probe = c.HostProbeSourceV6
	}
	dns := c.DNSPort != 0

	add("mangle", "PREROUTING", "packets arriving at the pod pass through the ambient chain", "-j %s", ChainPrerouting)
	add("mangle", "OUTPUT", "packets the pod sends pass through the ambient chain", "-j %s", ChainOutput)
	add("nat", "OUTPUT", "connections the pod opens are considered for redirection to the node proxy", "-j %s", ChainOutput)
	if dns {
		add("raw", "PREROUTING", "DNS answers arriving at the pod are considered for their conntrack zone", "-j %s", ChainPrerouting)
		add("raw", "OUTPUT", "DNS queries the pod sends are considered for their conntrack zone", "-j %s", ChainOutput)
	}
	add("nat", "PREROUTING", "connections arriving at the pod are considered for redirection to the node proxy", "-j %s", ChainPrerouting)

	add("mangle", ChainPrerouting, fmt.Sprintf("a packet the node proxy marked (%s) marks its connection %s so that replies go back to the proxy", mark, connMark),
		"-m mark --mark %s -j CONNMARK --set-xmark %s", mark, connMark)
	if probe.IsValid() {
		add("nat", ChainPrerouting, fmt.Sprintf("kubelet probes, SNATed to %s on the node, reach the app directly", probe),
			"-s %s -p tcp -m tcp -j ACCEPT", probe)
		add("nat", ChainOutput, fmt.Sprintf("answers to kubelet probes (to %s) are not redirected", probe),
			"-d %s -p tcp -m tcp -j ACCEPT", probe)
	}
	add("nat", ChainPrerouting, fmt.Sprintf("inbound TCP not from the node proxy goes to its plaintext port %d, except its tunnel port %d", c.InboundPlaintextPort, c.InboundTunnelPort),
		"! -d %s -p tcp ! --dport %d -m mark ! --mark %s -j REDIRECT --to-ports %d", lo, c.InboundTunnelPort, mark, c.InboundPlaintextPort)
	add("mangle", ChainOutput, fmt.Sprintf("a packet of a connection marked %s gets that mark back, so it is routed to lo and the node proxy", connMark),
		"-m connmark --mark %s -j CONNMARK --restore-mark --nfmask %#x --ctmask %#x", connMark, c.RestoreMask, c.RestoreMask)
	if dns {
		add("nat", ChainOutput, fmt.Sprintf("DNS over UDP to a resolver off the pod goes to the DNS proxy of the node proxy on %d", c.DNSPort),
			"! -o lo -p udp -m mark ! --mark %s -m udp --dport 53 -j REDIRECT --to-port %d", mark, c.DNSPort)
		add("nat", ChainOutput, fmt.Sprintf("DNS over TCP goes to the DNS proxy of the node proxy on %d", c.DNSPort),
			"! -d %s -p tcp --dport 53 -m mark ! --mark %s -j REDIRECT --to-ports %d", lo, mark, c.DNSPort)
		add("raw", ChainOutput, "DNS queries of the node proxy get conntrack zone 1, apart from the redirected queries of the app",
			"-p udp -m mark --mark %s -m udp --dport 53 -j CT --zone 1", mark)
		add("raw", ChainPrerouting, "DNS answers not for the node proxy get conntrack zone 1, matching its queries",
			"-p udp -m mark ! --mark %s -m udp --sport 53 -j CT --zone 1", mark)
	}
	add("nat", ChainOutput, fmt.Sprintf("TCP of a connection the node proxy made (mark %s) is not redirected", connMark),
		"-p tcp -m mark --mark %s -j ACCEPT", connMark)
	add("nat", ChainOutput, "the app calling its own pod IP over lo is not redirected",
		"! -d %s -o lo -j ACCEPT", lo)
	add("nat", ChainOutput, fmt.Sprintf("all other outbound TCP not from the node proxy goes to its outbound port %d", c.OutboundPort),
		"! -d %s -p tcp -m mark ! --mark %s -j REDIRECT --to-ports %d", lo, mark, c.OutboundPort)
	return rs
}

// chains returns the user chains of table used by rules, in the order of their first rule
// (the order istio-cni's builder declares them).
func chains(rules []Rule, table string) []string {
	var cs []string
	for _, r := range rules {
		if r.Table == table && !r.Builtin() && !slices.Contains(cs, r.Chain) {
			cs = append(cs, r.Chain)
		}
	}
	return cs
}

// Render returns the iptables-restore --noflush input that installs the rules of family f
// in a namespace that does not have them. The output depends only on c; c must be valid.
func (c Config) Render(f Family) string { return c.render(f, false) }

// RenderReplace is Render for a namespace that has the rules already: in the same
// transaction it empties istio-cni's chains and deletes the jumps to them before adding
// everything again, so the pod is never without its rules.
func (c Config) RenderReplace(f Family) string { return c.render(f, true) }

func (c Config) render(f Family, replace bool) string {
	rules := c.Rules(f)
	var b strings.Builder
	fmt.Fprintf(&b, "# meshlab in-pod rules of the node proxy, %s (iptables-restore --noflush input)\n", f)
	for _, table := range Tables {
		fmt.Fprintf(&b, "*%s\n", table)
		for _, chain := range chains(rules, table) {
			fmt.Fprintf(&b, ":%s - [0:0]\n", chain) // created, or emptied when it exists
		}
		for _, r := range rules {
			if replace && r.Table == table && r.Builtin() {
				b.WriteString(r.line("-D"))
				b.WriteByte('\n')
			}
		}
		for _, r := range rules {
			if r.Table == table {
				b.WriteString(r.installLine())
				b.WriteByte('\n')
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// RenderRemove returns the iptables-restore --noflush input that removes what Render
// installed: the jumps to istio-cni's chains, then the chains.
func (c Config) RenderRemove(f Family) string {
	rules := c.Rules(f)
	var b strings.Builder
	fmt.Fprintf(&b, "# meshlab in-pod rules of the node proxy removed, %s (iptables-restore --noflush input)\n", f)
	for _, table := range Tables {
		fmt.Fprintf(&b, "*%s\n", table)
		for _, r := range rules {
			if r.Table == table && r.Builtin() {
				b.WriteString(r.line("-D"))
				b.WriteByte('\n')
			}
		}
		for _, chain := range chains(rules, table) {
			fmt.Fprintf(&b, "-F %s\n-X %s\n", chain, chain)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
