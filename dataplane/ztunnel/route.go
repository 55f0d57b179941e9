package ztunnel

import (
	"errors"
	"fmt"
	"net/netip"

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

// ErrWaypoint is a destination behind a waypoint, which needs issue 26's part 2.
var ErrWaypoint = errors.New("destination uses a waypoint, which this ztunnel does not support yet")

// buildRequest decides where a connection from src to dst goes, in ztunnel's order: a
// service VIP with a waypoint (refused: waypoints are part 2); the upstream workload
// resolved through the service or by IP, none meaning passthrough to dst unless the
// service should have had one; a workload-addressed destination with a waypoint
// (refused likewise); else the destination workload's tunnel protocol: HBONE to its
// ip:15008 with :authority ip:targetPort, or plain TCP to ip:targetPort.
func buildRequest(st *state.Store, src *state.Workload, dst netip.AddrPort) (Request, error) {
	up, svc, passthrough, found := st.FindUpstream(src, dst)
	if svc != nil && (svc.GetWaypoint() != nil || len(svc.GetWeightedWaypoints()) > 0) {
		return Request{}, fmt.Errorf("service %s: %w", svc.GetHostname(), ErrWaypoint)
	}
	if !found {
		if svc != nil && !passthrough {
			return Request{}, fmt.Errorf("service %s port %d: %w", svc.GetHostname(), dst.Port(), ErrNoHealthyUpstream)
		}
		return Request{Protocol: TCP, Actual: dst}, nil
	}
	if svc == nil && up.Workload.GetWaypoint() != nil {
		return Request{}, fmt.Errorf("workload %s: %w", up.Workload.GetUid(), ErrWaypoint)
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
