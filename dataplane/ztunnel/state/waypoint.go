package state

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/meshlab/meshlab/ambientapi/workload"
)

// ErrUnknownWaypoint is a waypoint reference that resolves to no waypoint pod (ztunnel's
// UnknownWaypoint): the connection fails rather than going around the waypoint.
var ErrUnknownWaypoint = errors.New("unknown waypoint")

// ServiceWaypoint returns svc's waypoint as ztunnel's fetch_service_waypoint: one of
// weighted_waypoints picked by weight, else waypoint. ok is false when svc has none.
func ServiceWaypoint(svc *Service) (gw *workload.GatewayAddress, ok bool) {
	var total uint64
	for _, w := range svc.GetWeightedWaypoints() {
		total += uint64(w.GetWeight())
	}
	if total > 0 {
		pick := rand.Uint64N(total)
		for _, w := range svc.GetWeightedWaypoints() {
			if pick < uint64(w.GetWeight()) {
				return w.GetDestination(), true
			}
			pick -= uint64(w.GetWeight())
		}
	}
	if gw := svc.GetWaypoint(); gw != nil {
		return gw, true
	}
	return nil, false
}

// FindWaypoint resolves a waypoint reference for a client src as ztunnel's
// fetch_waypoint: an address is looked up as a destination on the HBONE port (a service
// VIP picks one of its pods with a target for that port; a workload IP is that pod), a
// hostname names the waypoint's Service (or a workload) and is resolved the same way.
// The upstream is the waypoint pod at its HBONE port.
func (s *Store) FindWaypoint(src *Workload, gw *workload.GatewayAddress) (Upstream, error) {
	port := gw.GetHboneMtlsPort()
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := ""
	if src != nil {
		ns = src.GetNamespace()
	}
	var svc *Service
	switch d := gw.GetDestination().(type) {
	case *workload.GatewayAddress_Address:
		ip, ok := netip.AddrFromSlice(d.Address.GetAddress())
		if !ok {
			return Upstream{}, fmt.Errorf("waypoint address %x: %w", d.Address.GetAddress(), ErrUnknownWaypoint)
		}
		ip = ip.Unmap()
		if svc = best(s.byVIP[ip], ns); svc == nil {
			if w := s.byIP[ip]; w != nil {
				return Upstream{Workload: w, IP: ip, Port: port}, nil
			}
			return Upstream{}, fmt.Errorf("waypoint %s: %w", ip, ErrUnknownWaypoint)
		}
	case *workload.GatewayAddress_Hostname:
		key := d.Hostname.GetNamespace() + "/" + d.Hostname.GetHostname()
		if svc = s.services[key]; svc == nil {
			return Upstream{}, fmt.Errorf("waypoint %s: %w", key, ErrUnknownWaypoint)
		}
	default:
		return Upstream{}, fmt.Errorf("waypoint with no destination: %w", ErrUnknownWaypoint)
	}
	up, ok := s.fromServiceLocked(src, svc, port)
	if !ok {
		return Upstream{}, fmt.Errorf("waypoint %s port %d has no pod: %w", svc.GetHostname(), port, ErrUnknownWaypoint)
	}
	return up, nil
}

// FromWaypoint reports whether a connection from srcIdentity at srcIP comes from the
// waypoint of dst (ztunnel's check_from_waypoint): one of the waypoint's pods has that
// identity and address. Such traffic has been through the waypoint and goes on directly.
func (s *Store) FromWaypoint(dst *Workload, srcIdentity string, srcIP netip.Addr) bool {
	return s.gatewayHas(dst.GetWaypoint(), func(w *Workload) bool {
		return w.Identity() == srcIdentity && slices.Contains(w.IPs, srcIP.Unmap())
	})
}

// IsWaypointFor reports whether local is the waypoint of the service or workload at
// target (ztunnel's "waypoint sandwich" check in validate_destination): an HBONE target
// that is not local's own address is accepted when its waypoint is local.
func (s *Store) IsWaypointFor(target netip.Addr, local *Workload) bool {
	s.mu.RLock()
	var gw *workload.GatewayAddress
	if svc := best(s.byVIP[target.Unmap()], ""); svc != nil {
		gw = svc.GetWaypoint()
	} else if w := s.byIP[target.Unmap()]; w != nil {
		gw = w.GetWaypoint()
	}
	s.mu.RUnlock()
	return s.gatewayHas(gw, func(w *Workload) bool { return w.GetUid() == local.GetUid() })
}

// gatewayHas reports whether a workload behind the gateway reference satisfies pred: the
// workload it names, or any endpoint of the service it names.
func (s *Store) gatewayHas(gw *workload.GatewayAddress, pred func(*Workload) bool) bool {
	if gw == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var svc *Service
	switch d := gw.GetDestination().(type) {
	case *workload.GatewayAddress_Address:
		ip, ok := netip.AddrFromSlice(d.Address.GetAddress())
		if !ok {
			return false
		}
		ip = ip.Unmap()
		if svc = best(s.byVIP[ip], ""); svc == nil {
			w := s.byIP[ip]
			return w != nil && pred(w)
		}
	case *workload.GatewayAddress_Hostname:
		svc = s.services[d.Hostname.GetNamespace()+"/"+d.Hostname.GetHostname()]
	}
	if svc == nil {
		return false
	}
	for uid := range svc.Endpoints {
		if w := s.workloads[uid]; w != nil && pred(w) {
			return true
		}
	}
	return false
}
