package listener

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/rbac"
	"github.com/meshlab/meshlab/dataplane/proxy/httpconn"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/origdst"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tcpproxy"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
	"github.com/meshlab/meshlab/dataplane/proxy/tracing"
)

// Deps are what the listener manager needs from the rest of the proxy.
type Deps struct {
	Clusters *cluster.Manager     // required
	Routes   *httpconn.RouteStore // required
	Stats    *stats.Store         // required
	Logger   *slog.Logger         // required
	// Secrets holds the SDS secrets of downstream TLS contexts; optional (a TLS filter
	// chain then fails every handshake, as an Envoy whose secrets never arrived would).
	Secrets *tlsctx.Store
	// OriginalDst reads SO_ORIGINAL_DST; optional, origdst.OriginalDst when nil.
	OriginalDst func(*net.TCPConn) (netip.AddrPort, error)
	// InheritSocket returns the hot restart parent's listen socket bound to addr, or
	// nil when the parent has none (then the manager binds one itself); optional.
	InheritSocket func(addr netip.AddrPort) net.Listener
	// DeferAccept holds accepting until StartWorkers, as Envoy's workers start only once
	// the server is initialized: a hot restart child must not take connections from the
	// shared accept queue before it is LIVE, or its crash would drop them; optional.
	DeferAccept bool
	// DrainTime and DrainGradual are --drain-time-s and --drain-strategy. Immediate (the
	// zero value): a draining listener's HTTP connections close after their next
	// response at once. Gradual: after each response with probability elapsed/DrainTime
	// in whole seconds, as Envoy's DrainManagerImpl::drainClose, and all of them once
	// DrainTime has passed; optional.
	DrainTime    time.Duration
	DrainGradual bool
	// HealthCheckFailed reports whether /healthcheck/fail is in force: every HTTP
	// response then closes its connection (HTTP/1 Connection: close, HTTP/2 GOAWAY), as
	// Envoy's DrainManagerImpl::drainClose does for listeners of drain_type DEFAULT (the
	// only one this proxy accepts); optional.
	HealthCheckFailed func() bool
	// Tracer reports the spans of HCMs with a tracing provider; optional.
	Tracer *tracing.Tracer
}

// BindError is the error of an LDS update whose listener cannot bind its address.
type BindError struct {
	Listener string
	Addr     netip.AddrPort
	Err      error
}

func (e *BindError) Error() string {
	return fmt.Sprintf("listener '%s': cannot bind '%s': %v", e.Listener, e.Addr, e.Err)
}

func (e *BindError) Unwrap() error { return e.Err }

// Manager runs the static and dynamic listeners. Safe for concurrent use; Close stops
// everything it started and waits for it.
type Manager struct {
	deps   Deps
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners map[string]*active
	static    map[string]bool
	conns     map[net.Conn]bool // open connections: true for those Finish waits for
	wg        sync.WaitGroup
	total     *stats.Stat
	workers   chan struct{} // closed once listeners may accept
	startOnce sync.Once
	// finishing is closed by Finish: every HTTP connection drains at once, whatever the
	// drain strategy. answering counts the open connections Finish waits for (all but
	// tcp_proxy ones, which a drain does not end); answered, when set, is closed as that
	// count drops to zero.
	finishing  chan struct{}
	finishOnce sync.Once
	answering  int
	answered   chan struct{}
	mxOnce     sync.Once
	mx         *peer.MXStats
}

// active is one running listener; its socket (when bound) outlives config updates that
// keep the address.
type active struct {
	gen       atomic.Pointer[generation]
	ln        net.Listener // nil when bind_to_port is false or after StopListeners
	stopped   atomic.Bool
	drain     chan struct{} // closed when the listener drains
	drainOnce sync.Once
}

// generation is one configuration of a listener. Connections keep the filter chain they
// were accepted with. When an LDS update changes the listener outside its filter chains,
// replaced is closed and all its connections drain; when it changes only filter chains
// (Envoy's in-place filter chain update), only the connections of the chains it changed or
// removed drain. HTTP connections drain at once (Connection: close on the next HTTP/1.1
// response, idle ones closed, GOAWAY on HTTP/2), so a changed RBAC policy or TLS mode
// reaches pooled connections after their next request; TCP connections are closed when
// the drain time ends, as Envoy closes the connections of a drained listener.
type generation struct {
	cfg      *Config
	replaced chan struct{}
	chains   map[[sha256.Size]byte]chan struct{} // by chain digest: closed when the chain goes
}

