package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
	"github.com/meshlab/meshlab/dataplane/proxy/tlsctx"
)

// ErrNoHealthyUpstream is returned by Pick when the cluster has no host to offer.
var ErrNoHealthyUpstream = errors.New("no healthy upstream")

// Stats are a cluster's counters and gauges under Envoy's names.
type Stats struct {
	scope            stats.Scope
	UpstreamCxTotal  *stats.Stat
	UpstreamCxActive *stats.Stat
	UpstreamCxFail   *stats.Stat
	UpstreamCxNone   *stats.Stat
	UpstreamRqTotal  *stats.Stat
	// rqTotal is the pod's shared outbound or inbound total (dataplane/rqtotals); nil
	// for none.
	rqTotal           *atomic.Uint64
	UpstreamRqDone    *stats.Stat
	UpstreamRqTimeout *stats.Stat
	MembershipTotal   *stats.Stat
	MembershipHealthy *stats.Stat
	// Retries and timeouts, counted by the router.
	UpstreamRqRetry           *stats.Stat
	UpstreamRqRetrySuccess    *stats.Stat
	UpstreamRqRetryLimit      *stats.Stat
	UpstreamRqRetryBackoffExp *stats.Stat
	UpstreamRqPerTryTimeout   *stats.Stat
	UpstreamRqActive          *stats.Stat
	UpstreamCxMaxRequests     *stats.Stat
	LBHealthyPanic            *stats.Stat

	UpstreamCxConnectMs *stats.Histogram // connect (and TLS handshake) time
	UpstreamCxLengthMs  *stats.Histogram // connection lifetime
	UpstreamRqTime      *stats.Histogram // request start to upstream response end

	codes *stats.CodeCounters // upstream_rq_<code> and upstream_rq_<N>xx
}

func newStats(store *stats.Store, name string) *Stats {
	sc := store.Cluster(name)
	return &Stats{
		scope:             sc,
		UpstreamCxTotal:   sc.Counter("upstream_cx_total"),
		UpstreamCxActive:  sc.Gauge("upstream_cx_active"),
		UpstreamCxFail:    sc.Counter("upstream_cx_connect_fail"),
		UpstreamCxNone:    sc.Counter("upstream_cx_none_healthy"),
		UpstreamRqTotal:   sc.Counter("upstream_rq_total"),
		rqTotal:           store.RequestTotal(name),
		UpstreamRqDone:    sc.Counter("upstream_rq_completed"),
		UpstreamRqTimeout: sc.Counter("upstream_rq_timeout"),
		MembershipTotal:   sc.Gauge("membership_total"),
		MembershipHealthy: sc.Gauge("membership_healthy"),

		UpstreamRqRetry:           sc.Counter("upstream_rq_retry"),
		UpstreamRqRetrySuccess:    sc.Counter("upstream_rq_retry_success"),
		UpstreamRqRetryLimit:      sc.Counter("upstream_rq_retry_limit_exceeded"),
		UpstreamRqRetryBackoffExp: sc.Counter("upstream_rq_retry_backoff_exponential"),
		UpstreamRqPerTryTimeout:   sc.Counter("upstream_rq_per_try_timeout"),
		UpstreamRqActive:          sc.Gauge("upstream_rq_active"),
		UpstreamCxMaxRequests:     sc.Counter("upstream_cx_max_requests"),
		LBHealthyPanic:            sc.Counter("lb_healthy_panic"),

		UpstreamCxConnectMs: sc.Histogram("upstream_cx_connect_ms"),
		UpstreamCxLengthMs:  sc.Histogram("upstream_cx_length_ms"),
		UpstreamRqTime:      sc.Histogram("upstream_rq_time"),

		codes: stats.NewCodeCounters(sc, "upstream_rq_"),
	}
}

// Scope returns the cluster's stats scope (cluster.<alt_stat_name or name>.*), where
// filters such as grpc_stats charge their per-cluster stats.
func (s *Stats) Scope() stats.Scope { return s.scope }

// RecordResponse counts a completed upstream request with its status code, as
// upstream_rq_<code>, upstream_rq_<N>xx and upstream_rq_completed.
func (s *Stats) RecordResponse(code int) {
	s.codes.Code(code).Inc()
	s.codes.Class(code).Inc()
	s.UpstreamRqDone.Inc()
}

