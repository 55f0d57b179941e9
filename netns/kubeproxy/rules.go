package kubeproxy

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strings"
)

// Chain names, as kube-proxy names them.
const (
	ChainServices    = "KUBE-SERVICES"    // every VIP:port, in nat and filter
	ChainMarkMasq    = "KUBE-MARK-MASQ"   // marks a connection for masquerading
	ChainPostrouting = "KUBE-POSTROUTING" // masquerades marked connections
	serviceChainPfx  = "KUBE-SVC-"
	endpointChainPfx = "KUBE-SEP-"
)

// Tables the rules use.
const (
	TableNAT    = "nat"
	TableFilter = "filter"
)

// masqMark is kube-proxy's default --iptables-masquerade-bit 14.
const masqMark = "0x4000"

// Comments kube-proxy puts on its jump rules.
const (
	commentPortals     = "kubernetes service portals"
	commentPostrouting = "kubernetes postrouting rules"
	commentMasquerade  = "kubernetes service traffic requiring SNAT"
)

// Rule is one rendered rule. Spec is its matches and target as iptables takes them,
// without the comment; Line renders it with the comment first, where kube-proxy writes it.
type Rule struct{ Table, Chain, Comment, Spec string }

// Line renders the rule as an iptables-restore line.
func (r Rule) Line() string {
	comment := r.Comment
	if strings.ContainsAny(comment, " \"") {
		comment = fmt.Sprintf("%q", comment)
	}
	return fmt.Sprintf("-A %s -m comment --comment %s %s", r.Chain, comment, r.Spec)
}

// ServiceChain returns the KUBE-SVC chain of a service port: kube-proxy's
// servicePortChainName, the first 16 base32 characters of sha256("ns/name:port" + protocol).
func ServiceChain(s ServicePort) string {
	return serviceChainPfx + hash(s.String()+string(s.protocol()))
}

// EndpointChain returns the KUBE-SEP chain of one endpoint of a service port: kube-proxy's
// servicePortEndpointChainName, hashing the endpoint "ip:port" too.
func EndpointChain(s ServicePort, i int) string {
	return endpointChainPfx + hash(s.String()+string(s.protocol())+s.Endpoints[i].String())
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:16]
}

// probability returns 1/n as kube-proxy prints it.
func probability(n int) string { return fmt.Sprintf("%0.10f", 1.0/float64(n)) }

// Chains returns the user-defined chains of table, in the order they are declared.
func (c Config) Chains(table string) []string {
	if table == TableFilter {
		return []string{ChainServices}
	}
	chains := []string{ChainServices, ChainPostrouting, ChainMarkMasq}
	for _, s := range c.Services {
		if len(s.Endpoints) == 0 {
			continue
		}
		chains = append(chains, ServiceChain(s))
		for i := range s.Endpoints {
			chains = append(chains, EndpointChain(s, i))
		}
	}
	return chains
}

// Rules returns the nat and filter rules in kube-proxy's order (syncProxyRules with
// --masquerade-all: every connection to a VIP is masqueraded). c must be valid.
func (c Config) Rules() []Rule {
	var nat, filter []Rule
	addNAT := func(chain, comment, format string, args ...any) {
		nat = append(nat, Rule{Table: TableNAT, Chain: chain, Comment: comment, Spec: fmt.Sprintf(format, args...)})
	}
	addFilter := func(chain, comment, format string, args ...any) {
		filter = append(filter, Rule{Table: TableFilter, Chain: chain, Comment: comment, Spec: fmt.Sprintf(format, args...)})
	}

	// Jumps from the built-in chains (kube-proxy's iptablesJumpChains).
	addFilter("FORWARD", commentPortals, "-m conntrack --ctstate NEW -j %s", ChainServices)
	addFilter("OUTPUT", commentPortals, "-m conntrack --ctstate NEW -j %s", ChainServices)
	addNAT("OUTPUT", commentPortals, "-j %s", ChainServices)
	addNAT("PREROUTING", commentPortals, "-j %s", ChainServices)
	addNAT("POSTROUTING", commentPostrouting, "-j %s", ChainPostrouting)

	// Masquerading (kube-proxy writes these three without comments).
	addNAT(ChainPostrouting, "connections not marked for SNAT leave untouched",
		"-m mark ! --mark %s/%s -j RETURN", masqMark, masqMark)
	addNAT(ChainPostrouting, "clear the mark so a re-routed packet is not masqueraded twice",
		"-j MARK --xor-mark %s", masqMark)
	addNAT(ChainPostrouting, commentMasquerade, "-j MASQUERADE --random-fully")
	addNAT(ChainMarkMasq, "mark the connection for SNAT in KUBE-POSTROUTING",
		"-j MARK --or-mark %s", masqMark)

	for _, s := range c.Services {
		name, proto := s.String(), s.protocol()
		dst := fmt.Sprintf("-m %s -p %s -d %s/32 --dport %d", proto, proto, s.VIP, s.Port)
		if len(s.Endpoints) == 0 {
			addFilter(ChainServices, name+" has no endpoints", "%s -j REJECT", dst)
			continue
		}
		svc := ServiceChain(s)
		clusterIP := name + " cluster IP"
		addNAT(ChainServices, clusterIP, "%s -j %s", dst, svc)
		// --masquerade-all: the pods share one bridge, so the endpoint would answer the
		// client directly and the reply would miss the node's conntrack (no un-DNAT).
		addNAT(svc, clusterIP, "%s -j %s", dst, ChainMarkMasq)
		for i, ep := range s.Endpoints {
			comment := fmt.Sprintf("%s -> %s", name, ep)
			if left := len(s.Endpoints) - i; left > 1 {
				addNAT(svc, comment, "-m statistic --mode random --probability %s -j %s", probability(left), EndpointChain(s, i))
			} else {
				addNAT(svc, comment, "-j %s", EndpointChain(s, i))
			}
		}
		for i, ep := range s.Endpoints {
			sep := EndpointChain(s, i)
			addNAT(sep, name, "-s %s/32 -j %s", ep.Addr(), ChainMarkMasq)
			addNAT(sep, name, "-m %s -p %s -j DNAT --to-destination %s", proto, proto, ep)
		}
	}
	return append(filter, nat...)
}

// Render returns the filter and nat tables as iptables-restore input. Without --noflush,
// restoring it replaces both tables: the node namespace is meshlab's own, and re-applying
// after every change is how kube-proxy's full sync works too. c must be valid.
func (c Config) Render() string {
	var b strings.Builder
	rules := c.Rules()
	for _, table := range []string{TableFilter, TableNAT} {
		fmt.Fprintf(&b, "*%s\n", table)
		for _, ch := range c.Chains(table) {
			fmt.Fprintf(&b, ":%s - [0:0]\n", ch)
		}
		for _, r := range rules {
			if r.Table == table {
				b.WriteString(r.Line())
				b.WriteByte('\n')
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
