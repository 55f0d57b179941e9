package ztunnel

import (
	"context"
	"net"
	"net/netip"

	"github.com/meshlab/meshlab/dataplane/ztunnel/dns"
)

// serveDNS serves the pod's DNS proxy on 127.0.0.1:15053 until the pod goes; what WDS
// does not answer goes to the cluster's DNS, dialled from inside the pod with ztunnel's
// mark so the pod's rules let it through.
func (z *Ztunnel) serveDNS(p *pod, pc net.PacketConn, ln *net.TCPListener) {
	upstream := z.cfg.DNSUpstream
	h := &dns.Handler{
		Store:     z.store,
		Namespace: p.info.Namespace,
		Log:       z.log.With("component", "dns", "pod", p.info.Namespace+"/"+p.info.Name),
		Metrics:   z.reg,
		Source: func() (string, string) {
			p.mu.Lock()
			uid := p.wlUID
			p.mu.Unlock()
			if w := z.store.WorkloadByUID(uid); w != nil {
				return w.GetCanonicalName(), w.GetCanonicalRevision()
			}
			return "", ""
		},
		Forward: dns.NewForwarder(func(ctx context.Context, network string) (net.Conn, error) {
			return p.ns.Dial(ctx, network, netip.Addr{}, upstream)
		}),
	}
	if err := dns.Serve(p.ctx, pc, ln, h); err != nil {
		z.log.Warn("dns proxy stopped", "pod", p.info.Namespace+"/"+p.info.Name, "err", err)
	}
}
