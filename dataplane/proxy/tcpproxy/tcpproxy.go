// Package tcpproxy is the proxy's envoy.filters.network.tcp_proxy: it connects a
// downstream connection to a host of one cluster (or of one of weighted clusters) and
// copies bytes both ways, passing on half-closes, with Envoy's tcp.<stat_prefix>.* stats
// and access logs.
package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	tcpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshlab/meshlab/dataplane/proxy/accesslog"
	"github.com/meshlab/meshlab/dataplane/proxy/cluster"
	"github.com/meshlab/meshlab/dataplane/proxy/fieldcheck"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/istiostats"
	"github.com/meshlab/meshlab/dataplane/proxy/filters/peer"
	"github.com/meshlab/meshlab/dataplane/proxy/internalconn"
	"github.com/meshlab/meshlab/dataplane/proxy/stats"
)

// FilterName is the filter's Envoy name.
const FilterName = "envoy.filters.network.tcp_proxy"

var allow = fieldcheck.Allow{
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy":                               {"stat_prefix", "cluster", "weighted_clusters", "access_log", "idle_timeout", "max_downstream_connection_duration", "tunneling_config"},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.TunnelingConfig":               {"hostname", "headers_to_add"},
	"envoy.config.core.v3.HeaderValueOption":                                               {"header", "append_action", "keep_empty_value"},
	"envoy.config.core.v3.HeaderValue":                                                     {"key", "value"},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster":               {"clusters"},
	"envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.ClusterWeight": {"name", "weight"},
}

// Config is a compiled tcp_proxy.
type Config struct {
	StatPrefix string
	Cluster    string
	Weighted   []WeightedCluster
	AccessLogs []*accesslog.Logger
	// IdleTimeout closes both connections after this long without a byte either way
	// (idle_timeout; 0: never). Envoy's default for an unset field is 1h; the proxy
	// applies no timeout then, so that unconfigured connections keep the kernel's
	// zero-copy splice path.
	IdleTimeout time.Duration
	// MaxDuration closes both connections this long after the downstream one was
	// accepted (max_downstream_connection_duration; 0: never).
	MaxDuration time.Duration
	// Tunnel is tunneling_config (tunnel.go); nil: the bytes go upstream as they are.
	Tunnel *Tunnel
}

// WeightedCluster is one target of weighted_clusters.
type WeightedCluster struct {
	Name   string
	Weight uint32
}

// pick returns the cluster for one connection: Envoy's weighted pick (a random value
// modulo the total weight against cumulative weights) or the single cluster.
func (c *Config) pick() string {
	if len(c.Weighted) == 0 {
		return c.Cluster
	}
	var total uint64
	for _, w := range c.Weighted {
		total += uint64(w.Weight)
	}
	n := rand.Uint64N(max(total, 1))
	for _, w := range c.Weighted {
		if n < uint64(w.Weight) {
			return w.Name
		}
		n -= uint64(w.Weight)
	}
	return c.Weighted[len(c.Weighted)-1].Name
}

// Compile validates a TcpProxy typed_config and compiles it.
func Compile(a *anypb.Any) (*Config, error) {
	var p tcpv3.TcpProxy
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, fmt.Errorf("unpack TcpProxy: %w", err)
	}
	if err := p.ValidateAll(); err != nil {
		return nil, err
	}
	if err := allow.Check(&p); err != nil {
		return nil, err
	}
	cfg := &Config{StatPrefix: p.GetStatPrefix(), Cluster: p.GetCluster()}
	if d := p.GetIdleTimeout(); d != nil {
		cfg.IdleTimeout = d.AsDuration()
	}
	if d := p.GetMaxDownstreamConnectionDuration(); d != nil {
		cfg.MaxDuration = d.AsDuration()
	}
	for _, w := range p.GetWeightedClusters().GetClusters() {
		cfg.Weighted = append(cfg.Weighted, WeightedCluster{Name: w.GetName(), Weight: w.GetWeight()})
	}
	if cfg.Cluster == "" && len(cfg.Weighted) == 0 {
		return nil, errors.New("cluster_specifier: only cluster and weighted_clusters are supported")
	}
	logs, err := accesslog.Compile(p.GetAccessLog())
	if err != nil {
		return nil, err
	}
	cfg.AccessLogs = logs
	if cfg.Tunnel, err = compileTunnel(p.GetTunnelingConfig()); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Deps are what the filter needs from the rest of the proxy.
