package ztunnel

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

// Protocol is how an outbound connection leaves the pod.
type Protocol int

// The outbound protocols ztunnel originates (never LEGACY_ISTIO_MTLS).
const (
	TCP Protocol = iota
	HBONE
)

func (p Protocol) String() string {
	if p == HBONE {
		return "HBONE"
	}
	return "TCP"
}

// Request is ztunnel's outbound decision for one connection (its build_request).
type Request struct {
	Protocol Protocol
	// Actual is where the TCP connection goes: the destination pod's ip:15008 for HBONE,
	// the target itself for TCP.
	Actual netip.AddrPort
	// HBONETarget is the CONNECT's :authority (HBONE only): the final ip:port, or the
	// original VIP:port when a waypoint is in between.
	HBONETarget netip.AddrPort
	// Upstream is the destination workload, nil for passthrough.
	Upstream *state.Workload
	// Service is the service the client addressed, if any.
	Service *state.Service
	// SANs are the identities the HBONE peer may present.
	SANs []string
}

// ErrNoHealthyUpstream is a service VIP with no endpoint to send to (the connection is
// refused, as ztunnel's NoHealthyUpstream).
var ErrNoHealthyUpstream = errors.New("no healthy upstream")

// buildRequest decides where a connection from src (at srcIP) to dst goes, in
// ztunnel's order (build_request): a service VIP whose service has a waypoint goes over
// HBONE to a waypoint pod's HBONE port with :authority the VIP:port; else the upstream
// workload resolved through the service or by IP, none meaning passthrough to dst unless
// the service should have had one; a workload-addressed destination with a waypoint goes
// to that waypoint likewise, unless the connection comes from that waypoint; else the
// destination workload's tunnel protocol: HBONE to its ip:15008 with :authority
// ip:targetPort, or plain TCP to ip:targetPort. A waypoint that resolves to no pod fails
// the connection (state.ErrUnknownWaypoint); it is never gone around.
func buildRequest(st *state.Store, src *state.Workload, srcIP netip.Addr, dst netip.AddrPort) (Request, error) {
	up, svc, passthrough, found := st.FindUpstream(src, dst)
	if svc != nil {
		if gw, ok := state.ServiceWaypoint(svc); ok {
			return toWaypoint(st, src, gw, dst, svc)
		}
	}
	if !found {
		if svc != nil && !passthrough {
			return Request{}, fmt.Errorf("service %s port %d: %w", svc.GetHostname(), dst.Port(), ErrNoHealthyUpstream)
		}
		return Request{Protocol: TCP, Actual: dst}, nil
	}
	if svc == nil && up.Workload.GetWaypoint() != nil && !st.FromWaypoint(up.Workload, src.Identity(), srcIP) {
		return toWaypoint(st, src, up.Workload.GetWaypoint(), dst, nil)
	}
	if up.Workload.HBONE() {
		return Request{
			Protocol:    HBONE,
			Actual:      netip.AddrPortFrom(up.IP, HBONEPort),
			HBONETarget: up.Address(),
			Upstream:    up.Workload,
			Service:     svc,
			SANs:        up.SANs(),
		}, nil
	}
	return Request{Protocol: TCP, Actual: up.Address(), Upstream: up.Workload, Service: svc, SANs: up.SANs()}, nil
}

// toWaypoint is the request through waypoint gw: HBONE to the waypoint pod's HBONE port,
// :authority the original destination (not translated), the waypoint's identities as
// SANs; Upstream is the waypoint, Service the one the client addressed.
func toWaypoint(st *state.Store, src *state.Workload, gw *workload.GatewayAddress, dst netip.AddrPort, svc *state.Service) (Request, error) {
	wp, err := st.FindWaypoint(src, gw)
	if err != nil {
		return Request{}, err
	}
	return Request{
		Protocol:    HBONE,
		Actual:      wp.Address(),
		HBONETarget: dst,
		Upstream:    wp.Workload,
		Service:     svc,
		SANs:        wp.SANs(),
	}, nil
}
