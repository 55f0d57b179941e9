package ztunnel

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/dataplane/rawio"
	"github.com/meshlab/meshlab/dataplane/ztunnel/hbone"
	"github.com/meshlab/meshlab/dataplane/ztunnel/inpod"
	"github.com/meshlab/meshlab/dataplane/ztunnel/metrics"
	"github.com/meshlab/meshlab/dataplane/ztunnel/state"
)

// dialTimeout bounds every connect ztunnel makes.
const dialTimeout = 10 * time.Second

// reset closes c so that its peer sees a reset (RST), as a client of a denied connection
// does with ztunnel (curl's exit 56).
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}

func tcpAddr(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// serveOutbound is the pod's 15001: where the app's outbound TCP was REDIRECTed.
func (z *Ztunnel) serveOutbound(p *pod, c *net.TCPConn) {
	dst, err := inpod.OriginalDst(c)
	if err != nil {
		z.log.Warn("outbound: no original destination", "pod", p.info.Name, "err", err)
		reset(c)
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	src, err := z.wait(p)
	if err != nil {
		z.log.Warn("outbound: connection held too long", "pod", p.info.Name, "dst", dst, "err", err)
		reset(c)
		return
	}
	if slices.Contains(src.IPs, dst.Addr()) && (dst.Port() == OutboundPort || dst.Port() == InboundPort || dst.Port() == HBONEPort) {
		z.log.Warn("outbound: refusing a connection to ztunnel's own port", "pod", p.info.Name, "dst", dst)
		reset(c)
		return
	}
	req, err := buildRequest(z.store, src, tcpAddr(c.RemoteAddr()).Addr(), dst)
	ev := &ConnEvent{
		Direction: Outbound, Protocol: req.Protocol, Src: tcpAddr(c.RemoteAddr()), Dst: dst,
		SrcWorkload: src.Workload, SrcIdentity: src.Identity(), Start: time.Now(),
	}
	if err != nil {
		z.obs.Failed(ev, metrics.FlagConnectFailure, err)
		reset(c)
		return
	}
	if req.Upstream != nil {
		ev.DstWorkload = req.Upstream.Workload
		ev.DstIdentity = req.Upstream.Identity()
	}
	if req.Service != nil {
		ev.DstService = req.Service.Service
	}
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	defer cancel()
	var up io.ReadWriteCloser
	switch req.Protocol {
	case TCP:
		ev.Dst = req.Actual
		up, err = p.ns.Dial(ctx, "tcp", netip.Addr{}, req.Actual)
	case HBONE:
		ev.Dst, ev.HBONEAddr = req.HBONETarget, req.Actual
		up, err = z.connectHBONE(ctx, p, src, ev.Src, req)
	}
	if err != nil {
		flag := metrics.FlagConnectFailure
		var se *hbone.StatusError
		if errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			flag = metrics.FlagDenied
		}
		z.obs.Failed(ev, flag, err)
		reset(c)
		return
	}
	t := &tracked{info: ConnInfo{Src: ev.Src, Dst: ev.Dst}, dir: Outbound, actual: req.Actual, proto: req.Protocol, close: func() { reset(c) }}
	if p.track(t) {
		defer p.untrack(t)
	}
	tr := z.obs.Open(ev)
	tr.Close(splice(c, &counted{ReadWriteCloser: up, tr: tr}))
}

// connectHBONE opens a tunnel stream for req from the pod's identity.
func (z *Ztunnel) connectHBONE(ctx context.Context, p *pod, src *state.Workload, client netip.AddrPort, req Request) (io.ReadWriteCloser, error) {
	cert, err := z.certs.Get(ctx, src.Identity())
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("baggage", baggage(z.cfg.ClusterID, src))
	fwd := fmt.Sprintf("for=%q", client.String())
	if req.Service != nil {
		fwd += ";host=" + req.Service.GetHostname()
	}
	h.Set("forwarded", fwd)
	h.Set("traceparent", traceparent())
	return z.pool.Connect(ctx, hbone.Request{
		Key:       hbone.KeyFor(src.Identity(), req.SANs, client.Addr(), req.Actual),
		Authority: req.HBONETarget,
		Header:    h,
		TLS:       hbone.ClientConfig(&cert.TLS, z.trust(), req.SANs),
		Dial: func(ctx context.Context, dst netip.AddrPort) (net.Conn, error) {
			return p.ns.Dial(ctx, "tcp", netip.Addr{}, dst)
		},
	})
}

// baggage is ztunnel's baggage header for a source workload.
func baggage(cluster string, w *state.Workload) string {
	parts := []string{"k8s.cluster.name=" + cluster, "k8s.namespace.name=" + w.GetNamespace()}
	if n := w.GetWorkloadName(); n != "" {
		kind := strings.ToLower(w.GetWorkloadType().String())
		parts = append(parts, "k8s."+kind+".name="+n)
	}
	if n := w.GetCanonicalName(); n != "" {
		parts = append(parts, "service.name="+n)
	}
	if v := w.GetCanonicalRevision(); v != "" {
		parts = append(parts, "service.version="+v)
	}
	if l := w.GetLocality(); l != nil {
		if l.GetRegion() != "" {
			parts = append(parts, "cloud.region="+l.GetRegion())
		}
		if l.GetZone() != "" {
			parts = append(parts, "cloud.availability_zone="+l.GetZone())
		}
	}
	return strings.Join(parts, ",")
}

// traceparent is a fresh W3C trace context (ztunnel starts a trace per connection).
func traceparent() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "00-" + hex.EncodeToString(b[:16]) + "-" + hex.EncodeToString(b[16:]) + "-00"
}