type Deps struct {
	Clusters *cluster.Manager // required
	Stats    *stats.Store     // required
	Logger   *slog.Logger     // required
}

// Downstream is what the listener knows about a connection it hands to the filter.
type Downstream struct {
	// Local is the connection's (restored original) destination, the target of
	// ORIGINAL_DST clusters.
	Local netip.AddrPort
	// Metadata is the connection's dynamic metadata (what an internal_upstream transport
	// socket passed through to an internal listener), which an ORIGINAL_DST cluster's
	// metadata_key may name the upstream by; nil for none.
	Metadata map[string]*structpb.Struct
	// FilterState is the connection's filter state (%FILTER_STATE%); nil for none.
	FilterState map[string]internalconn.Object
	// FilterChainName is the name of the filter chain that took the connection
	// (%FILTER_CHAIN_NAME%); ServerName is its TLS SNI (%REQUESTED_SERVER_NAME%). Empty
	// when unnamed or plaintext.
	FilterChainName string
	ServerName      string
	// Authorize runs the network filters ahead of tcp_proxy in the chain (network RBAC)
	// and returns whether the connection may go on, else the
	// %CONNECTION_TERMINATION_DETAILS% of its closing; nil allows. It runs once the
	// upstream connection is up: Envoy's tcp_proxy disables downstream reads when the
	// chain is created and connects at once, and RBAC decides on the first read, which
	// reads re-enabled by the upstream connection deliver.
	Authorize func() (ok bool, details string)
	// Inbound is the listener's traffic direction (istio.stats reports as destination).
	Inbound bool
	// IstioStats is the chain's istio.stats network filter, nil without it.
	IstioStats *istiostats.Config
	// MX reports whether the chain has an istio.metadata_exchange filter; Exchange is
	// the exchange it runs on this connection (nil when the ALPN did not ask for one).
	MX       bool
	Exchange *peer.Exchange
	// PeerSAN and LocalSAN are the first URI SANs of the downstream TLS peer's and
	// the local certificate, "" for plaintext.
	PeerSAN, LocalSAN string
}

// newInfo starts the access log entry of a downstream connection.
func newInfo(conn net.Conn, ds Downstream) *accesslog.Info {
	info := &accesslog.Info{Start: time.Now(), DownstreamLocal: ds.Local,
		FilterChainName: ds.FilterChainName, RequestedServerName: ds.ServerName,
		FilterState: internalconn.Values(ds.FilterState), DynamicMetadata: ds.Metadata,
		PeerURISAN: ds.PeerSAN, LocalURISAN: ds.LocalSAN}
	info.DownstreamPeer, _ = netip.ParseAddrPort(conn.RemoteAddr().String())
	return info
}