// Cluster is one running cluster. Safe for concurrent use.
type Cluster struct {
	cfg       *Config
	stats     *Stats
	hosts     atomic.Pointer[hostSet]
	next      atomic.Uint64
	transport *http.Transport
	h1        *h1Pool          // HTTP/1.1 requests with replayable bodies; nil for HTTP/2
	h2        *http2.Transport //nolint:staticcheck // see newCluster: net/http has no equivalent; set for an HTTP/2 cluster, which sends every request on it
	// perHost is read several times per request (pick, admit, send, report): a plain
	// map under a read lock, as a sync.Map would box every hostKey into an interface,
	// one allocation per lookup.
	perHostMu sync.RWMutex
	perHost   map[hostKey]*hostState
	breaker   *breaker
	outlier   *outlier // nil without outlier_detection
	secrets   *tlsctx.Store
	internal  *internalconn.Registry // the proxy's internal listeners
	stopDNS   func()                 // STRICT_DNS: stops re-resolution
	mx        *peer.MXStats          // metadata_exchange.* counters; nil without an MX filter
}

// hostState is what the cluster tracks per upstream host: /clusters counters, active
// requests (LEAST_REQUEST) and outlier detection state (guarded by outlier.mu).
type hostState struct {
	addr                                         string // the host's address as a URL host, formatted once
	cxTotal, cxActive, cxFail, rqTotal, rqActive atomic.Int64
	ejected                                      atomic.Bool
	consecutive5xx, consecutiveGw, numEjections  uint32
}

func newCluster(cfg *Config, store *stats.Store) *Cluster {
	statName := cfg.StatName
	if statName == "" {
		statName = cfg.Name
	}
	c := &Cluster{cfg: cfg, stats: newStats(store, statName)}
	if cfg.MX != nil {
		c.mx = peer.NewMXStats(store)
	}
	th := cfg.Thresholds
	if cfg.Proto == nil { // built by hand, not compiled: Envoy's defaults
		th = DefaultThresholds
	}
	c.breaker = newBreaker(th, c.stats.scope)
	if cfg.Outlier != nil {
		c.outlier = newOutlier(c, cfg.Outlier, c.stats.scope)
	}
	idle := cfg.IdleTimeout
	if idle == 0 {
		idle = time.Hour
	}
	c.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         c.dialForTransport,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     idle,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	if th.MaxConnections < 64 {
		c.transport.MaxIdleConnsPerHost = int(max(th.MaxConnections, 1))
	}
	if !cfg.HTTP2 {
		c.h1 = newH1Pool(c.dialForTransport, c.transport.MaxIdleConnsPerHost, idle)
	}
	if cfg.HTTP2 || cfg.DownstreamHTTP2 {
		c.breaker.multiplexed = cfg.HTTP2
		// x/net/http2 rather than net/http: Envoy's upstream :scheme follows the transport
		// socket, so a request goes out as https on a connection the cluster's own dialer
		// has already secured and wrapped (stats, metadata exchange); net/http would do TLS
		// itself for https and not see h2 on the wrapped connection.
		//nolint:staticcheck // SA1019: see above
		c.h2 = &http2.Transport{
			AllowHTTP: true, // h2c with prior knowledge when the cluster has no TLS
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return c.dialHTTP2(ctx, network, addr)
			},
			IdleConnTimeout:    idle,
			DisableCompression: true,
		}
	}
	c.setHosts(cfg.Static)
	return c
}

// sendsHTTP2 reports whether req goes upstream over HTTP/2: always for an HTTP/2
// cluster, under use_downstream_protocol_config when it arrived over HTTP/2.
func (c *Cluster) sendsHTTP2(req *http.Request) bool {
	return c.h2 != nil && (c.cfg.HTTP2 || req.ProtoMajor == 2)
}

// UpstreamHTTP2 reports whether a request of this downstream protocol major version
// goes upstream over HTTP/2 (istio.alpn picks its ALPN override by it).
func (c *Cluster) UpstreamHTTP2(downstreamMajor int) bool {
	return c.h2 != nil && (c.cfg.HTTP2 || downstreamMajor == 2)
}

// closeIdle closes the cluster's idle pooled connections.
func (c *Cluster) closeIdle() {
	c.transport.CloseIdleConnections()
	if c.h1 != nil {
		c.h1.closeIdle()
	}
	if c.h2 != nil {
		c.h2.CloseIdleConnections() //nolint:staticcheck // x/net/http2, see newCluster
	}
}

