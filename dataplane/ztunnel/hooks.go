package ztunnel

import (
	"log/slog"
	"net/netip"
	"time"

	"github.com/meshlab/meshlab/ambientapi/security"
	"github.com/meshlab/meshlab/ambientapi/workload"
)

// ConnInfo is the connection a destination ztunnel authorizes.
type ConnInfo struct {
	Src    netip.AddrPort // the client (the tunnel's source, or the plaintext peer)
	Dst    netip.AddrPort // the workload's ip:port the client asked for
	PeerID string         // the client certificate's SPIFFE id; "" for plaintext (15006)
}

// Authorizer is the L4 policy engine (dataplane/ztunnel/rbac). Authorize is called for
// every new inbound connection and again for live ones when WDS changes; it must be safe
// for concurrent use and must not block.
type Authorizer interface {
	// Authorize decides c into dst given every policy ztunnel holds; reason explains it
	// (ztunnel's words) for the log.
	Authorize(policies []*security.Authorization, dst *workload.Workload, c ConnInfo) (allowed bool, reason string)
}

// denyAll is used when no Authorizer is wired: it allows a connection only when no policy
// at all applies to the destination (failing closed rather than open).
type denyAll struct{}

func (denyAll) Authorize(policies []*security.Authorization, dst *workload.Workload, _ ConnInfo) (bool, string) {
	for _, p := range policies {
		switch p.GetScope() {
		case security.Scope_GLOBAL:
			return false, "no policy engine wired: a policy applies"
		case security.Scope_NAMESPACE:
			if p.GetNamespace() == dst.GetNamespace() {
				return false, "no policy engine wired: a policy applies"
			}
		case security.Scope_WORKLOAD_SELECTOR:
			for _, name := range dst.GetAuthorizationPolicies() {
				if name == p.GetNamespace()+"/"+p.GetName() {
					return false, "no policy engine wired: a policy applies"
				}
			}
		}
	}
	return true, "no policies"
}

// Direction is which side of a connection a ztunnel reports (ztunnel's reporter).
type Direction string

// The two reporters.
const (
	Outbound Direction = "outbound" // reporter=source
	Inbound  Direction = "inbound"  // reporter=destination
)

// ConnEvent describes one proxied connection, for metrics and the access log.
type ConnEvent struct {
	Direction   Direction
	Protocol    Protocol       // HBONE (mutual_tls) or TCP
	Src         netip.AddrPort // the client
	Dst         netip.AddrPort // the final target ip:port
	HBONEAddr   netip.AddrPort // the tunnel's destination (ip:15008), HBONE only
	SrcWorkload *workload.Workload
	DstWorkload *workload.Workload
	DstService  *workload.Service
	SrcIdentity string
	DstIdentity string
	Start       time.Time
}

// Observer sees every connection ztunnel proxies (dataplane/ztunnel/metrics and
// accesslog). Its methods are called from the connection's goroutines, concurrently, and
// must not block.
type Observer interface {
	Opened(e *ConnEvent)
	// Closed reports the bytes sent to and received from the destination side and the
	// error that ended the connection (nil for a clean end).
	Closed(e *ConnEvent, sent, received int64, err error)
	// Denied reports an inbound connection refused by policy.
	Denied(e *ConnEvent, reason string)
}

// logObserver is the default Observer: ztunnel's "connection complete" line.
type logObserver struct{ log *slog.Logger }

func (logObserver) Opened(*ConnEvent) {}

func (o logObserver) Closed(e *ConnEvent, sent, received int64, err error) {
	args := []any{
		"src.addr", e.Src, "src.workload", e.SrcWorkload.GetName(), "src.identity", e.SrcIdentity,
		"dst.addr", e.Dst, "dst.workload", e.DstWorkload.GetName(), "dst.identity", e.DstIdentity,
		"direction", string(e.Direction), "protocol", e.Protocol.String(),
		"bytes_sent", sent, "bytes_recv", received, "duration", time.Since(e.Start).Round(time.Millisecond).String(),
	}
	if e.HBONEAddr.IsValid() {
		args = append(args, "dst.hbone_addr", e.HBONEAddr)
	}
	if e.DstService != nil {
		args = append(args, "dst.service", e.DstService.GetHostname())
	}
	if err != nil {
		args = append(args, "error", err.Error())
	}
	o.log.Info("connection complete", args...)
}

func (o logObserver) Denied(e *ConnEvent, reason string) {
	o.log.Info("connection complete", "src.addr", e.Src, "src.identity", e.SrcIdentity, "dst.addr", e.Dst,
		"dst.workload", e.DstWorkload.GetName(), "direction", string(e.Direction), "error", "policy rejection: "+reason)
}