// splice copies both ways until both directions end, half-closing each side as the other
// ends. down's bytes are read and written raw (rawio): up is never a bare socket the
// kernel could splice to.
func splice(down *net.TCPConn, up io.ReadWriteCloser) error {
	defer up.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(up, rawio.Reader(down))
		if cw, ok := up.(interface{ CloseWrite() error }); ok && err == nil {
			_ = cw.CloseWrite()
		} else {
			_ = up.Close()
		}
		errc <- err
	}()
	_, rerr := io.Copy(rawio.Writer(down), up)
	if rerr != nil {
		reset(down)
	} else {
		_ = down.CloseWrite()
	}
	return errors.Join(<-errc, rerr)
}

// counted is the destination side of a connection, counting its bytes for the tracker:
// read from it is sent to the client, written to it was received from the client.
type counted struct {
	io.ReadWriteCloser
	tr Tracker
}

func (c *counted) Read(b []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(b)
	if n > 0 {
		c.tr.Sent(n)
	}
	return n, err
}

func (c *counted) Write(b []byte) (int, error) {
	n, err := c.ReadWriteCloser.Write(b)
	if n > 0 {
		c.tr.Received(n)
	}
	return n, err
}

// CloseWrite half-closes the destination side when it can.
func (c *counted) CloseWrite() error {
	if cw, ok := c.ReadWriteCloser.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// countedConn is counted for a net.Conn (the app's side of an inbound tunnel).
type countedConn struct {
	net.Conn
	tr Tracker
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.tr.Sent(n)
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.tr.Received(n)
	}
	return n, err
}

func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// tracked is a live inbound connection, re-authorized when policies change.
type tracked struct {
	info   ConnInfo
	dst    string // the destination workload's uid ("" for outbound: not re-checked here)
	dir    Direction
	actual netip.AddrPort // where the connection went (ip:15008 for HBONE)
	proto  Protocol
	close  func()
}

func (p *pod) track(t *tracked) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return false
	}
	p.conns[t] = struct{}{}
	return true
}

func (p *pod) untrack(t *tracked) {
	p.mu.Lock()
	delete(p.conns, t)
	p.mu.Unlock()
}

// authorize decides an inbound connection into w.
func (z *Ztunnel) authorize(w *state.Workload, c ConnInfo) (bool, string) {
	return z.policy.authorize(w, c)
}

// serveHBONE is the pod's 15008: mTLS HTTP/2 CONNECT from other ztunnels and sidecars.
func (z *Ztunnel) serveHBONE(p *pod, c *net.TCPConn) {
	if _, err := z.wait(p); err != nil {
		z.log.Warn("hbone: connection held too long", "pod", p.info.Name, "err", err)
		return
	}
	p.mu.Lock()
	id := p.identity
	p.mu.Unlock()
	td := z.cfg.TrustDomain
	if i := strings.Index(strings.TrimPrefix(id, "spiffe://"), "/"); i > 0 {
		td = strings.TrimPrefix(id, "spiffe://")[:i]
	}
	cfg := hbone.ServerConfig(func() (*tls.Certificate, error) {
		ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
		defer cancel()
		cert, err := z.certs.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		return &cert.TLS, nil
	}, z.trust, td)
	hbone.Serve(p.ctx, c, cfg, func(ctx context.Context, r *hbone.ConnectRequest) (hbone.Upstream, int) {
		return z.inboundHBONE(ctx, p, r)
	}, z.log)
}

