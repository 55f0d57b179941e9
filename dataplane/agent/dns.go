package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// dnsTTL is the TTL of every answer, as Istio's DNS proxy.
const dnsTTL = 30

// dnsHandler answers queries from the name table alone. It has no upstream on purpose:
// a lab has no resolver to forward to, so an unknown name is NXDOMAIN, never forwarded.
type dnsHandler struct {
	names *nameStore
	log   *slog.Logger
}

var _ dns.Handler = (*dnsHandler)(nil)

func (h *dnsHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := h.answer(r)
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := r.IsEdns0(); opt != nil {
			size = int(opt.UDPSize())
		}
		m.Truncate(size)
	}
	if err := w.WriteMsg(m); err != nil {
		h.log.Debug("write dns answer", "err", err)
	}
}

// firstTableWait bounds how long a query waits for the agent's first name table.
const firstTableWait = 2 * time.Second

// answer builds the reply to r: A (and AAAA) records for names in the table with TTL 30,
// NOERROR with no answers for other types of a known name, NXDOMAIN for any other name.
func (h *dnsHandler) answer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	m.RecursionAvailable = false
	if r.Opcode != dns.OpcodeQuery {
		m.SetRcode(r, dns.RcodeNotImplemented)
		return m
	}
	if len(r.Question) != 1 {
		m.SetRcode(r, dns.RcodeFormatError)
		return m
	}
	q := r.Question[0]
	h.names.waitFirst(firstTableWait)
	addrs, ok := h.names.lookup(q.Name)
	if !ok {
		m.SetRcode(r, dns.RcodeNameError)
		return m
	}
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: dnsTTL}
	}
	for _, a := range addrs {
		switch {
		case q.Qtype == dns.TypeA && a.Is4():
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		case q.Qtype == dns.TypeAAAA && a.Is6() && !a.Is4In6():
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return m
}

// idleDNSReadTimeout bounds one wait of the UDP DNS server for a query.
const idleDNSReadTimeout = 24 * time.Hour

// ServeDNS serves h on pc (UDP) and ln (TCP) until ctx ends, then shuts both down. The
// agent serves its DNS proxy with it, and the lab its cluster DNS for pods without a sidecar.
func ServeDNS(ctx context.Context, pc net.PacketConn, ln net.Listener, h dns.Handler) error {
	servers := []*dns.Server{
		// The UDP server's read waits for the next query however long it takes: with the
		// library's 2 s default every idle pod's agent woke up every 2 s for nothing.
		// Shutdown still ends the read (it moves the deadline to the past).
		{PacketConn: pc, Handler: h, ReadTimeout: idleDNSReadTimeout},
		{Listener: ln, Handler: h},
	}
	errs := make(chan error, len(servers))
	var wg sync.WaitGroup
	for _, s := range servers {
		started, exited := make(chan struct{}), make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Go(func() {
			defer close(exited)
			if err := s.ActivateAndServe(); err != nil {
				errs <- fmt.Errorf("serve dns: %w", err)
			}
		})
		go func() {
			<-ctx.Done()
			select {
			case <-started: // Shutdown fails on a server that has not started yet
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