// chainGone returns the channel closed when fc stops being part of the listener.
func (g *generation) chainGone(fc *FilterChain) <-chan struct{} {
	if ch, ok := g.chains[fc.Digest]; ok {
		return ch
	}
	return nil // never closed
}

func newGeneration(c *Config, replaced chan struct{}, old map[[sha256.Size]byte]chan struct{}) *generation {
	g := &generation{cfg: c, replaced: replaced, chains: map[[sha256.Size]byte]chan struct{}{}}
	for _, fc := range append(append([]*FilterChain(nil), c.Chains...), c.Default) {
		if fc == nil {
			continue
		}
		if ch, ok := old[fc.Digest]; ok {
			g.chains[fc.Digest] = ch
		} else if _, ok := g.chains[fc.Digest]; !ok {
			g.chains[fc.Digest] = make(chan struct{})
		}
	}
	return g
}

func newActive(c *Config) *active {
	a := &active{drain: make(chan struct{})}
	a.gen.Store(newGeneration(c, make(chan struct{}), nil))
	return a
}

// config returns the listener's current configuration.
func (a *active) config() *Config { return a.gen.Load().cfg }

// update installs c; when it differs from the current configuration, connections accepted
// under the old one, or under the chains it changed, start draining.
func (a *active) update(c *Config) {
	old := a.gen.Load()
	switch {
	case old.cfg.Digest == c.Digest:
		a.gen.Store(&generation{cfg: c, replaced: old.replaced, chains: old.chains})
	case old.cfg.OuterDigest == c.OuterDigest:
		g := newGeneration(c, old.replaced, old.chains)
		a.gen.Store(g)
		for d, ch := range old.chains {
			if _, kept := g.chains[d]; !kept {
				close(ch)
			}
		}
	default:
		a.gen.Store(newGeneration(c, make(chan struct{}), nil))
		close(old.replaced)
	}
}

// NewManager returns a Manager with no listeners.
func NewManager(deps Deps) *Manager {
	if deps.OriginalDst == nil {
		deps.OriginalDst = origdst.OriginalDst
	}
	ctx, cancel := context.WithCancel(context.Background())
	workers := make(chan struct{})
	if !deps.DeferAccept {
		close(workers)
	}
	return &Manager{
		deps: deps, ctx: ctx, cancel: cancel,
		listeners: map[string]*active{},
		static:    map[string]bool{},
		conns:     map[net.Conn]bool{},
		total:     deps.Stats.Named("listener_manager").Gauge("total_listeners_active"),
		workers:   workers,
		finishing: make(chan struct{}),
	}
}

// StartWorkers lets the listeners accept (see Deps.DeferAccept).
func (m *Manager) StartWorkers() { m.startOnce.Do(func() { close(m.workers) }) }

// AddStatic starts the bootstrap's listeners.
func (m *Manager) AddStatic(cfgs []*Config) error {
	if err := m.apply(cfgs, true); err != nil {
		return err
	}
	return nil
}

// ApplyLDS replaces the dynamic listeners with cfgs (state of the world). A listener whose
// address did not change keeps its socket and takes the new configuration for new
// connections. If a new address cannot be bound, nothing changes and the error is a
// *BindError naming the listener.
func (m *Manager) ApplyLDS(cfgs []*Config) error { return m.apply(cfgs, false) }

func (m *Manager) apply(cfgs []*Config, static bool) error {
	m.recordIstioBuild(cfgs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return errors.New("apply listeners: listener manager is closed")
	}
	want := map[string]*Config{}
	for _, c := range cfgs {
		if _, dup := want[c.Name]; dup {
			return fmt.Errorf("apply listeners: duplicate listener name %s", c.Name)
		}
		want[c.Name] = c
	}
	// Bind every new socket first, so a failure changes nothing.
	fresh := map[string]net.Listener{}
	for name, c := range want {
		old, ok := m.listeners[name]
		if ok && sameSocket(old.config(), c) {
			continue
		}
		if !c.BindToPort {
			continue
		}
		ln, err := m.listen(c.Addr)
		if err != nil {
			for _, l := range fresh {
				_ = l.Close()
			}
			return &BindError{Listener: name, Addr: c.Addr, Err: err}
		}
		fresh[name] = ln
	}
	if !static {
		for name, a := range m.listeners {
			if _, keep := want[name]; !keep && !m.static[name] {
				a.close()
				delete(m.listeners, name)
				if a.config().Internal {
					m.deps.Clusters.Internal().Unregister(name)
				}
			}
		}
	}
	for name, c := range want {
		if old, ok := m.listeners[name]; ok && sameSocket(old.config(), c) {
			old.update(c)
			continue
		} else if ok {
			old.close()
		}
		a := newActive(c)
		if ln, ok := fresh[name]; ok {
			a.ln = ln
			m.wg.Add(1)
			go m.acceptLoop(a, ln)
		}
		m.listeners[name] = a
		if static {
			m.static[name] = true
		}
	}
	for name, c := range want {
		if c.Internal {
			m.deps.Clusters.Internal().Register(name, m.acceptInternal(name))
		} else {
			m.deps.Clusters.Internal().Unregister(name) // it was internal, is no more
		}
	}
	m.total.Set(int64(len(m.listeners)))
	return nil
}