func (z *Ztunnel) inboundHBONE(ctx context.Context, p *pod, r *hbone.ConnectRequest) (hbone.Upstream, int) {
	w, err := z.wait(p)
	if err != nil {
		return hbone.Upstream{}, http.StatusServiceUnavailable
	}
	ci := ConnInfo{Src: r.Remote, Dst: r.Authority, PeerID: r.PeerID}
	ev := &ConnEvent{
		Direction: Inbound, Protocol: HBONE, Src: r.Remote, Dst: r.Authority, HBONEAddr: r.Local,
		DstWorkload: w.Workload, DstIdentity: w.Identity(), SrcIdentity: r.PeerID, Start: time.Now(),
	}
	if sw := z.store.WorkloadByIP(r.Remote.Addr()); sw != nil {
		ev.SrcWorkload = sw.Workload
	}
	// The target must be this pod, or a service or workload whose waypoint this pod is
	// (ztunnel's validate_destination).
	if !slices.Contains(w.IPs, r.Authority.Addr()) && !z.store.IsWaypointFor(r.Authority.Addr(), w) {
		z.obs.Failed(ev, metrics.FlagConnectFailure, fmt.Errorf("HBONE target %s is not this pod (%v)", r.Authority, w.IPs))
		return hbone.Upstream{}, http.StatusBadRequest
	}
	if ok, reason := z.authorize(w, ci); !ok {
		z.obs.Failed(ev, metrics.FlagDenied, errors.New(reason))
		return hbone.Upstream{}, http.StatusUnauthorized
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	up, err := p.ns.Dial(dctx, "tcp", r.Remote.Addr(), r.Authority)
	if err != nil {
		z.obs.Failed(ev, metrics.FlagConnectFailure, err)
		return hbone.Upstream{}, http.StatusServiceUnavailable
	}
	var closedBy atomic.Value
	t := &tracked{info: ci, dst: w.GetUid(), dir: Inbound, actual: r.Authority, proto: HBONE, close: func() { closedBy.Store(errClosedByPolicy); _ = up.Close() }}
	if !p.track(t) {
		_ = up.Close()
		return hbone.Upstream{}, http.StatusServiceUnavailable
	}
	tr := z.obs.Open(ev)
	return hbone.Upstream{Conn: &countedConn{Conn: rawio.Conn(up), tr: tr}, Done: func(_, _ int64, err error) {
		p.untrack(t)
		if e, ok := closedBy.Load().(error); ok {
			err = e
		}
		tr.Close(err)
	}}, http.StatusOK
}

// servePlaintext is the pod's 15006: inbound TCP that did not come over HBONE.
func (z *Ztunnel) servePlaintext(p *pod, c *net.TCPConn) {
	dst, err := inpod.OriginalDst(c)
	if err != nil {
		reset(c)
		return
	}
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	w, err := z.wait(p)
	if err != nil {
		reset(c)
		return
	}
	src := tcpAddr(c.RemoteAddr())
	ci := ConnInfo{Src: src, Dst: dst}
	ev := &ConnEvent{
		Direction: Inbound, Protocol: TCP, Src: src, Dst: dst,
		DstWorkload: w.Workload, DstIdentity: w.Identity(), Start: time.Now(),
	}
	if sw := z.store.WorkloadByIP(src.Addr()); sw != nil {
		ev.SrcWorkload = sw.Workload
	}
	if !slices.Contains(w.IPs, dst.Addr()) || dst.Port() == HBONEPort {
		z.obs.Failed(ev, metrics.FlagConnectFailure, errors.New("plaintext to "+dst.String()+", which is not this pod's"))
		reset(c)
		return
	}
	if ok, reason := z.authorize(w, ci); !ok {
		z.obs.Failed(ev, metrics.FlagDenied, errors.New(reason))
		reset(c)
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, dialTimeout)
	up, err := p.ns.Dial(ctx, "tcp", src.Addr(), dst)
	cancel()
	if err != nil {
		z.obs.Failed(ev, metrics.FlagConnectFailure, err)
		reset(c)
		return
	}
	var (
		once     sync.Once
		closedBy atomic.Value
	)
	t := &tracked{info: ci, dst: w.GetUid(), dir: Inbound, actual: dst, proto: TCP, close: func() {
		once.Do(func() { closedBy.Store(errClosedByPolicy); reset(c); _ = up.Close() })
	}}
	if !p.track(t) {
		_ = up.Close()
		reset(c)
		return
	}
	defer p.untrack(t)
	tr := z.obs.Open(ev)
	err = splice(c, &counted{ReadWriteCloser: up, tr: tr})
	if e, ok := closedBy.Load().(error); ok {
		err = e
	}
	tr.Close(err)
}

// recheckLoop re-authorizes every live inbound connection whenever WDS changes and
// closes those now denied (ztunnel's connection manager).
func (z *Ztunnel) recheckLoop(ctx context.Context) {
	for {
		ch := z.store.Changed()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
		z.recheck()
	}
}

func (z *Ztunnel) recheck() {
	for _, p := range z.pods.all() {
		p.mu.Lock()
		conns := make([]*tracked, 0, len(p.conns))
		for t := range p.conns {
			conns = append(conns, t)
		}
		p.mu.Unlock()
		for _, t := range conns {
			if t.dir != Inbound {
				continue
			}
			w := z.store.WorkloadByUID(t.dst)
			if w == nil {
				continue
			}
			if ok, reason := z.authorize(w, t.info); !ok {
				z.log.Info("closing a connection a policy now denies", "src", t.info.Src, "dst", t.info.Dst, "identity", t.info.PeerID, "reason", reason)
				p.untrack(t)
				t.close()
			}
		}
	}
}