// startDNS starts re-resolving a STRICT_DNS cluster's names with r.
func (c *Cluster) startDNS(r Resolver) {
	if c.cfg.Type != TypeStrictDNS || c.cfg.DNS == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.resolveLoop(ctx, r)
	}()
	c.stopDNS = func() {
		cancel()
		<-done
	}
}

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.cfg.Name }

// Config returns the cluster's configuration.
func (c *Cluster) Config() *Config { return c.cfg }

// Stats returns the cluster's stats.
func (c *Cluster) Stats() *Stats { return c.stats }

// hostSet is an immutable snapshot of a cluster's hosts.
type hostSet struct {
	all, healthy []Host
}

// Hosts returns the current hosts.
func (c *Cluster) Hosts() []Host {
	if p := c.hosts.Load(); p != nil {
		return p.all
	}
	return nil
}

func (c *Cluster) setHosts(hosts []Host) {
	c.countSocketMatches(c.Hosts(), hosts)
	hs := &hostSet{all: append([]Host(nil), hosts...)}
	for _, h := range hs.all {
		if h.Healthy {
			hs.healthy = append(hs.healthy, h)
		}
	}
	c.hosts.Store(hs)
	c.stats.MembershipTotal.Set(int64(len(hs.all)))
	c.stats.MembershipHealthy.Set(int64(len(hs.healthy)))
	c.closeIdle()
}

// Pick chooses the upstream host for one request or connection: the original
// destination for ORIGINAL_DST clusters, else the next healthy host in round-robin order.
// It returns ErrNoHealthyUpstream (and counts upstream_cx_none_healthy) when there is none.
func (c *Cluster) Pick(originalDst netip.AddrPort) (Host, error) {
	return c.PickFor(originalDst, nil)
}

// PickFor is Pick for a downstream with dynamic metadata md, which an ORIGINAL_DST
// cluster's original_dst_lb_config.metadata_key may take the host from.
func (c *Cluster) PickFor(originalDst netip.AddrPort, md map[string]*structpb.Struct) (Host, error) {
	if c.cfg.Type == TypeOriginalDst {
		dst := originalDst
		if od := c.cfg.OrigDst; od != nil {
			if ap, ok := metadataAddr(md, od.MetadataNS, od.MetadataPath); ok {
				dst = ap
			}
			if od.PortOverride != 0 && dst.IsValid() {
				dst = netip.AddrPortFrom(dst.Addr(), uint16(od.PortOverride))
			}
		}
		if !dst.IsValid() {
			c.stats.UpstreamCxNone.Inc()
			return Host{}, ErrNoHealthyUpstream
		}
		return Host{Addr: dst, Healthy: true}, nil
	}
	hosts := c.available(c.hosts.Load())
	if len(hosts) == 0 {
		c.stats.UpstreamCxNone.Inc()
		return Host{}, ErrNoHealthyUpstream
	}
	return c.choose(hosts), nil
}

// UpstreamCxOverflow returns the upstream_cx_overflow counter.
func (s *Stats) UpstreamCxOverflow() *stats.Stat { return s.scope.Counter("upstream_cx_overflow") }

// PickAvoiding is Pick for a retry with Envoy's previous_hosts retry predicate: it picks
// again, up to attempts more times, while the pick is one of tried.
func (c *Cluster) PickAvoiding(originalDst netip.AddrPort, tried []Host, attempts int) (Host, error) {
	h, err := c.Pick(originalDst)
	for i := 0; err == nil && i < attempts && containsHost(tried, h); i++ {
		h, err = c.Pick(originalDst)
	}
	return h, err
}

func containsHost(hs []Host, h Host) bool {
	for _, x := range hs {
		if x.key() == h.key() {
			return true
		}
	}
	return false
}

// Admit applies the cluster's circuit breakers to one request: it may wait as a pending
// request, and fails with ErrOverflow when a threshold overflows. The returned function
// ends the request.
func (c *Cluster) Admit(ctx context.Context) (func(), error) {
	return c.breaker.acquire(ctx)
}

