// Package dns is ztunnel's DNS proxy in a pod (127.0.0.1:15053, where istio-cni's rules
// send the pod's queries): it answers for the hostnames of WDS Services, expanding a
// pod's short names as its search list would and preferring a service of the client's
// namespace, and forwards every other question to the cluster's DNS (ztunnel's
// src/dns/server.rs, without its wildcard and ServiceEntry auto-allocation cases).
package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

// ttl of ztunnel's own answers (its DNS proxy answers with 30 s).
const ttl = 30

// clusterDomain is the cluster's DNS suffix.
const clusterDomain = "cluster.local"

// Forwarder sends a question the proxy does not answer to the upstream resolver, over
// network ("udp" or "tcp"), from the pod.
type Forwarder func(ctx context.Context, network string, q *dns.Msg) (*dns.Msg, error)

// Handler answers one pod's queries. Safe for concurrent use.
type Handler struct {
	Store     *state.Store // required
	Namespace string       // required: the pod's namespace
	Forward   Forwarder    // required
	Log       *slog.Logger // required
	// Metrics counts every query and every forward, as ztunnel's istio_dns_* counters;
	// optional.
	Metrics *metrics.Registry
	// Source returns the client pod's canonical service and revision, the metrics'
	// source labels; optional ("unknown").
	Source func() (service, revision string)
}

var _ dns.Handler = (*Handler)(nil)

// ServeDNS implements dns.Handler.
func (h *Handler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	network := "udp"
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		network = "tcp"
	}
	if err := w.WriteMsg(h.Answer(network, r)); err != nil {
		h.Log.Debug("write dns answer", "err", err)
	}
}

// Answer is the reply to r: from WDS when its name is a service's, else the upstream's.
func (h *Handler) Answer(network string, r *dns.Msg) *dns.Msg {
	labels := h.labels(network, r)
	if h.Metrics != nil {
		h.Metrics.DNSRequest(labels)
	}
	if r.Opcode != dns.OpcodeQuery || len(r.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNotImplemented)
		return m
	}
	q := r.Question[0]
	if q.Qclass == dns.ClassINET {
		if addrs, ok := h.lookup(q.Name); ok {
			m := new(dns.Msg)
			m.SetReply(r)
			m.Authoritative = true
			m.RecursionAvailable = true
			for _, a := range addrs {
				hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: ttl}
				switch {
				case q.Qtype == dns.TypeA && a.Is4():
					hdr.Rrtype = dns.TypeA
					m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
				case q.Qtype == dns.TypeAAAA && a.Is6():
					hdr.Rrtype = dns.TypeAAAA
					m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
				}
			}
			return m
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.Forward(ctx, network, r)
	if h.Metrics != nil {
		h.Metrics.DNSForwarded(labels, err != nil)
	}
	if err != nil {
		h.Log.Debug("forward dns query", "name", q.Name, "err", err)
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeServerFailure)
		return m
	}
	resp.Id = r.Id
	return resp
}

// labels are the metrics' labels of query r over network.
func (h *Handler) labels(network string, r *dns.Msg) metrics.DNSLabels {
	l := metrics.DNSLabels{Protocol: network}
	if len(r.Question) > 0 {
		l.QueryType = strings.ToLower(dns.TypeToString[r.Question[0].Qtype])
	}
	if h.Source != nil {
		l.SourceCanonicalService, l.SourceCanonicalRevision = h.Source()
	}
	return l
}

// lookup returns the addresses of the service name names for a client of h.Namespace:
// its VIPs, or its endpoints' addresses for a service without one (headless).
func (h *Handler) lookup(name string) ([]netip.Addr, bool) {
	for _, host := range candidates(strings.TrimSuffix(strings.ToLower(name), "."), h.Namespace) {
		svcs := h.Store.ServicesByHostname(host)
		svc := pick(svcs, h.Namespace)
		if svc == nil {
			continue
		}
		if len(svc.VIPs) > 0 {
			return svc.VIPs, true
		}
		var out []netip.Addr
		for uid := range svc.Endpoints {
			if w := h.Store.WorkloadByUID(uid); w != nil {
				out = append(out, w.IPs...)
			}
		}
		return out, true
	}
	return nil, false
}

// candidates are the hostnames a name may mean from namespace ns, as a pod's search list
// (<ns>.svc.cluster.local, svc.cluster.local, cluster.local) expands it: the name itself
// first when it is already a cluster FQDN.
func candidates(name, ns string) []string {
	if strings.HasSuffix(name, "."+clusterDomain) {
		return []string{name}
	}
	return []string{
		name,
		name + "." + ns + ".svc." + clusterDomain,
		name + ".svc." + clusterDomain,
		name + "." + clusterDomain,
	}
}

// pick is the service a client of ns gets among those of one hostname: visible to it,
// its own namespace's first.
func pick(svcs []*state.Service, ns string) *state.Service {
	var best *state.Service
	for _, s := range svcs {
		if s.GetVisibility() == workload.Service_NAMESPACE && s.GetNamespace() != ns {
			continue
		}
		if s.GetNamespace() == ns {
			return s
		}
		if best == nil {
			best = s
		}
	}
	return best
}

// Dialer opens a connection to the upstream resolver from the pod (marked, so the pod's
// rules do not send it back to this proxy).
type Dialer func(ctx context.Context, network string) (net.Conn, error)

// NewForwarder forwards over connections from dial.
func NewForwarder(dial Dialer) Forwarder {
	return func(ctx context.Context, network string, q *dns.Msg) (*dns.Msg, error) {
		c, err := dial(ctx, network)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if d, ok := ctx.Deadline(); ok {
			_ = c.SetDeadline(d)
		}
		co := &dns.Conn{Conn: c}
		if err := co.WriteMsg(q); err != nil {
			return nil, fmt.Errorf("send dns query upstream: %w", err)
		}
		resp, err := co.ReadMsg()
		if err != nil {
			return nil, fmt.Errorf("read upstream dns answer: %w", err)
		}
		return resp, nil
	}
}

// Serve answers on pc (UDP) and ln (TCP) until ctx ends.
func Serve(ctx context.Context, pc net.PacketConn, ln net.Listener, h dns.Handler) error {
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for _, s := range servers {
		started, exited := make(chan struct{}), make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(exited)
			if err := s.ActivateAndServe(); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("serve dns: %w", err)
			}
		}()
		go func() {
			<-ctx.Done()
			select {
			case <-started:
				_ = s.Shutdown()
			case <-exited:
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