// Serve proxies conn to the cluster until both directions are closed or ctx ends. The
// caller closes conn.
func Serve(ctx context.Context, cfg *Config, deps Deps, conn net.Conn, ds Downstream) {
	local := ds.Local
	info := newInfo(conn, ds)
	if len(cfg.AccessLogs) > 0 {
		defer func() {
			info.Duration = time.Since(info.Start)
			accesslog.LogAll(cfg.AccessLogs, info)
		}()
	}
	var ist *istioSource
	if ds.IstioStats != nil {
		ist = &istioSource{ds: ds, info: info}
		rep := ds.IstioStats.StartTCP(deps.Stats, ist)
		defer rep.Close()
	}
	sc := deps.Stats.TCP(cfg.StatPrefix)
	sc.Counter("downstream_cx_total").Inc()
	name := cfg.pick()
	info.UpstreamCluster = name
	cl, ok := deps.Clusters.Get(name)
	if !ok {
		sc.Counter("downstream_cx_no_route").Inc()
		info.Flags |= accesslog.NoClusterFound
		return
	}
	host, err := cl.PickFor(local, ds.Metadata)
	if err != nil {
		info.Flags |= accesslog.NoHealthyUpstream
		return
	}
	info.UpstreamHost = host.String()
	if cl.Stats().UpstreamCxActive.Value() >= int64(cl.Config().Thresholds.MaxConnections) && cl.Config().Thresholds.MaxConnections > 0 {
		// Envoy's TCP connection pool refuses a connection over max_connections.
		cl.Stats().UpstreamCxOverflow().Inc()
		info.Flags |= accesslog.UpstreamOverflow
		return
	}
	up, err := cl.Dial(ctx, host)
	if err == nil && cfg.Tunnel != nil {
		var tun net.Conn
		if tun, err = cfg.Tunnel.open(ctx, up, info); err != nil {
			_ = up.Close()
		}
		up = tun
	}
	if err != nil {
		deps.Logger.Debug("tcp_proxy upstream connect failed", "cluster", name, "err", err)
		cl.ReportResult(host, 503)
		info.Flags |= accesslog.UpstreamConnectionFailure
		info.UpstreamTransportFailureReason = cluster.TransportFailureReason(err)
		return
	}
	cl.ReportResult(host, 200)
	if ist != nil {
		ist.upstream(up, cl, host)
	}
	info.UpstreamLocal = up.LocalAddr().String()
	defer up.Close()
	if ds.Authorize != nil {
		if ok, details := ds.Authorize(); !ok {
			// Denied: both connections close with nothing copied, and the entry has the
			// upstream host, no bytes, no response flag and the filter's details.
			info.ConnectionTerminationDetails = details
			return
		}
	}
	stop := context.AfterFunc(ctx, func() {
		_ = up.Close()
		_ = conn.Close()
	})
	defer stop()
	closeBoth := func() {
		_ = up.Close()
		_ = conn.Close()
	}
	if cfg.MaxDuration > 0 {
		t := time.AfterFunc(time.Until(info.Start.Add(cfg.MaxDuration)), func() {
			sc.Counter("max_downstream_connection_duration").Inc()
			closeBoth()
		})
		defer t.Stop()
	}
	copyFn := io.Copy
	if cfg.IdleTimeout > 0 {
		w := newIdleWatch(cfg.IdleTimeout, func() {
			sc.Counter("idle_timeout").Inc()
			closeBoth()
		})
		defer w.stop()
		copyFn = w.copy
	}
	rx, tx := sc.Counter("downstream_cx_rx_bytes_total"), sc.Counter("downstream_cx_tx_bytes_total")
	var wg sync.WaitGroup
	var rxN int64
	wg.Add(1)
	var upW, downW io.Writer = up, conn
	if ist != nil { // istio.stats reads the byte counts while the connection lasts
		upW, downW = countWriter{up, &ist.received}, countWriter{conn, &ist.sent}
	}
	go func() {
		defer wg.Done()
		n, _ := copyFn(upW, conn)
		rx.Add(n)
		rxN = n
		closeWrite(up)
	}()
	n, _ := copyFn(downW, up)
	tx.Add(n)
	closeWrite(conn)
	wg.Wait()
	info.BytesReceived, info.BytesSent = rxN, n
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// idleWatch fires once no copy moved a byte for the timeout. Copies stamp their
// activity; the timer re-arms itself for the remainder instead of being reset per read.
type idleWatch struct {
	timeout time.Duration
	last    atomic.Int64 // unix nanoseconds of the last byte moved
	timer   *time.Timer
	fire    func()
}

func newIdleWatch(timeout time.Duration, fire func()) *idleWatch {
	w := &idleWatch{timeout: timeout, fire: fire}
	w.last.Store(time.Now().UnixNano())
	w.timer = time.AfterFunc(timeout, w.check)
	return w
}

func (w *idleWatch) check() {
	idle := time.Since(time.Unix(0, w.last.Load()))
	if idle >= w.timeout {
		w.fire()
		return
	}
	w.timer.Reset(w.timeout - idle)
}

func (w *idleWatch) stop() { w.timer.Stop() }

// copy is io.Copy that stamps activity on every chunk.
func (w *idleWatch) copy(dst io.Writer, src io.Reader) (int64, error) {
	buf := make([]byte, 32*1024)
	var total int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			w.last.Store(time.Now().UnixNano())
			m, werr := dst.Write(buf[:n])
			total += int64(m)
			if werr != nil {
				return total, werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return total, nil
			}
			return total, err
		}
	}
}
