package capture

import (
	"fmt"
	"strings"
)

// Chain names, as Istio names them, so what a learner sees here matches a real cluster.
const (
	ChainInbound    = "ISTIO_INBOUND"     // inbound TCP: which ports the sidecar sees
	ChainInRedirect = "ISTIO_IN_REDIRECT" // REDIRECT to the inbound capture port
	ChainOutput     = "ISTIO_OUTPUT"      // locally generated traffic: what is captured
	ChainRedirect   = "ISTIO_REDIRECT"    // REDIRECT to the outbound capture port
	ChainOutputDNS  = "ISTIO_OUTPUT_DNS"  // DNS to the agent's DNS proxy
)

// TableNAT is the only table the capture rules use.
const TableNAT = "nat"

// loopback is where the proxy admin and app-to-app traffic live; never captured.
const loopback = "127.0.0.1/32"

// Rule is one rendered rule with its chain and comment, for the dashboard to explain.
// Spec is the rule's matches and target as iptables takes them ("-p tcp -j RETURN"),
// without the comment.
type Rule struct{ Table, Chain, Spec, Comment string }

// Line renders the rule as an iptables-restore line, with the comment match placed
// before the target, where iptables-save prints it.
func (r Rule) Line() string {
	matches, target, _ := strings.Cut(r.Spec, "-j ")
	return fmt.Sprintf("-A %s %s-m comment --comment %q -j %s", r.Chain, matches, r.Comment, target)
}

// Chains returns the user-defined chains the rules use, in the order Istio creates them.
func (c Config) Chains() []string {
	chains := []string{ChainInbound, ChainRedirect, ChainInRedirect, ChainOutput}
	if c.DNSCapturePort != 0 {
		chains = append(chains, ChainOutputDNS)
	}
	return chains
}

// Rules returns the nat rules in Istio's order (tools/istio-iptables capture.Run, REDIRECT
// mode, all inbound ports, all outbound addresses, capture-all DNS). c must be valid.
func (c Config) Rules() []Rule {
	var rs []Rule
	add := func(chain, comment, format string, args ...any) {
		rs = append(rs, Rule{Table: TableNAT, Chain: chain, Spec: fmt.Sprintf(format, args...), Comment: comment})
	}
	dns := c.DNSCapturePort != 0

	add(ChainRedirect, "outbound TCP goes to the virtualOutbound listener of the sidecar",
		"-p tcp -j REDIRECT --to-ports %d", c.OutboundCapturePort)
	add(ChainInRedirect, "inbound TCP goes to the virtualInbound listener of the sidecar",
		"-p tcp -j REDIRECT --to-ports %d", c.InboundCapturePort)

	// Inbound: every TCP port except the excluded ones.
	add("PREROUTING", "inbound TCP is considered for capture",
		"-p tcp -j %s", ChainInbound)
	for _, p := range c.ExcludeInboundPorts {
		add(ChainInbound, fmt.Sprintf("port %d is excluded from inbound capture: it reaches the agent or proxy directly", p),
			"-p tcp --dport %d -j RETURN", p)
	}
	add(ChainInbound, "all other inbound TCP goes to the sidecar",
		"-p tcp -j %s", ChainInRedirect)

	// Outbound.
	add("OUTPUT", "traffic the pod sends is considered for capture",
		"-j %s", ChainOutput)
	add(ChainOutput, fmt.Sprintf("inbound passthrough from the sidecar to the app comes from %s: do not capture it again", c.InboundPassthroughSource),
		"-o lo -s %s/32 -j RETURN", c.InboundPassthroughSource)
	if dns {
		// Departure: Istio lets the proxy user's DNS through to kube-dns (the
		// nameserver of the pod's resolv.conf); a lab pod's resolv.conf names the
		// host's nameserver, which its network cannot reach, so the commands of the
		// istio-proxy container (meshlab exec -c istio-proxy, as uid 1337) resolve
		// Services through the agent's DNS proxy, which never forwards.
		for _, proto := range []string{"udp", "tcp"} {
			add(ChainOutput, fmt.Sprintf("DNS over %s of the proxy user (uid %d: commands in istio-proxy) goes to the DNS proxy of the agent, as kube-dns", strings.ToUpper(proto), c.ProxyUID),
				"-p %s --dport 53 -m owner --uid-owner %d -j REDIRECT --to-ports %d", proto, c.ProxyUID, c.DNSCapturePort)
		}
	}
	for _, owner := range []struct{ kind, id string }{{"uid", fmt.Sprint(c.ProxyUID)}, {"gid", fmt.Sprint(c.ProxyGID)}} {
		// The app calling itself through a service: the sidecar's outbound leg comes back over lo.
		selfPort := ""
		if dns && owner.kind == "uid" {
			selfPort = "! --dport 53 " // the agent's own DNS lookups stay out of inbound
		}
		add(ChainOutput, fmt.Sprintf("the sidecar (%s %s) calling its own pod IP goes back through inbound capture", owner.kind, owner.id),
			"-o lo ! -d %s -p tcp %s-m owner --%s-owner %s -j %s", loopback, selfPort, owner.kind, owner.id, ChainInRedirect)
		if dns {
			add(ChainOutput, fmt.Sprintf("the app (not %s %s) talking to itself over loopback is not captured, except DNS", owner.kind, owner.id),
				"-o lo -p tcp ! --dport 53 -m owner ! --%s-owner %s -j RETURN", owner.kind, owner.id)
		} else {
			add(ChainOutput, fmt.Sprintf("the app (not %s %s) talking to itself over loopback is not captured", owner.kind, owner.id),
				"-o lo -m owner ! --%s-owner %s -j RETURN", owner.kind, owner.id)
		}
		add(ChainOutput, fmt.Sprintf("traffic of the sidecar itself (%s %s) is never captured, or it would loop", owner.kind, owner.id),
			"-m owner --%s-owner %s -j RETURN", owner.kind, owner.id)
	}
	if dns {
		add(ChainOutput, "DNS from the app goes to the DNS proxy of the agent",
			"-j %s", ChainOutputDNS)
		add(ChainOutputDNS, "DNS over TCP goes to the DNS proxy of the agent",
			"-p tcp --dport 53 -j REDIRECT --to-ports %d", c.DNSCapturePort)
		add(ChainOutputDNS, "DNS over UDP goes to the DNS proxy of the agent",
			"-p udp --dport 53 -j REDIRECT --to-ports %d", c.DNSCapturePort)
	}
	add(ChainOutput, "traffic to 127.0.0.1 (the proxy admin, ports of the app itself) is not captured",
		"-d %s -j RETURN", loopback)
	add(ChainOutput, "all other outbound TCP goes to the sidecar",
		"-j %s", ChainRedirect)
	return rs
}

// Render returns the iptables-restore input for the pod's nat table. Applied without
// --noflush it replaces the whole table, so applying it twice leaves the same rules.
// The output depends only on c; c must be valid.
func (c Config) Render() string {
	var b strings.Builder
	b.WriteString("# meshlab sidecar capture rules (iptables-restore input)\n")
	b.WriteString("*nat\n")
	for _, builtin := range []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"} {
		fmt.Fprintf(&b, ":%s ACCEPT [0:0]\n", builtin)
	}
	for _, chain := range c.Chains() {
		fmt.Fprintf(&b, ":%s - [0:0]\n", chain)
	}
	for _, r := range c.Rules() {
		b.WriteString(r.Line())
		b.WriteByte('\n')
	}
	b.WriteString("COMMIT\n")
	return b.String()
}
