package state

import (
	"math/rand/v2"
	"net/netip"

	"github.com/meshlab/meshlab/ambientapi/workload"
)

// Upstream is where an outbound connection goes, as ztunnel's find_upstream answers.
type Upstream struct {
	Workload *Workload
	IP       netip.Addr // the workload's address to connect to
	Port     uint32     // the target port on it
	Service  *Service   // set when the destination was a service VIP
}

// Address returns the upstream's ip:port.
func (u Upstream) Address() netip.AddrPort { return netip.AddrPortFrom(u.IP, uint16(u.Port)) }

// SANs returns the identities the upstream may present: the service's subject alt names
// and the workload's own identity (ztunnel's workload_and_services_san).
func (u Upstream) SANs() []string {
	var out []string
	if u.Service != nil {
		out = append(out, u.Service.GetSubjectAltNames()...)
	}
	return append(out, u.Workload.Identity())
}

// FindUpstream resolves dst for a client src: a service VIP picks one of its endpoints
// (honouring load_balancing; a PASSTHROUGH service goes to dst itself, reported as
// passthrough), a workload IP is that workload. found is false when dst is neither; svc
// is the service dst named, if any (a service without a usable endpoint returns svc and
// found false).
func (s *Store) FindUpstream(src *Workload, dst netip.AddrPort) (up Upstream, svc *Service, passthrough, found bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := ""
	if src != nil {
		ns = src.GetNamespace()
	}
	if svc := best(s.byVIP[dst.Addr().Unmap()], ns); svc != nil {
		if svc.GetLoadBalancing().GetMode() == workload.LoadBalancing_PASSTHROUGH {
			return Upstream{}, svc, true, false
		}
		up, ok := s.fromServiceLocked(src, svc, uint32(dst.Port()))
		return up, svc, false, ok
	}
	if w := s.byIP[dst.Addr().Unmap()]; w != nil {
		return Upstream{Workload: w, IP: dst.Addr().Unmap(), Port: uint32(dst.Port())}, nil, false, true
	}
	return Upstream{}, nil, false, false
}

// fromServiceLocked picks an endpoint of svc for port and maps the port to its target:
// the endpoint's own mapping first, else the service's.
func (s *Store) fromServiceLocked(src *Workload, svc *Service, port uint32) (Upstream, bool) {
	svcTarget, onService := svc.Ports[port]
	if !onService {
		return Upstream{}, false // the port does not exist on the service
	}
	type cand struct {
		w    *Workload
		port uint32
	}
	var cands []cand
	for _, ep := range svc.Endpoints {
		w := s.workloads[ep.WorkloadUID]
		if w == nil || len(w.IPs) == 0 {
			continue
		}
		target, ok := ep.Ports[port]
		if !ok || target == 0 {
			if svcTarget == 0 {
				continue // neither the endpoint nor the service says where the port goes
			}
			target = svcTarget
		}
		cands = append(cands, cand{w, target})
	}
	if lb := svc.GetLoadBalancing(); lb != nil && lb.GetMode() != workload.LoadBalancing_UNSPECIFIED_MODE && src != nil {
		top := -1
		kept := cands[:0:0]
		var keptRank []int
		for _, c := range cands {
			r := rank(lb, src, c.w)
			if lb.GetMode() == workload.LoadBalancing_STRICT && r != len(lb.GetRoutingPreference()) {
				continue
			}
			kept = append(kept, c)
			keptRank = append(keptRank, r)
			top = max(top, r)
		}
		cands = cands[:0]
		for i, c := range kept {
			if keptRank[i] == top {
				cands = append(cands, c)
			}
		}
	}
	if len(cands) == 0 {
		return Upstream{}, false
	}
	var total uint64
	for _, c := range cands {
		total += capacity(c.w)
	}
	pick := rand.Uint64N(total)
	for _, c := range cands {
		if pick < capacity(c.w) {
			return Upstream{Workload: c.w, IP: c.w.IPs[0], Port: c.port, Service: svc}, true
		}
		pick -= capacity(c.w)
	}
	c := cands[len(cands)-1]
	return Upstream{Workload: c.w, IP: c.w.IPs[0], Port: c.port, Service: svc}, true
}

func capacity(w *Workload) uint64 {
	if c := w.GetCapacity(); c != nil {
		return max(uint64(c.GetValue()), 1)
	}
	return 1
}

// rank counts the routing preferences src and w share, in order, stopping at the first
// miss (ztunnel's failover ranking).
func rank(lb *workload.LoadBalancing, src, w *Workload) int {
	r := 0
	for _, scope := range lb.GetRoutingPreference() {
		var same bool
		switch scope {
		case workload.LoadBalancing_REGION:
			same = src.GetLocality().GetRegion() == w.GetLocality().GetRegion()
		case workload.LoadBalancing_ZONE:
			same = src.GetLocality().GetZone() == w.GetLocality().GetZone()
		case workload.LoadBalancing_SUBZONE:
			same = src.GetLocality().GetSubzone() == w.GetLocality().GetSubzone()
		case workload.LoadBalancing_NODE:
			same = src.GetNode() == w.GetNode()
		case workload.LoadBalancing_CLUSTER:
			same = src.GetClusterId() == w.GetClusterId()
		case workload.LoadBalancing_NETWORK:
			same = src.GetNetwork() == w.GetNetwork()
		}
		if !same {
			break
		}
		r++
	}
	return r
}
