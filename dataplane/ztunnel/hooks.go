package ztunnel

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/meshlab/meshlab/ambientapi/workload"
	"github.com/meshlab/meshlab/dataplane/ztunnel/accesslog"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
	"github.com/meshlab/meshlab/dataplane/ztunnel/rbac"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

// ConnInfo is the connection a destination ztunnel authorizes.
type ConnInfo struct {
	Src    netip.AddrPort // the client (the tunnel's source, or the plaintext peer)
	Dst    netip.AddrPort // the workload's ip:port the client asked for
	PeerID string         // the client certificate's SPIFFE id; "" for plaintext (15006)
}

// policies decides inbound connections with dataplane/ztunnel/rbac, on a compiled set
// rebuilt when WADS changes. Safe for concurrent use.
type policies struct {
	store *state.Store
	log   *slog.Logger

	mu      sync.Mutex
	version uint64
	set     *rbac.Set
}

// authorize decides c into dst; reason is ztunnel's rejection message when denied.
func (p *policies) authorize(dst *state.Workload, c ConnInfo) (bool, string) {
	set := p.current()
	conn := rbac.Conn{Src: c.Src, Dst: c.Dst}
	if c.PeerID != "" {
		id, err := rbac.ParseIdentity(c.PeerID)
		if err != nil {
			return false, "peer identity: " + err.Error()
		}
		conn.SrcIdentity = &id
	}
	d := set.Evaluate(dst.Workload, conn)
	if len(d.Unknown) > 0 {
		p.log.Warn("skipping unknown policies", "policies", strings.Join(d.Unknown, ","), "workload", dst.GetUid())
	}
	if err := d.Err(); err != nil {
		return false, err.Error()
	}
	return true, d.Reason.String()
}

func (p *policies) current() *rbac.Set {
	v := p.store.Version()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == nil || p.version != v {
		set, errs := rbac.NewSet(p.store.Policies())
		for _, err := range errs {
			p.log.Warn("authorization policy rejected", "err", err)
		}
		p.set, p.version = set, v
	}
	return p.set
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

// Observer sees every connection ztunnel proxies. Its methods are called from the
// connections' goroutines, concurrently, and must not block.
type Observer interface {
	// Open reports a connection established to its destination; the tracker counts it.
	Open(e *ConnEvent) Tracker
	// Failed reports a connection that never got through (policy, no upstream, dial).
	Failed(e *ConnEvent, flag metrics.ResponseFlag, err error)
}

// Tracker counts one open connection's bytes and its end.
type Tracker interface {
	// Sent counts bytes from the destination side to the client (istio_tcp_sent_bytes).
	Sent(n int)
	// Received counts bytes from the client to the destination side.
	Received(n int)
	// Close ends the connection; err nil for a clean end.
	Close(err error)
}

// observer is ztunnel's metrics (dataplane/ztunnel/metrics) and its access log line
// (dataplane/ztunnel/accesslog).
type observer struct {
	reg *metrics.Registry

	mu  sync.Mutex
	out io.Writer
}

func (o *observer) open(e *ConnEvent) metrics.Open {
	rep := metrics.Source
	if e.Direction == Inbound {
		rep = metrics.Destination
	}
	mo := metrics.Open{Reporter: rep, Source: e.SrcWorkload, Destination: e.DstWorkload}
	if e.Protocol == HBONE {
		mo.SecurityPolicy = metrics.MutualTLS
	}
	// The source principal comes from the handshake (or, outbound, from ztunnel's own
	// certificate for the pod), never from WDS: it rides on the derived source.
	if e.Protocol == HBONE && e.SrcIdentity != "" {
		if id, err := rbac.ParseIdentity(e.SrcIdentity); err == nil {
			mo.DerivedSource = &metrics.Derived{Namespace: id.Namespace, Identity: e.SrcIdentity}
		}
	}
	if s := e.DstService; s != nil {
		mo.DestinationService = &metrics.ServiceDescription{Hostname: s.GetHostname(), Name: s.GetName(), Namespace: s.GetNamespace()}
	}
	return mo
}

func (o *observer) Open(e *ConnEvent) Tracker {
	return &conn{o: o, e: e, m: o.reg.Open(o.open(e))}
}

func (o *observer) Failed(e *ConnEvent, flag metrics.ResponseFlag, err error) {
	res := o.reg.Open(o.open(e)).Close(flag)
	o.logLine(e, res, err)
}

type conn struct {
	o *observer
	e *ConnEvent
	m *metrics.Conn
}

func (c *conn) Sent(n int)     { c.m.AddSent(n) }
func (c *conn) Received(n int) { c.m.AddReceived(n) }
func (c *conn) Close(err error) {
	flag := metrics.FlagNone
	if err != nil && !errors.Is(err, errClosedByPolicy) {
		flag = metrics.FlagConnectFailure
	}
	if errors.Is(err, errClosedByPolicy) {
		flag = metrics.FlagDenied
	}
	c.o.logLine(c.e, c.m.Close(flag), err)
}

// errClosedByPolicy ends a live connection a policy change denies.
var errClosedByPolicy = errors.New("connection closed due to policy change")

// logLine writes ztunnel's "connection complete" access log line. dst.addr is where the
// connection went (the peer's 15008 for HBONE), dst.hbone_addr the tunnel's target.
func (o *observer) logLine(e *ConnEvent, res metrics.Result, err error) {
	dst, target := e.Dst, netip.AddrPort{}
	if e.HBONEAddr.IsValid() {
		dst, target = e.HBONEAddr, e.Dst
	}
	names := accesslog.Names{Src: e.SrcWorkload.GetName(), Dst: e.DstWorkload.GetName()}
	line := accesslog.FromResult(res, e.Src, dst, target, names, err).Line(time.Now())
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = io.WriteString(o.out, line+"\n")
}