// listen binds addr, or takes the hot restart parent's socket for it: the same socket,
// so connections queued on it are accepted by whichever process is quicker and none is
// refused.
func (m *Manager) listen(addr netip.AddrPort) (net.Listener, error) {
	if m.deps.InheritSocket != nil && addr.Port() != 0 {
		if ln := m.deps.InheritSocket(addr); ln != nil {
			return ln, nil
		}
	}
	return net.Listen("tcp", addr.String())
}

// SocketFile returns a duplicate of the listen socket bound to addr, for a hot restart
// child, or nil when no running listener is bound there. The caller closes it.
func (m *Manager) SocketFile(addr netip.AddrPort) *os.File {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.listeners {
		tl, ok := a.ln.(*net.TCPListener)
		if !ok || a.stopped.Load() {
			continue
		}
		// Match the configured address (Go binds 0.0.0.0 as a dual-stack [::] socket),
		// or the bound one when the configuration asked for port 0.
		match := a.config().Addr == addr
		if bound, err := netip.ParseAddrPort(tl.Addr().String()); err == nil && a.config().Addr.Port() == 0 {
			match = netip.AddrPortFrom(bound.Addr().Unmap(), bound.Port()) == addr
		}
		if !match {
			continue
		}
		f, err := tl.File()
		if err != nil {
			m.deps.Logger.Warn(fmt.Sprintf("duplicate listen socket %s: %v", addr, err))
			return nil
		}
		return f
	}
	return nil
}

// Drain starts draining the listeners (all, or only INBOUND ones): HTTP connections
// answer with Connection: close and idle keep-alive connections are closed. Listeners
// keep accepting; StopListeners stops that.
func (m *Manager) Drain(inboundOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.listeners {
		if !inboundOnly || a.config().Inbound {
			a.drainOnce.Do(func() { close(a.drain) })
		}
	}
}

func sameSocket(a, b *Config) bool {
	return a.Addr == b.Addr && a.BindToPort == b.BindToPort
}

func (a *active) close() {
	a.stopped.Store(true)
	if a.ln != nil {
		_ = a.ln.Close()
	}
}