// AdmitRetry applies the max_retries circuit breaker to one retry; false means the
// retry budget overflowed (upstream_rq_retry_overflow counted).
func (c *Cluster) AdmitRetry() (func(), bool) { return c.breaker.acquireRetry() }

// ReportResult feeds outlier detection with the result of one request to h: an HTTP
// status, or 503 for a connect failure or reset and 504 for a timeout.
func (c *Cluster) ReportResult(h Host, code int) {
	if c.outlier != nil && c.cfg.Type != TypeOriginalDst {
		c.outlier.report(h, code)
	}
}

// HealthFlags returns the host's health flags as Envoy prints them in /clusters
// ("healthy", or e.g. "/failed_outlier_check", "/failed_eds_health").
func (c *Cluster) HealthFlags(h Host) string {
	var f string
	if !h.Healthy {
		f += "/failed_eds_health"
	}
	if c.hostState(h).ejected.Load() {
		f += "/failed_outlier_check"
	}
	if f == "" {
		return "healthy"
	}
	return f
}

// Dial opens an upstream connection to h with the cluster's connect timeout and bind
// address, counting upstream_cx_total, upstream_cx_active and upstream_cx_connect_fail.
// The returned connection decrements upstream_cx_active when closed.
func (c *Cluster) Dial(ctx context.Context, h Host) (net.Conn, error) {
	hs := c.hostState(h)
	c.stats.UpstreamCxTotal.Inc()
	hs.cxTotal.Add(1)
	d := net.Dialer{Timeout: c.cfg.ConnectTimeout}
	if ka := c.cfg.KeepAlive; ka != nil {
		d.KeepAliveConfig = *ka
	}
	start := time.Now()
	if c.cfg.BindSource.IsValid() && h.Pipe == "" {
		d.LocalAddr = &net.TCPAddr{IP: c.cfg.BindSource.AsSlice()}
	}
	var conn net.Conn
	var err error
	if h.Internal.Listener != "" {
		conn, err = c.dialInternal(ctx, h)
	} else {
		conn, err = d.DialContext(ctx, h.Network(), h.DialAddr())
	}
	if tc, _ := c.cfg.Transport(h); err == nil && tc != nil {
		conn, err = c.handshake(ctx, conn, tc)
	}
	if err == nil && c.cfg.MX != nil {
		conn, _ = c.cfg.MX.Wrap(conn, c.mx)
	}
	if err != nil {
		c.stats.UpstreamCxFail.Inc()
		hs.cxFail.Add(1)
		return nil, fmt.Errorf("connect to %s: %w", h, err)
	}
	connected := time.Now()
	c.stats.UpstreamCxConnectMs.Record(uint64(connected.Sub(start).Milliseconds()))
	c.stats.UpstreamCxActive.Inc()
	hs.cxActive.Add(1)
	return &countedConn{Conn: conn, maxRequests: int64(c.cfg.MaxRequestsPerConnection), done: func() {
		c.stats.UpstreamCxLengthMs.Record(uint64(time.Since(connected).Milliseconds()))
		c.stats.UpstreamCxActive.Dec()
		hs.cxActive.Add(-1)
	}}, nil
}

// handshake runs the upstream TLS handshake within the connect timeout. Envoy raises
// the connected event only after the handshake, so a failed handshake is a connect
// failure; the error is a dial *net.OpError wrapping a *tlsctx.HandshakeError.
func (c *Cluster) handshake(ctx context.Context, conn net.Conn, ctxTLS *tlsctx.Context) (net.Conn, error) {
	hctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	store := c.secrets
	if store == nil {
		store = tlsctx.NewStore()
	}
	tc, err := ctxTLS.Handshake(hctx, conn, store, c.stats.scope)
	if err != nil {
		_ = conn.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: conn.RemoteAddr(), Err: err}
	}
	return tc, nil
}

func (c *Cluster) hostState(h Host) *hostState {
	k := h.key()
	c.perHostMu.RLock()
	hs, ok := c.perHost[k]
	c.perHostMu.RUnlock()
	if ok {
		return hs
	}
	c.perHostMu.Lock()
	defer c.perHostMu.Unlock()
	if hs, ok := c.perHost[k]; ok {
		return hs
	}
	if c.perHost == nil {
		c.perHost = map[hostKey]*hostState{}
	}
	hs = &hostState{}
	switch {
	case h.Internal.Listener != "":
		hs.addr = internalURLHost(h.Internal)
	case h.Pipe == "":
		hs.addr = h.Addr.String()
	}
	c.perHost[k] = hs
	return hs
}

