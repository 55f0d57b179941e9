package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// ErrNoHealthyUpstream is returned by Pick when the cluster has no host to offer.
var ErrNoHealthyUpstream = errors.New("no healthy upstream")

// Stats are a cluster's counters and gauges under Envoy's names.
type Stats struct {
	scope             stats.Scope
	UpstreamCxTotal   *stats.Stat
	UpstreamCxActive  *stats.Stat
	UpstreamCxFail    *stats.Stat
	UpstreamCxNone    *stats.Stat
	UpstreamRqTotal   *stats.Stat
	UpstreamRqDone    *stats.Stat
	UpstreamRqTimeout *stats.Stat
	MembershipTotal   *stats.Stat
	MembershipHealthy *stats.Stat
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
		UpstreamRqDone:    sc.Counter("upstream_rq_completed"),
		UpstreamRqTimeout: sc.Counter("upstream_rq_timeout"),
		MembershipTotal:   sc.Gauge("membership_total"),
		MembershipHealthy: sc.Gauge("membership_healthy"),
	}
}

// RecordResponse counts a completed upstream request with its status code, as
// upstream_rq_<code>, upstream_rq_<N>xx and upstream_rq_completed.
func (s *Stats) RecordResponse(code int) {
	s.scope.Counter(fmt.Sprintf("upstream_rq_%d", code)).Inc()
	s.scope.Counter("upstream_rq_" + stats.CodeClass(code)).Inc()
	s.UpstreamRqDone.Inc()
}

// Cluster is one running cluster. Safe for concurrent use.
type Cluster struct {
	cfg       *Config
	stats     *Stats
	hosts     atomic.Pointer[hostSet]
	next      atomic.Uint64
	transport *http.Transport
	perHost   sync.Map // host string -> *hostStats
}

type hostStats struct {
	cxTotal, cxActive, cxFail, rqTotal atomic.Int64
}

func newCluster(cfg *Config, store *stats.Store) *Cluster {
	c := &Cluster{cfg: cfg, stats: newStats(store, cfg.Name)}
	c.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         c.dialForTransport,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Hour,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	c.setHosts(cfg.Static)
	return c
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
	hs := &hostSet{all: append([]Host(nil), hosts...)}
	for _, h := range hs.all {
		if h.Healthy {
			hs.healthy = append(hs.healthy, h)
		}
	}
	c.hosts.Store(hs)
	c.stats.MembershipTotal.Set(int64(len(hs.all)))
	c.stats.MembershipHealthy.Set(int64(len(hs.healthy)))
	c.transport.CloseIdleConnections()
}

// Pick chooses the upstream host for one request or connection: the original
// destination for ORIGINAL_DST clusters, else the next healthy host in round-robin order.
// It returns ErrNoHealthyUpstream (and counts upstream_cx_none_healthy) when there is none.
func (c *Cluster) Pick(originalDst netip.AddrPort) (Host, error) {
	if c.cfg.Type == TypeOriginalDst {
		if !originalDst.IsValid() {
			c.stats.UpstreamCxNone.Inc()
			return Host{}, ErrNoHealthyUpstream
		}
		return Host{Addr: originalDst, Healthy: true}, nil
	}
	var healthy []Host
	if hs := c.hosts.Load(); hs != nil {
		healthy = hs.healthy
	}
	if len(healthy) == 0 {
		c.stats.UpstreamCxNone.Inc()
		return Host{}, ErrNoHealthyUpstream
	}
	return healthy[(c.next.Add(1)-1)%uint64(len(healthy))], nil
}

// Dial opens an upstream connection to h with the cluster's connect timeout and bind
// address, counting upstream_cx_total, upstream_cx_active and upstream_cx_connect_fail.
// The returned connection decrements upstream_cx_active when closed.
func (c *Cluster) Dial(ctx context.Context, h Host) (net.Conn, error) {
	hs := c.hostStats(h)
	c.stats.UpstreamCxTotal.Inc()
	hs.cxTotal.Add(1)
	d := net.Dialer{Timeout: c.cfg.ConnectTimeout}
	if c.cfg.BindSource.IsValid() && h.Pipe == "" {
		d.LocalAddr = &net.TCPAddr{IP: c.cfg.BindSource.AsSlice()}
	}
	conn, err := d.DialContext(ctx, h.Network(), h.DialAddr())
	if err != nil {
		c.stats.UpstreamCxFail.Inc()
		hs.cxFail.Add(1)
		return nil, fmt.Errorf("connect to %s: %w", h, err)
	}
	c.stats.UpstreamCxActive.Inc()
	hs.cxActive.Add(1)
	return &countedConn{Conn: conn, done: func() {
		c.stats.UpstreamCxActive.Dec()
		hs.cxActive.Add(-1)
	}}, nil
}

func (c *Cluster) hostStats(h Host) *hostStats {
	v, _ := c.perHost.LoadOrStore(h.String(), &hostStats{})
	return v.(*hostStats)
}

// dialForTransport dials the host named by the request URL's host, which RoundTrip set
// to the picked host's address.
func (c *Cluster) dialForTransport(ctx context.Context, _, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: only socket addresses can carry HTTP: %w", addr, err)
	}
	return c.Dial(ctx, Host{Addr: ap, Healthy: true})
}

// RoundTrip sends req to host h over the cluster's pooled HTTP/1.1 connections. req.Host
// keeps the downstream authority; only the connection target changes.
func (c *Cluster) RoundTrip(req *http.Request, h Host) (*http.Response, error) {
	if h.Pipe != "" {
		return nil, fmt.Errorf("send request to %s: pipe hosts cannot carry HTTP", h)
	}
	req.URL.Scheme = "http"
	req.URL.Host = h.Addr.String()
	c.stats.UpstreamRqTotal.Inc()
	c.hostStats(h).rqTotal.Add(1)
	return c.transport.RoundTrip(req)
}

// close releases pooled connections.
func (c *Cluster) close() { c.transport.CloseIdleConnections() }

type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

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
	hs := c.hostStats(h)
	return map[string]int64{
		"cx_active":       hs.cxActive.Load(),
		"cx_connect_fail": hs.cxFail.Load(),
		"cx_total":        hs.cxTotal.Load(),
		"rq_total":        hs.rqTotal.Load(),
	}
}