// Addr returns the bound address of the named listener (useful when it asked for port 0).
func (m *Manager) Addr(name string) (netip.AddrPort, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.listeners[name]
	if !ok || a.ln == nil {
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(a.ln.Addr().String())
	return ap, err == nil
}

// Configs returns the running listeners' configurations sorted by name.
func (m *Manager) Configs() []*Config {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Config, 0, len(m.listeners))
	for _, a := range m.listeners {
		out = append(out, a.config())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// StopListeners closes the listen sockets (all, or only INBOUND ones) so no new
// connection is accepted; open connections continue.
func (m *Manager) StopListeners(inboundOnly bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.listeners {
		if !inboundOnly || a.config().Inbound {
			a.close()
		}
	}
}

// Finish closes the listen sockets, drains every listener at once (idle HTTP/1.1
// connections close, an active one after its response, which carries Connection: close;
// HTTP/2 gets GOAWAY) and waits until the open connections other than tcp_proxy ones
// have ended or deadline passes. It is what a hot restart parent does when it has to exit
// before its child would have terminated it (its grandchild started, or it was sent
// SIGTERM): a request it has already read is answered rather than cut. Close then closes
// whatever is left.
func (m *Manager) Finish(deadline time.Time) {
	m.mu.Lock()
	for _, a := range m.listeners {
		a.close()
		a.drainOnce.Do(func() { close(a.drain) })
	}
	m.finishOnce.Do(func() { close(m.finishing) })
	if m.answering == 0 {
		m.mu.Unlock()
		return
	}
	gone := make(chan struct{})
	m.answered = gone
	m.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	case <-m.ctx.Done():
	}
}

// Close stops every listener, closes every open connection and waits for their
// goroutines.
func (m *Manager) Close() {
	m.mu.Lock()
	m.cancel()
	for _, a := range m.listeners {
		a.close()
	}
	for c := range m.conns {
		_ = c.Close()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Manager) acceptLoop(a *active, ln net.Listener) {
	defer m.wg.Done()
	select {
	case <-m.workers:
	case <-m.ctx.Done():
		return
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		m.mu.Lock()
		if m.ctx.Err() != nil {
			m.mu.Unlock()
			_ = conn.Close()
			return
		}
		m.conns[conn] = true
		m.answering++
		m.wg.Add(1)
		m.mu.Unlock()
		go m.handle(a, conn)
	}
}

// acceptInternal returns the accept function of internal listener name: the connection
// is served by the listener's configuration at the time it arrives, as one accepted on a
// socket; a stopped or removed listener refuses it (closes it).
func (m *Manager) acceptInternal(name string) internalconn.Accept {
	return func(c *internalconn.Conn) func() {
		m.mu.Lock()
		a, ok := m.listeners[name]
		if !ok || m.ctx.Err() != nil || a.stopped.Load() || !a.config().Internal {
			m.mu.Unlock()
			_ = c.Close()
			return nil
		}
		m.conns[c] = true
		m.answering++
		m.wg.Add(1)
		m.mu.Unlock()
		return func() { m.handle(a, c) }
	}
}

// internalAddrs are the local and remote addresses of a connection an internal listener
// accepted. The original_dst listener filter restores them as Envoy's does on an
// internal listener: the local address from the passthrough dynamic metadata
// envoy.filters.listener.original_dst "local", else from the shared filter state
// envoy.filters.listener.original_dst.local_ip; the remote address from
// envoy.filters.listener.original_dst.remote_ip. Without them (or the filter) both are
// invalid: an internal address is no IP address.
func internalAddrs(c *internalconn.Conn, originalDst bool) (local, remote netip.AddrPort) {
	if !originalDst {
		return local, remote
	}
	parse := func(s string) netip.AddrPort {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	if v := c.Metadata[OriginalDstFilterName].GetFields()["local"]; v != nil {
		local = parse(v.GetStringValue())
	}
	if !local.IsValid() {
		local = parse(c.FilterState[OriginalDstFilterName+".local_ip"].Value)
	}
	remote = parse(c.FilterState[OriginalDstFilterName+".remote_ip"].Value)
	return local, remote
}

// notAnsweringLocked takes c out of the connections Finish waits for.
func (m *Manager) notAnsweringLocked(c net.Conn) {
	if !m.conns[c] {
		return
	}
	m.conns[c] = false
	m.answering--
	if m.answering == 0 && m.answered != nil {
		close(m.answered)
		m.answered = nil
	}
}

// handle runs one downstream connection to completion.
func (m *Manager) handle(a *active, conn net.Conn) {
	defer m.wg.Done()
	raw := conn // conn is replaced by the inspected and TLS connections below
	defer func() {
		_ = raw.Close()
		m.mu.Lock()
		m.notAnsweringLocked(raw)
		delete(m.conns, raw)
		m.mu.Unlock()
	}()
	gen := a.gen.Load()
	cfg := gen.cfg
	local, _ := netip.ParseAddrPort(conn.LocalAddr().String())
	remote, _ := netip.ParseAddrPort(conn.RemoteAddr().String())
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	remote = netip.AddrPortFrom(remote.Addr().Unmap(), remote.Port())
	var dynamicMD map[string]*structpb.Struct
	var filterState map[string]internalconn.Object
	if ic, ok := conn.(*internalconn.Conn); ok {
		local, remote = internalAddrs(ic, cfg.OriginalDstFilter)
		dynamicMD, filterState = ic.Metadata, ic.FilterState
	}
	if cfg.UseOriginalDst || cfg.OriginalDstFilter {
		if tc, ok := conn.(*net.TCPConn); ok {
			if od, err := m.deps.OriginalDst(tc); err == nil {
				local = od
			}
		}
	}
	if cfg.UseOriginalDst {
		if target := m.handoffTarget(a, local); target != nil {
			gen, cfg = target, target.cfg
		}
	}
	ls := m.deps.Stats.Listener(cfg.StatName)
	ls.Counter("downstream_cx_total").Inc()
	active := ls.Gauge("downstream_cx_active")
	active.Inc()
	defer active.Dec()
	accepted := time.Now()
	defer func() {
		ls.Counter("downstream_cx_destroy").Inc()
		ls.Histogram("downstream_cx_length_ms").Record(uint64(time.Since(accepted).Milliseconds()))
	}()
	ci := ConnInfo{Local: local, Remote: remote, TransportProtocol: "raw_buffer"}
	if cfg.TLSInspector || cfg.HTTPInspector {
		ci, conn = inspect(cfg, conn, ci)
	}
	fc := cfg.Select(ci)
	if fc == nil {
		ls.Counter("no_filter_chain_match").Inc()
		if len(cfg.AccessLogs) > 0 {
			accesslog.LogAll(cfg.AccessLogs, &accesslog.Info{Start: accepted, Duration: time.Since(accepted),
				Flags: accesslog.NoRouteFound, DownstreamLocal: local, DownstreamPeer: remote,
				RequestedServerName: ci.ServerName, ConnectionTerminationDetails: "filter_chain_not_found"})
		}
		return
	}
	var localCert, peer *x509.Certificate
	sni := ci.ServerName // from tls_inspector, as Envoy's requestedServerName
	if fc.TLS != nil {
		store := m.deps.Secrets
		if store == nil {
			store = tlsctx.NewStore()
		}
		hctx := m.ctx
		if fc.ConnectTimeout > 0 {
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(m.ctx, fc.ConnectTimeout)
			defer cancel()
		}
		tc, err := fc.TLS.Handshake(hctx, conn, store, ls)
		if err != nil {
			if fc.ConnectTimeout > 0 && errors.Is(hctx.Err(), context.DeadlineExceeded) {
				ls.Counter("downstream_cx_transport_socket_connect_timeout").Inc()
			}
			m.deps.Logger.Debug("downstream tls handshake failed", "listener", cfg.Name, "remote", remote.String(), "err", err)
			drainBeforeClose(conn)
			return
		}
		conn = tc
		if fc.HTTP != nil {
			conn = tlsctx.HTTP1Conn{Conn: tc}
		}
		localCert = fc.TLS.LocalLeaf(store)
		cs := tc.ConnectionState()
		if pc := cs.PeerCertificates; len(pc) > 0 {
			peer = pc[0]
		}
		if sni == "" { // no tls_inspector: the TLS transport socket sets it in Envoy
			sni = cs.ServerName
		}
	}
	conn, ist := m.istioConn(fc, conn, localCert, peer)
	if len(fc.SetState) > 0 {
		info := &accesslog.Info{Start: accepted, DownstreamLocal: local, DownstreamPeer: remote, DynamicMetadata: dynamicMD,
			FilterChainName: fc.Name, RequestedServerName: sni, PeerURISAN: ist.PeerSAN, LocalURISAN: ist.LocalSAN}
		for _, s := range fc.SetState {
			filterState = s.Apply(filterState, info)
		}
	}
	// Upstream connections made for this connection carry the objects it shares.
	ctx := internalconn.WithFilterState(m.ctx, filterState)
	in := &rbac.Input{Local: local, DirectRemote: remote, Remote: remote, TLS: fc.TLS != nil, Peer: peer, ServerName: sni,
		FilterState: internalconn.Values(filterState), DynamicMetadata: dynamicMD}
	var rbacLog *slog.Logger
	if len(fc.RBAC) > 0 {
		rbacLog = m.deps.Logger.With("component", rbac.LoggerName)
	}
	if slices.ContainsFunc(fc.RBAC, func(r *rbac.NetworkConfig) bool { return r.Shadow != nil }) {
		// Shadow results go to the connection's own metadata (the access log's), not to
		// the map an internal connection's origin handed over.
		dynamicMD = maps.Clone(dynamicMD)
		if dynamicMD == nil {
			dynamicMD = map[string]*structpb.Struct{}
		}
	}
	authorize := func() (bool, string) {
		for _, r := range fc.RBAC {
			res := r.NetworkStats(m.deps.Stats).CheckConnection(&r.Rules, in, rbacLog)
			res.MergeInto(dynamicMD, rbac.NetworkFilterName)
			if !res.Allowed {
				detail := rbac.ResponseDetail(res.Policy)
				m.deps.Logger.Debug("connection denied by rbac", "listener", cfg.Name, "remote", remote.String(), "detail", detail)
				return false, detail
			}
		}
		return true, ""
	}
	if fc.TCP == nil { // tcp_proxy authorizes once connected upstream
		if ok, _ := authorize(); !ok {
			return
		}
	}
	gone := gen.chainGone(fc)
	switch {
	case fc.TCP != nil:
		m.mu.Lock()
		m.notAnsweringLocked(raw)
		m.mu.Unlock()
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-gen.replaced:
			case <-gone:
			case <-done:
				return
			}
			t := time.NewTimer(m.deps.DrainTime)
			defer t.Stop()
			select {
			case <-t.C:
				_ = raw.Close() // the drain time of the replaced chain is over
			case <-done:
			}
		}()
		tcpproxy.Serve(ctx, fc.TCP, tcpproxy.Deps{Clusters: m.deps.Clusters, Stats: m.deps.Stats, Logger: m.deps.Logger}, conn,
			tcpproxy.Downstream{Local: local, Metadata: dynamicMD, FilterState: filterState, FilterChainName: fc.Name, ServerName: sni, Authorize: authorize,
				Inbound: cfg.Inbound, IstioStats: fc.IstioStats, MX: fc.MX != nil, Exchange: ist.Exchange, PeerSAN: ist.PeerSAN, LocalSAN: ist.LocalSAN})
	case fc.HTTP != nil:
		draining := make(chan struct{})
		done := make(chan struct{})
		defer close(done)
		var drainStart atomic.Int64 // unix nanoseconds; 0 until the drain starts
		gradual := m.deps.DrainGradual && m.deps.DrainTime >= time.Second
		drainClose := drainCloseFunc(m.deps.HealthCheckFailed, gradual, &drainStart, m.deps.DrainTime)
		if gradual {
			more := drainClose
			drainClose = func() bool {
				select {
				case <-m.finishing:
					return true
				default:
				}
				return more()
			}
		} else {
			// Asked as each request arrives: a request sent after the listener update
			// returned is answered with Connection: close, whichever goroutine runs first.
			more := drainClose
			drainClose = func() bool {
				select {
				case <-a.drain:
					return true
				case <-gen.replaced:
					return true
				case <-gone:
					return true
				default:
				}
				return more != nil && more()
			}
		}
		go func() {
			select {
			case <-a.drain:
			case <-gen.replaced:
			case <-gone:
			case <-done:
				return
			}
			if gradual {
				drainStart.Store(time.Now().UnixNano())
				t := time.NewTimer(m.deps.DrainTime)
				defer t.Stop()
				select {
				case <-t.C:
				case <-m.finishing:
				case <-done:
					return
				}
			}
			close(draining)
		}()
		httpconn.ServeConn(ctx, fc.HTTP, httpconn.Deps{Routes: m.deps.Routes, Clusters: m.deps.Clusters, Stats: m.deps.Stats, Logger: m.deps.Logger,
			Draining: draining, DrainClose: drainClose, Tracer: m.deps.Tracer},
			conn, httpconn.Downstream{Local: local, Remote: remote, LocalCert: localCert, FilterChainName: fc.Name, ServerName: sni, FilterState: filterState,
				Inbound: cfg.Inbound, PeerSAN: ist.PeerSAN, LocalSAN: ist.LocalSAN})
	}
}

// handoffTarget returns the configuration of the listener whose address is exactly dst,
// else the one on 0.0.0.0 (or ::) with dst's port, else nil (the accepting listener keeps
// the connection), as Envoy does for use_original_dst.
func (m *Manager) handoffTarget(self *active, dst netip.AddrPort) *generation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var wildcard *generation
	for _, a := range m.listeners {
		if a == self || a.stopped.Load() && a.ln != nil {
			continue
		}
		g := a.gen.Load()
		if g.cfg.Addr == dst {
			return g
		}
		if g.cfg.Addr.Port() == dst.Port() && g.cfg.Addr.Addr().IsUnspecified() && g.cfg.Addr.Addr().Is4() == dst.Addr().Is4() {
			wildcard = g
		}
	}
	return wildcard
}

// ConnCount returns the number of open downstream connections.
func (m *Manager) ConnCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.conns)
}

// drainBeforeClose reads what the client still sends after a failed handshake (in TLS
// 1.3 a client sends its request before it learns that its certificate was refused), for
// at most a second, so the close that follows is a FIN and not a reset: a reset would
// discard the TLS alert in the client's receive queue, and the client could not say why
// it was refused (curl's "tlsv13 alert certificate required", as the Secure Gateways
// page shows from Envoy).
func drainBeforeClose(conn net.Conn) {
	if err := conn.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, conn)
}
