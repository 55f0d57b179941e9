package lab

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/controlplane/model"
	"github.com/meshlab/meshlab/dataplane/agent"
)

// Cluster DNS for pods without a sidecar, as kube-dns (CoreDNS) serves every Kubernetes
// pod. A pod with a sidecar resolves through its agent's DNS proxy (Istio's DNS capture);
// one without gets the lab's kube-dns: the lab process listens on 127.0.0.1:53 inside that
// pod's network namespace (a socket belongs to the namespace it was made in), and a nat
// rule sends the pod's queries there whatever nameserver its resolv.conf names, so a host
// resolver on 127.0.0.53 works as well as any other. Answers come from the lab's Services
// alone, as kube-dns answers (ServiceEntry hosts are Istio's DNS proxy's, not kube-dns's);
// nothing is ever forwarded.

// kubeDNSPort is where the cluster DNS listens in a pod without a sidecar.
const kubeDNSPort = 53

// kubeDNSTTL is the TTL of kube-dns's answers (CoreDNS's kubernetes plugin default).
const kubeDNSTTL = 5

// kubeDNS answers for the lab's Services. It is safe for concurrent use.
type kubeDNS struct {
	mu    sync.RWMutex
	model *model.Model
	world map[string][]netip.Addr // the outside world's names (world.go)
	log   *slog.Logger
}

// setWorld makes the cluster DNS answer the outside world's names too, as CoreDNS
// answers them through its upstream resolver.
func (k *kubeDNS) setWorld(names map[string][]netip.Addr) {
	k.mu.Lock()
	k.world = names
	k.mu.Unlock()
}

func newKubeDNS(m *model.Model, log *slog.Logger) *kubeDNS {
	return &kubeDNS{model: m, log: log}
}

// update makes the DNS answer from m (after an apply).
func (k *kubeDNS) update(m *model.Model) {
	k.mu.Lock()
	k.model = m
	k.mu.Unlock()
}

// lookup resolves name as a pod of namespace ns would through its resolv.conf: the name as
// written when it is a service's FQDN, else with the search list kubelet writes
// (<ns>.svc.cluster.local, svc.cluster.local, cluster.local). The resolver of the pod may
// send the short name as is (its resolv.conf is the host's); expanding it here gives the
// answer the search list would have found.
func (k *kubeDNS) lookup(ns, name string) (netip.Addr, bool) {
	return k.lookupAlias(ns, name, 0)
}

// maxAliasChain bounds the ExternalName Services followed for one name (CoreDNS follows
// a chain of CNAMEs a few long, and a loop never ends).
const maxAliasChain = 8

func (k *kubeDNS) lookupAlias(ns, name string, depth int) (netip.Addr, bool) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	domain := "svc." + model.DefaultClusterDomain
	candidates := []string{name}
	if !strings.HasSuffix(name, "."+model.DefaultClusterDomain) {
		candidates = []string{
			name + "." + ns + "." + domain,
			name + "." + domain,
			name + "." + model.DefaultClusterDomain,
		}
	}
	k.mu.RLock()
	m, world := k.model, k.world
	k.mu.RUnlock()
	if a := world[name]; len(a) > 0 {
		return a[0], true // a name outside the cluster, as the upstream resolver answers it
	}
	for _, c := range candidates {
		// An ExternalName Service: CoreDNS answers its CNAME and the target's address.
		if target, ok := m.Aliases(ns)[c]; ok && depth < maxAliasChain {
			if a, ok := k.lookupAlias(ns, target, depth+1); ok {
				return a, true
			}
		}
	}
	for _, c := range candidates {
		rest, ok := strings.CutSuffix(c, "."+domain)
		if !ok {
			continue
		}
		svc, svcNS, ok := strings.Cut(rest, ".")
		if !ok || strings.Contains(svcNS, ".") {
			continue
		}
		for _, s := range m.Services {
			if s.Name == svc && s.Namespace == svcNS {
				return s.VIP, true
			}
		}
	}
	return netip.Addr{}, false
}

// handler is the DNS handler of a pod in namespace ns.
func (k *kubeDNS) handler(ns string) dns.Handler {
	return dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if err := w.WriteMsg(k.answer(ns, r)); err != nil {
			k.log.Debug("write cluster DNS answer", "err", err)
		}
	})
}

// answer is kube-dns's reply to r from a pod of namespace ns: an A record for a Service,
// NOERROR and no record for another type of a Service's name, NXDOMAIN otherwise.
func (k *kubeDNS) answer(ns string, r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case r.Opcode != dns.OpcodeQuery:
		m.SetRcode(r, dns.RcodeNotImplemented)
		return m
	case len(r.Question) != 1:
		m.SetRcode(r, dns.RcodeFormatError)
		return m
	}
	q := r.Question[0]
	vip, ok := k.lookup(ns, q.Name)
	if !ok {
		m.SetRcode(r, dns.RcodeNameError)
		return m
	}
	if q.Qtype == dns.TypeA && vip.Is4() {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: kubeDNSTTL},
			A:   vip.AsSlice(),
		})
	}
	return m
}

// serveKubeDNS gives pod, which has no sidecar, its cluster DNS: it listens on 127.0.0.1:53
// in the pod's namespace and serves there until the lab's servers stop or the pod is
// removed (podContext). The rules that send the pod's queries to it are
// capture.KubeDNSRules(kubeDNSPort), installed by the caller: an ambient pod's go in with
// its in-pod rules, in one iptables-restore (nodeagent.go).
func (l *Lab) serveKubeDNS(pod *model.Pod) error {
	ns := NamespaceName(l.opts.Name, pod.Key())
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(kubeDNSPort))
	sys := l.syscalls().ns
	pc, err := sys.ListenPacket(ns, "udp4", addr)
	if err != nil {
		return fmt.Errorf("listen for cluster DNS in %s: %w", ns, err)
	}
	ln, err := sys.Listen(ns, "tcp4", addr)
	if err != nil {
		pc.Close()
		return fmt.Errorf("listen for cluster DNS in %s: %w", ns, err)
	}
	l.servers.Add(1)
	go func() {
		defer l.servers.Done()
		if err := agent.ServeDNS(l.podContext(pod.Key()), pc, ln, l.kubeDNS.handler(pod.Namespace)); err != nil {
			l.log.Warn("cluster DNS stopped", "pod", pod.Key(), "err", err)
		}
	}()
	return nil
}