// dialForTransport dials the host named by the request URL's host, which RoundTrip set
// to the picked host's address, counting upstream_cx_http1_total or upstream_cx_http2_total.
func (c *Cluster) dialForTransport(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dialCounted(ctx, addr, c.cfg.HTTP2)
}

// dialHTTP2 dials for the HTTP/2 transport (an HTTP/2 cluster, or an HTTP/2 request
// under use_downstream_protocol_config).
func (c *Cluster) dialHTTP2(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dialCounted(ctx, addr, true)
}

func (c *Cluster) dialCounted(ctx context.Context, addr string, h2 bool) (net.Conn, error) {
	if h2 {
		c.stats.scope.Counter("upstream_cx_http2_total").Inc()
	} else {
		c.stats.scope.Counter("upstream_cx_http1_total").Inc()
	}
	if ia, ok := parseInternalURLHost(addr); ok {
		for _, known := range c.Hosts() {
			if known.Internal == ia {
				return c.Dial(ctx, known) // with its metadata for passthrough
			}
		}
		return nil, fmt.Errorf("dial %s: %w", ia, errInternalHost)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: only socket addresses can carry HTTP: %w", addr, err)
	}
	h := Host{Addr: ap, Healthy: true}
	for _, known := range c.Hosts() {
		if known.Pipe == "" && known.Addr == ap {
			h = known // keep its endpoint metadata for transport_socket_matches
			break
		}
	}
	return c.Dial(ctx, h)
}

// RoundTrip sends req to host h over the cluster's pooled HTTP/1.1 connections, or as
// a stream on a shared HTTP/2 connection for an HTTP/2 cluster. req.Host
// keeps the downstream authority; only the connection target changes. A connection that
// reaches max_requests_per_connection is closed after its last response
// (upstream_cx_max_requests). The caller must close the response body, which ends the
// host's active request.
func (c *Cluster) RoundTrip(req *http.Request, h Host) (*http.Response, error) {
	return c.RoundTripUpstream(req, h, nil)
}

// UpstreamInfo is what RoundTripUpstream reports about the upstream connection a
// request went out on, for the access log.
type UpstreamInfo struct {
	// LocalAddr is the proxy's end of the upstream connection
	// (%UPSTREAM_LOCAL_ADDRESS%); nil when no connection was obtained.
	LocalAddr net.Addr
	// Conn is the upstream connection (its TLS state names the peer); nil when none.
	Conn net.Conn
}

// RoundTripUpstream is RoundTrip that also records, in up when it is not nil, the
// connection the request was sent on. On the pooled HTTP/1.1 path this costs nothing
// extra; on the http.Transport path (HTTP/2, upgrades, non-replayable requests) it adds
// a client trace to the request.
func (c *Cluster) RoundTripUpstream(req *http.Request, h Host, up *UpstreamInfo) (*http.Response, error) {
	return c.RoundTripAbortable(req, h, up, nil)
}

// RoundTripAbortable is RoundTripUpstream whose HTTP/1 exchange is interrupted through
// abort, when it is not nil, instead of a watch of req's context: abort must then be
// fired whenever that context ends (see Abort).
func (c *Cluster) RoundTripAbortable(req *http.Request, h Host, up *UpstreamInfo, abort *Abort) (*http.Response, error) {
	if h.Pipe != "" {
		return nil, fmt.Errorf("send request to %s: pipe hosts cannot carry HTTP", h)
	}
	req.URL.Scheme = "http"
	h2 := c.sendsHTTP2(req)
	if h2 { // only then: resolving a host's transport socket match parses its metadata
		if tc, _ := c.cfg.Transport(h); tc != nil {
			req.URL.Scheme = "https" // Envoy's upstream :scheme follows the transport socket
		}
	}
	hs := c.hostState(h)
	req.URL.Host = hs.addr
	if h.Internal.Listener != "" {
		if d := sharedDigest(internalconn.FilterStateFrom(req.Context())); d != "" {
			req.URL.Host = internalURLHostShared(h.Internal, d)
		}
	}
	c.stats.UpstreamRqTotal.Inc()
	if c.stats.rqTotal != nil {
		c.stats.rqTotal.Add(1)
	}
	hs.rqTotal.Add(1)
	hs.rqActive.Add(1)
	c.stats.UpstreamRqActive.Inc()
	var resp *http.Response
	var err error
	if !h2 && c.h1 != nil && c.h1.handles(req) {
		r1 := req // the closure's own: capturing req, which the other branch reassigns, moved it to the heap
		resp, err = c.h1.roundTrip(r1, func(conn net.Conn) {
			if up != nil {
				up.LocalAddr, up.Conn = conn.LocalAddr(), conn
			}
			c.countRequest(r1, conn)
		}, abort)
	} else {
		if c.cfg.MaxRequestsPerConnection > 0 || up != nil {
			var traced *http.Request
			traced = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(info httptrace.GotConnInfo) {
					if up != nil {
						up.LocalAddr, up.Conn = info.Conn.LocalAddr(), info.Conn
					}
					c.countRequest(traced, info.Conn)
				},
			}))
			req = traced
		}
		if h2 {
			resp, err = c.h2.RoundTrip(req) //nolint:staticcheck // x/net/http2, see newCluster
		} else {
			resp, err = c.transport.RoundTrip(req)
		}
	}
	if err != nil {
		hs.rqActive.Add(-1)
		c.stats.UpstreamRqActive.Dec()
		return nil, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, c: c, hs: hs}
	return resp, nil
}

// countRequest counts a request on an upstream connection; the one that reaches
// max_requests_per_connection closes the connection after its response.
func (c *Cluster) countRequest(req *http.Request, conn net.Conn) {
	if c.cfg.MaxRequestsPerConnection == 0 {
		return
	}
	if cc, ok := conn.(*countedConn); ok && cc.requests.Add(1) >= cc.maxRequests {
		req.Close = true
		c.stats.UpstreamCxMaxRequests.Inc()
	}
}

// doneBody ends the request's rq_active (the host's and the cluster's) when its
// response body is closed, once.
type doneBody struct {
	io.ReadCloser
	c      *Cluster
	hs     *hostState
	closed atomic.Bool
}

// Unwrap returns the transport's body: after a 101 it is the upgraded connection.
func (b *doneBody) Unwrap() io.ReadCloser { return b.ReadCloser }

func (b *doneBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.hs.rqActive.Add(-1)
		b.c.stats.UpstreamRqActive.Dec()
	}
	return b.ReadCloser.Close()
}

// close releases pooled connections and stops outlier detection timers.
func (c *Cluster) close() {
	if c.stopDNS != nil {
		c.stopDNS()
	}
	c.closeIdle()
	if c.outlier != nil {
		c.outlier.stop()
	}
}

type countedConn struct {
	net.Conn
	once        sync.Once
	done        func()
	requests    atomic.Int64
	maxRequests int64
}

// NetConn returns the connection under the counting.
func (c *countedConn) NetConn() net.Conn { return c.Conn }

// PassThrough returns the connection under the counting, whose reads and writes are this
// one's (rawio reads and writes it directly).
func (c *countedConn) PassThrough() net.Conn { return c.Conn }

func (c *countedConn) Close() error {
	c.once.Do(c.done)
	return c.Conn.Close()
}

// CloseWrite half-closes the connection when the underlying one supports it.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// HostCounters returns the per-host counters Envoy prints in /clusters for h, keyed by
// their Envoy names (cx_active, cx_connect_fail, cx_total, rq_total).
func (c *Cluster) HostCounters(h Host) map[string]int64 {
	hs := c.hostState(h)
	return map[string]int64{
		"cx_active":       hs.cxActive.Load(),
		"cx_connect_fail": hs.cxFail.Load(),
		"cx_total":        hs.cxTotal.Load(),
		"rq_total":        hs.rqTotal.Load(),
	}
}

// LocalURISAN returns the first URI SAN of the certificate the cluster presents to h
// over TLS, "" for plaintext or no certificate.
func (c *Cluster) LocalURISAN(h Host) string {
	tc, _ := c.cfg.Transport(h)
	if tc == nil {
		return ""
	}
	store := c.secrets
	if store == nil {
		return ""
	}
	if leaf := tc.LocalLeaf(store); leaf != nil && len(leaf.URIs) > 0 {
		return leaf.URIs[0].String()
	}
	return ""
}
